//! Process lifecycle: persistence across restarts, broker expiry, connection loss,
//! configuration printing and graceful shutdown.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use e2e::broker::FakeBroker;
use e2e::nameserver::Options;
use e2e::wait::eventually;
use e2e::{Client, NameServer, binary};
use protocol::RemotingCommand;
use protocol::body::{self, KvTable};
use protocol::code::{request, response};
use protocol::header::{
    DeleteKVConfigRequestHeader, GetKVConfigRequestHeader, GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader, GetRouteInfoRequestHeader, PutKVConfigRequestHeader,
};

fn put(ns: &str, key: &str, value: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::PUT_KV_CONFIG,
        &PutKVConfigRequestHeader {
            namespace: ns.into(),
            key: key.into(),
            value: value.into(),
        },
    )
}

fn get(ns: &str, key: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::GET_KV_CONFIG,
        &GetKVConfigRequestHeader {
            namespace: ns.into(),
            key: key.into(),
        },
    )
}

fn route_request(topic: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    )
}

/// Polls until `topic` has no route, returning how long that took.
async fn wait_route_gone(client: &Client, topic: &str, within: Duration) -> Duration {
    let start = Instant::now();
    let what = format!("the route of {topic} to go");
    eventually(within, &what, || async {
        let r = client.request(route_request(topic)).await.unwrap();
        r.code == response::TOPIC_NOT_EXIST
    })
    .await;
    start.elapsed()
}

#[tokio::test]
async fn kv_config_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let ns = NameServer::start_in(dir.path(), Options::default());
        let c = Client::connect(ns.port).await.unwrap();
        for (k, v) in [("a", "1"), ("b", "2"), ("gone", "x")] {
            let r = c.request(put("NS1", k, v)).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        let r = c
            .request(RemotingCommand::request(
                request::DELETE_KV_CONFIG,
                &DeleteKVConfigRequestHeader {
                    namespace: "NS1".into(),
                    key: "gone".into(),
                },
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        // SIGKILL on drop: the file must already be complete.
    }
    let text = std::fs::read_to_string(dir.path().join("kvConfig.json")).unwrap();
    assert_eq!(text, r#"{"configTable":{"NS1":{"a":"1","b":"2"}}}"#);

    let ns = NameServer::start_in(dir.path(), Options::default());
    let c = Client::connect(ns.port).await.unwrap();
    let r = c.request(get("NS1", "b")).await.unwrap();
    assert_eq!(r.code, response::SUCCESS);
    let h: GetKVConfigResponseHeader = r.header().unwrap();
    assert_eq!(h.value.as_deref(), Some("2"));
    let r = c.request(get("NS1", "gone")).await.unwrap();
    assert_eq!(r.code, response::QUERY_NOT_FOUND);

    let list = |ns: &str| {
        RemotingCommand::request(
            request::GET_KVLIST_BY_NAMESPACE,
            &GetKVListByNamespaceRequestHeader {
                namespace: ns.into(),
            },
        )
    };
    let r = c.request(list("NS1")).await.unwrap();
    let table: KvTable = body::decode(&r.body).unwrap();
    assert_eq!(table.table.len(), 2);
    assert_eq!(
        c.request(list("Empty")).await.unwrap().code,
        response::QUERY_NOT_FOUND
    );
}

#[tokio::test]
async fn silent_broker_expires_and_its_connection_is_closed() {
    let ns = NameServer::start(
        Options::default()
            .config("brokerChannelExpiredMillis", 1500)
            .config("scanNotActiveBrokerIntervalMillis", 200),
    );
    let broker_conn = Client::connect(ns.port).await.unwrap();
    let admin = Client::connect(ns.port).await.unwrap();
    let broker = FakeBroker::new("C", "quiet", "127.0.0.1:14911", 0).topic("Quiet", 1);
    broker_conn.request(broker.register(false)).await.unwrap();

    let took = wait_route_gone(&admin, "Quiet", Duration::from_secs(15)).await;
    assert!(
        took >= Duration::from_millis(1000),
        "expired too early: {took:?}"
    );
    assert!(broker_conn.wait_closed(Duration::from_secs(5)).await);
    assert!(ns.log().contains("broker expired"));

    // The admin connection, which registered nothing, is still served.
    let r = admin.request(route_request("Quiet")).await.unwrap();
    assert_eq!(r.code, response::TOPIC_NOT_EXIST);
}

#[tokio::test]
async fn broker_is_dropped_when_its_connection_closes() {
    let ns = NameServer::start(Options::default());
    let admin = Client::connect(ns.port).await.unwrap();
    let master_conn = Client::connect(ns.port).await.unwrap();
    let slave_conn = Client::connect(ns.port).await.unwrap();
    let master = FakeBroker::new("C", "b", "127.0.0.1:15911", 0).topic("Live", 2);
    let slave = FakeBroker::new("C", "b", "127.0.0.1:16911", 1).topic("Live", 2);
    master_conn.request(master.register(false)).await.unwrap();
    slave_conn.request(slave.register(false)).await.unwrap();

    // Losing the slave keeps the topic; losing the master too removes it.
    slave_conn.close().await;
    eventually(
        Duration::from_secs(5),
        "the slave to be dropped",
        || async {
            let r = admin.request(route_request("Live")).await.unwrap();
            let route = protocol::body::TopicRouteData::decode(&r.body).unwrap();
            route.broker_datas[0].broker_addrs.len() == 1
        },
    )
    .await;
    master_conn.close().await;
    // Default expiry is 120 s, so disappearing within seconds means "on close".
    wait_route_gone(&admin, "Live", Duration::from_secs(5)).await;
}

#[test]
fn print_config_shows_file_and_flag_values() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(
        &conf,
        "listenPort=19999\norderMessageEnable=true\nserverWorkerThreads=4\nsomeFutureKey=1\n",
    )
    .unwrap();
    let out = std::process::Command::new(binary::path("rmq-nameserver"))
        .arg("-c")
        .arg(&conf)
        .args(["-p", "--listen-port", "20001"])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("listenPort=20001\n"), "{stdout}");
    assert!(stdout.contains("orderMessageEnable=true\n"));
    assert!(stdout.contains("serverWorkerThreads=4\n"));
    let home_kv = dir.path().join("namesrv").join("kvConfig.json");
    assert!(stdout.contains(&format!("kvConfigPath={}\n", home_kv.display())));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("someFutureKey"), "{stderr}");

    std::fs::write(&conf, "listenPort=notaport\n").unwrap();
    let out = std::process::Command::new(binary::path("rmq-nameserver"))
        .arg("-c")
        .arg(&conf)
        .arg("-p")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("listenPort"));
}

#[tokio::test]
async fn sigterm_shuts_down_gracefully() {
    let ns = NameServer::start(Options::default());
    let port = ns.port;
    let c = Client::connect(port).await.unwrap();
    let status = tokio::task::spawn_blocking(move || ns.terminate(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("nameserver did not exit after SIGTERM");
    assert!(status.success(), "{status}");
    assert!(c.wait_closed(Duration::from_secs(5)).await);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

/// Start-up messages as a terminal user meets them: a misspelt namesrv.conf key is on
/// stderr (where the log goes) without colour codes when stderr is not a terminal, and a
/// bad value stops the process with the cause said once and the valid values listed.
#[test]
fn start_up_messages_are_plain_and_say_what_is_wrong() {
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("namesrv.conf");
    let log = dir.path().join("namesrv.log");
    std::fs::write(
        &conf,
        format!(
            "listenPort={}\nmetricsPort={}\nkvConfigPath={}\nlistenPrt=1\n",
            e2e::ports::free_port(),
            e2e::ports::free_port(),
            dir.path().join("kv.json").display()
        ),
    )
    .expect("write namesrv.conf");
    let mut child = std::process::Command::new(binary::path("rmq-nameserver"))
        .arg("-c")
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("create log"))
        .spawn()
        .expect("spawn rmq-nameserver");
    e2e::wait::eventually_sync(Duration::from_secs(15), "the warning on stderr", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("listenPrt"))
    });
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).expect("read log");
    assert!(text.contains("unknown config key ignored"), "{text}");
    assert!(!text.contains('\u{1b}'), "colour codes in a file: {text:?}");

    std::fs::write(&conf, "tls.server.mode=sometimes\n").expect("write namesrv.conf");
    let out = std::process::Command::new(binary::path("rmq-nameserver"))
        .arg("-c")
        .arg(&conf)
        .output()
        .expect("run rmq-nameserver");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("\"sometimes\"").count(), 1, "{stderr}");
    assert!(
        stderr.contains("expected one of disabled, permissive, enforcing")
            && !stderr.contains("backtrace"),
        "{stderr}"
    );
}
