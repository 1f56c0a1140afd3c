//! Resource bounds of the real nameserver process: runtime config ranges,
//! the REGISTER_BROKER inflation cap, connection caps.

use std::time::Duration;

use e2e::broker::FakeBroker;
use e2e::nameserver::Options;
use e2e::{Client, NameServer, http};
use protocol::RemotingCommand;
use protocol::body::TopicRouteData;
use protocol::code::{request, response};
use protocol::header::GetRouteInfoRequestHeader;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

fn route(topic: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    )
}

fn update(body: &str) -> RemotingCommand {
    RemotingCommand::bare_request(request::UPDATE_NAMESRV_CONFIG)
        .with_body(body.as_bytes().to_vec())
}

/// `brokerChannelExpiredMillis=1` over UPDATE_NAMESRV_CONFIG is refused, and
/// registered brokers survive the following scans.
#[tokio::test]
async fn runtime_config_updates_stay_in_safe_ranges() {
    let ns = NameServer::start(Options::default().config("scanNotActiveBrokerIntervalMillis", 100));
    let c = Client::connect(ns.port).await.unwrap();
    let broker = FakeBroker::new("C", "b", "127.0.0.1:17911", 0).topic("Kept", 2);
    assert_eq!(
        c.request(broker.register(false)).await.unwrap().code,
        response::SUCCESS
    );
    for body in [
        "brokerChannelExpiredMillis=1",
        "orderMessageEnable=maybe",
        "productEnvName=a b",
    ] {
        let r = c.request(update(body)).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR, "{body}");
    }
    // Time itself: had `brokerChannelExpiredMillis=1` been applied, the expiry scan would
    // have dropped the broker within this wait; what is checked is that nothing happened.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = c.request(route("Kept")).await.unwrap();
    assert_eq!(r.code, response::SUCCESS, "the broker is still registered");
    let data = TopicRouteData::decode(&r.body).unwrap();
    assert_eq!(data.broker_datas.len(), 1);
    let r = c
        .request(update("brokerChannelExpiredMillis=60000"))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS);
}

/// A compressed REGISTER_BROKER body inflating past `maxRegisterBodyBytes` is
/// refused (and counted); other brokers register fine.
#[tokio::test]
async fn register_bodies_inflate_within_the_cap() {
    let ns = NameServer::start(Options::default().config("maxRegisterBodyBytes", 64 * 1024));
    let c = Client::connect(ns.port).await.unwrap();
    let mut big = FakeBroker::new("C", "big", "127.0.0.1:17921", 0);
    for i in 0..5000 {
        big = big.topic(&format!("Topic_{i:05}"), 4);
    }
    let r = c.request(big.register(true)).await.unwrap();
    assert_eq!(r.code, response::SYSTEM_ERROR);
    let small = FakeBroker::new("C", "small", "127.0.0.1:17931", 0).topic("Small", 1);
    assert_eq!(
        c.request(small.register(true)).await.unwrap().code,
        response::SUCCESS
    );
    let (_, metrics) = http::get(ns.http_port, "/metrics").await.unwrap();
    assert!(
        metrics.contains("rmq_namesrv_register_refused_total 1"),
        "{metrics}"
    );
}

/// Over `maxConnections` a peer is closed at once; admitted clients keep
/// working.
#[tokio::test]
async fn connection_cap_closes_over_limit_peers() {
    let ns = NameServer::start(Options::default().config("maxConnections", 2));
    // Nothing else holds a remoting slot (the harness probes readiness over HTTP).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, metrics) = http::get(ns.http_port, "/metrics").await.unwrap();
        if metrics.contains(r#"rmq_namesrv_listener_connections{listener="remoting"} 0"#) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{metrics}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let a = Client::connect(ns.port).await.unwrap();
    let b = Client::connect(ns.port).await.unwrap();
    for c in [&a, &b] {
        let r = c.request(route("None")).await;
        let (_, metrics) = http::get(ns.http_port, "/metrics").await.unwrap();
        let listener: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("rmq_namesrv_listener"))
            .collect();
        assert_eq!(
            r.as_ref().map(|r| r.code).ok(),
            Some(response::TOPIC_NOT_EXIST),
            "{r:?}; {listener:?}"
        );
    }
    let mut third = TcpStream::connect(("127.0.0.1", ns.port)).await.unwrap();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "closed at once: {read:?}"
    );
    assert_eq!(
        a.request(route("None")).await.unwrap().code,
        response::TOPIC_NOT_EXIST
    );
    let (_, metrics) = http::get(ns.http_port, "/metrics").await.unwrap();
    assert!(
        metrics
            .contains(r#"rmq_namesrv_listener_connections_refused_total{listener="remoting"} 1"#),
        "{metrics}"
    );
}

/// REGISTER_BROKER bodies are decoded `maxConcurrentRegistrations` at a time on the
/// blocking pool: a crowd of large registrations waits for its turn while route lookups
/// keep being answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_registrations_wait_their_turn_while_routes_are_served() {
    let ns = NameServer::start(Options::default().config("maxConcurrentRegistrations", 1));
    let c = Client::connect(ns.port).await.unwrap();
    let victim = FakeBroker::new("C", "victim", "127.0.0.1:17941", 0).topic("VictimTopic", 4);
    assert_eq!(
        c.request(victim.register(false)).await.unwrap().code,
        response::SUCCESS
    );
    let mut big = FakeBroker::new("C", "crowd", "127.0.0.1:17951", 0);
    for i in 0..20_000 {
        big = big.topic(&format!("Crowd_{i:05}"), 4);
    }
    let crowd: Vec<_> = (0..6)
        .map(|_| {
            let request = big.register(false);
            let port = ns.port;
            tokio::spawn(async move {
                let c = Client::connect(port).await.expect("crowd connects");
                for _ in 0..3 {
                    let r = c
                        .request(request.clone())
                        .await
                        .expect("registration answered");
                    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
                }
            })
        })
        .collect();
    for _ in 0..50 {
        let r = tokio::time::timeout(Duration::from_secs(30), c.request(route("VictimTopic")))
            .await
            .expect("route answered")
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    }
    for task in crowd {
        task.await.expect("crowd task");
    }
}
