//! `rmqctl` end to end: every subcommand family against real rmq-nameserver and
//! rmq-broker processes, including the failures an operator meets (unknown topic or
//! group, refused config key, unreachable nameserver) and their exit codes
//! (0 ok, 1 refused / not found, 2 bad command line, 3 unreachable).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::broker_harness::{TempBroker, with_fields};
use e2e::cli::{CliOutput, rmqctl_json, run};
use e2e::metrics::wait_dispatched;
use e2e::nameserver::Options;
use e2e::wait::{eventually_ok_sync, eventually_sync};
use e2e::{Client, NameServer};
use protocol::RemotingCommand;
use protocol::code::{request, response};
use serde_json::Value;

struct Cluster {
    ns: NameServer,
    broker: TempBroker,
}

impl Cluster {
    /// A nameserver and a broker registered with it.
    fn start() -> Self {
        let ns = NameServer::start(Options::default());
        let broker = TempBroker::start(Some(ns.port), &[]);
        let c = Self { ns, broker };
        eventually_ok_sync(Duration::from_secs(15), "the broker to register", || {
            let out = c.ctl(&["cluster", "list"]);
            let registered = out.code == 0
                && out.json()["brokers"]
                    .as_array()
                    .is_some_and(|b| !b.is_empty());
            if registered {
                Ok(())
            } else {
                Err(format!("{out:?}"))
            }
        });
        c
    }

    fn ctl(&self, args: &[&str]) -> CliOutput {
        rmqctl_json(self.ns.port, args)
    }

    fn addr(&self) -> String {
        self.broker.broker.addr()
    }
}

fn assert_refused(out: &CliOutput, code_label: &str) {
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains(code_label),
        "stderr lacks {code_label}: {out:?}"
    );
}

#[test]
fn cluster_and_topic_family() {
    let c = Cluster::start();
    let brokers = c.ctl(&["cluster", "list"]).ok().json();
    let b = &brokers["brokers"][0];
    assert_eq!(b["cluster"], "TestCluster");
    assert_eq!(b["brokerName"], "broker-e2e");
    assert_eq!(b["addr"].as_str(), Some(c.addr().as_str()));
    assert_eq!(b["reachable"], true);
    // Counters are JSON numbers, not strings.
    assert!(b["msgPutTotalTodayNow"].is_i64(), "{b}");
    assert!(b["msgGetTotalTodayNow"].is_i64(), "{b}");

    let created = c
        .ctl(&["topic", "create", "-t", "CliTopic", "-r", "3", "-w", "3"])
        .ok()
        .json();
    assert_eq!(created["config"]["writeQueueNums"], 3);
    let list = c.ctl(&["topic", "list"]).ok().json();
    assert!(
        list["topics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "CliTopic")
    );
    let route = c.ctl(&["topic", "route", "-t", "CliTopic"]).ok().json();
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 3);
    assert_eq!(route["brokerDatas"][0]["brokerName"], "broker-e2e");

    // Update keeps unspecified settings; the route shows the change once re-registered.
    c.ctl(&["topic", "update", "-t", "CliTopic", "-w", "2", "-p", "4"])
        .ok();
    let status = c.ctl(&["topic", "status", "-t", "CliTopic"]).ok().json();
    // Stats list the write queues of the broker's current config.
    assert_eq!(status["queues"].as_array().unwrap().len(), 2);
    assert!(
        status["queues"]
            .as_array()
            .unwrap()
            .iter()
            .all(|q| q["maxOffset"] == 0)
    );

    // Failures: unknown topic (nameserver and broker refusals), update of a missing topic.
    assert_refused(
        &c.ctl(&["topic", "status", "-t", "NoSuchTopic"]),
        "TOPIC_NOT_EXIST (17)",
    );
    assert_refused(
        &c.ctl(&["topic", "route", "-t", "NoSuchTopic"]),
        "TOPIC_NOT_EXIST (17)",
    );
    let missing = c.ctl(&["topic", "update", "-t", "NoSuchTopic", "-w", "2"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("does not exist on broker broker-e2e"),
        "{missing:?}"
    );
    assert_refused(
        &c.ctl(&["topic", "create", "-t", "bad topic!"]),
        "SYSTEM_ERROR (1)",
    );

    let deleted = c.ctl(&["topic", "delete", "-t", "CliTopic"]).ok().json();
    assert_eq!(deleted["deleted"], true);
    assert_refused(
        &c.ctl(&["topic", "route", "-t", "CliTopic"]),
        "TOPIC_NOT_EXIST (17)",
    );
    let list = c.ctl(&["topic", "list"]).ok().json();
    assert!(
        !list["topics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "CliTopic")
    );
}

#[test]
fn group_and_consumer_family() {
    let c = Cluster::start();
    c.ctl(&[
        "group",
        "create",
        "-g",
        "CliGroup",
        "--retry-max-times",
        "3",
    ])
    .ok();
    c.ctl(&[
        "group",
        "update",
        "-g",
        "CliGroup",
        "--consume-enable",
        "false",
        "--fifo",
        "true",
    ])
    .ok();
    let list = c.ctl(&["group", "list", "-b", &c.addr()]).ok().json();
    let g = list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["config"]["groupName"] == "CliGroup")
        .expect("group listed")
        .clone();
    assert_eq!(g["config"]["retryMaxTimes"], 3);
    assert_eq!(g["config"]["consumeEnable"], false);
    // 5.x's FIFO flag, kept by the broker (POP consumers of the group get queues in order).
    assert_eq!(g["config"]["consumeMessageOrderly"], true);
    let missing = c.ctl(&["group", "update", "-g", "NoGroup", "--broadcast", "false"]);
    assert_eq!(missing.code, 1, "{missing:?}");

    // Progress: 3 messages in queue 0, the group committed offset 1 -> lag 2.
    c.ctl(&["topic", "create", "-t", "LagTopic", "-r", "1", "-w", "1"])
        .ok();
    for body in ["a", "b", "c"] {
        c.ctl(&["message", "send", "-t", "LagTopic", "--body", body])
            .ok();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let port = c.broker.broker.port;
    let hold = rt.block_on(async move {
        let raw = Client::connect(port).await.unwrap();
        let r = raw
            .request(with_fields(
                request::UPDATE_CONSUMER_OFFSET,
                &[
                    ("consumerGroup", "CliGroup".to_owned()),
                    ("topic", "LagTopic".to_owned()),
                    ("queueId", "0".to_owned()),
                    ("commitOffset", "1".to_owned()),
                ],
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let hb = r#"{"clientID":"127.0.0.1@cli-e2e","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CliGroup","messageModel":"CLUSTERING","subscriptionDataSet":[{"subString":"*","subVersion":1,"topic":"LagTopic"}]}],"producerDataSet":[]}"#;
        let r = raw
            .request(RemotingCommand::bare_request(request::HEART_BEAT).with_body(hb.as_bytes().to_vec()))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        raw
    });
    // The three sends are stored; the ConsumeQueue shows them once reput has dispatched
    // them, which under load can trail the SEND_OK by a moment.
    rt.block_on(wait_dispatched(
        c.broker.broker.http_port,
        Duration::from_secs(15),
    ));
    let progress = c
        .ctl(&["consumer", "progress", "-g", "CliGroup", "-t", "LagTopic"])
        .ok()
        .json();
    let q = &progress["queues"][0];
    assert_eq!(
        (
            q["brokerOffset"].as_i64(),
            q["consumerOffset"].as_i64(),
            q["lag"].as_i64()
        ),
        (Some(3), Some(1), Some(2))
    );
    assert!(q["lastTimestamp"].as_i64().unwrap() > 0);
    assert_eq!(progress["totalLag"], 2);
    let table = run(
        "rmqctl",
        &[
            "-n",
            &format!("127.0.0.1:{}", c.ns.port),
            "consumer",
            "progress",
            "-g",
            "CliGroup",
        ],
    )
    .ok();
    assert!(table.stdout.contains("total lag 2"), "{table:?}");

    let conns = c
        .ctl(&["consumer", "connections", "-g", "CliGroup"])
        .ok()
        .json();
    assert_eq!(conns["connections"][0]["clientId"], "127.0.0.1@cli-e2e");
    assert!(conns["subscriptions"]["LagTopic"].is_object());
    assert_refused(
        &c.ctl(&["consumer", "connections", "-g", "Nobody"]),
        "CONSUMER_NOT_ONLINE (206)",
    );
    assert_refused(
        &c.ctl(&[
            "consumer",
            "progress",
            "-g",
            "CliGroup",
            "-t",
            "NoSuchTopic",
        ]),
        "TOPIC_NOT_EXIST (17)",
    );
    // A group no broker knows is "not found" (exit 1), with or without -t, and -o json
    // puts the failure on stdout as a document too.
    for args in [
        &["consumer", "progress", "-g", "NoSuchGroup"][..],
        &[
            "consumer",
            "progress",
            "-g",
            "NoSuchGroup",
            "-t",
            "LagTopic",
        ],
    ] {
        let out = c.ctl(args);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(
            out.stderr.contains("consumer group NoSuchGroup not found"),
            "{out:?}"
        );
        let doc = out.json();
        assert_eq!(doc["exitCode"], 1, "{doc}");
        assert!(
            doc["error"]
                .as_str()
                .is_some_and(|e| e.contains("NoSuchGroup not found")),
            "{doc}"
        );
    }
    drop(hold);

    c.ctl(&["group", "delete", "-g", "CliGroup", "--remove-offset"])
        .ok();
    let list = c.ctl(&["group", "list"]).ok().json();
    assert!(
        !list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["config"]["groupName"] == "CliGroup")
    );
}

#[test]
fn message_family() {
    let c = Cluster::start();
    c.ctl(&["topic", "create", "-t", "MsgTopic", "-r", "2", "-w", "2"])
        .ok();
    let sent = c
        .ctl(&[
            "message",
            "send",
            "-t",
            "MsgTopic",
            "--body",
            "hello",
            "--tags",
            "tA",
            "-k",
            "order-1,x",
        ])
        .ok()
        .json();
    assert_eq!(sent["result"]["status"], "SEND_OK");
    let uniq = sent["result"]["msgId"].as_str().unwrap().to_owned();
    let offset_id = sent["result"]["offsetMsgId"].as_str().unwrap().to_owned();
    let before_second = e2e_now_ms();
    // Time itself: the lookup by `--timestamp` below is about store times, and the
    // second message's must lie clearly after `before_second`.
    std::thread::sleep(Duration::from_millis(20));
    c.ctl(&[
        "message", "send", "-t", "MsgTopic", "--body", "world", "-q", "1", "-k", "order-2",
    ])
    .ok();
    // Consume and query read the ConsumeQueues and the index.
    e2e::wait::runtime().block_on(wait_dispatched(
        c.broker.broker.http_port,
        Duration::from_secs(10),
    ));

    let all = c.ctl(&["message", "consume", "-t", "MsgTopic"]).ok().json();
    assert_eq!(all["count"], 2);
    let bodies: Vec<&str> = all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["hello", "world"]);
    let from_ts = c
        .ctl(&[
            "message",
            "consume",
            "-t",
            "MsgTopic",
            "--timestamp",
            &before_second.to_string(),
        ])
        .ok()
        .json();
    assert_eq!(from_ts["count"], 1, "{from_ts}");
    assert_eq!(from_ts["messages"][0]["body"], "world");
    let from_offset = c
        .ctl(&[
            "message", "consume", "-t", "MsgTopic", "-q", "0", "--offset", "1",
        ])
        .ok()
        .json();
    assert_eq!(from_offset["count"], 0);

    let q = c
        .ctl(&["message", "query", "-t", "MsgTopic", "-k", "order-1"])
        .ok()
        .json();
    assert_eq!(q["count"], 1);
    assert_eq!(q["messages"][0]["msgId"].as_str(), Some(uniq.as_str()));
    assert_eq!(q["messages"][0]["properties"]["TAGS"], "tA");
    let none = c.ctl(&["message", "query", "-t", "MsgTopic", "-k", "order-404"]);
    assert_eq!(none.code, 1, "{none:?}");

    let by_offset = c.ctl(&["message", "view", "--id", &offset_id]).ok().json();
    assert_eq!(by_offset["body"], "hello");
    let by_uniq = c
        .ctl(&["message", "view", "--id", &uniq, "-t", "MsgTopic"])
        .ok()
        .json();
    assert_eq!(by_uniq["offsetMsgId"].as_str(), Some(offset_id.as_str()));
    assert_eq!(c.ctl(&["message", "view", "--id", "nothex"]).code, 1);
    // A 32-hex id whose "store host" is not a broker of the cluster (a client msgId, say)
    // is not dialled: without --topic the command asks for it (exit 2), with --topic it
    // is not found (exit 1); neither claims a broker is down (exit 3).
    let foreign = "0808080800002A9F0000000000000000";
    let out = c.ctl(&["message", "view", "--id", foreign]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("8.8.8.8:10911") && out.stderr.contains("pass --topic"),
        "{out:?}"
    );
    let out = c.ctl(&["message", "view", "--id", foreign, "-t", "MsgTopic"]);
    assert_eq!(out.code, 1, "{out:?}");

    assert_refused(
        &c.ctl(&[
            "message",
            "send",
            "-t",
            "NoSuchTopic",
            "--body",
            "x",
            "--no-auto-create",
        ]),
        "TOPIC_NOT_EXIST (17)",
    );
    assert_eq!(
        c.ctl(&[
            "message", "send", "-t", "MsgTopic", "--body", "x", "-q", "9"
        ])
        .code,
        1
    );
}

/// A send to a topic without a route goes out on the TBW102 route, like the Java
/// producer, and the broker creates the topic when `autoCreateTopicEnable` is on; when it
/// is off the failure says what to do.
#[test]
fn message_send_to_a_new_topic_auto_creates_it() {
    let c = Cluster::start();
    let sent = c
        .ctl(&["message", "send", "-t", "BornBySend", "--body", "first"])
        .ok()
        .json();
    assert_eq!(sent["result"]["status"], "SEND_OK", "{sent}");
    // Registered with the nameserver from now on: consume finds it by its own route.
    eventually_ok_sync(
        Duration::from_secs(40),
        "the topic to be consumable",
        || {
            let out = c.ctl(&["message", "consume", "-t", "BornBySend", "--max", "4"]);
            let consumable = out.code == 0
                && out.json()["messages"]
                    .as_array()
                    .is_some_and(|m| m.len() == 1);
            if consumable {
                Ok(())
            } else {
                Err(format!("{out:?}"))
            }
        },
    );

    let ns = NameServer::start(Options::default());
    let strict = TempBroker::start(Some(ns.port), &[("autoCreateTopicEnable", "false")]);
    eventually_sync(Duration::from_secs(15), "the broker to register", || {
        rmqctl_json(ns.port, &["cluster", "list"]).json()["brokers"]
            .as_array()
            .is_some_and(|b| !b.is_empty())
    });
    let out = rmqctl_json(
        ns.port,
        &["message", "send", "-t", "NotAllowed", "--body", "x"],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("topic NotAllowed does not exist")
            && out.stderr.contains("autoCreateTopicEnable"),
        "{out:?}"
    );
    drop(strict);
}

#[test]
fn broker_and_kv_family() {
    let c = Cluster::start();
    let rt = c.ctl(&["broker", "runtime", "-b", &c.addr()]).ok().json();
    assert_eq!(rt["brokers"][c.addr()]["brokerVersionDesc"], "V4_9_8");
    let v = c
        .ctl(&[
            "broker",
            "config",
            "get",
            "-b",
            &c.addr(),
            "-k",
            "brokerName",
        ])
        .ok()
        .json();
    assert_eq!(v["value"], "broker-e2e");
    let updated = c
        .ctl(&[
            "broker",
            "config",
            "update",
            "-b",
            &c.addr(),
            "longPollingEnable=false",
        ])
        .ok();
    // The broker's answer says where the change was kept.
    assert!(
        updated.stdout.contains("written to") && updated.stdout.contains("broker.conf"),
        "{updated:?}"
    );
    let v = c
        .ctl(&[
            "broker",
            "config",
            "get",
            "-b",
            &c.addr(),
            "-k",
            "longPollingEnable",
        ])
        .ok()
        .json();
    assert_eq!(v["value"], "false");
    let refused = c.ctl(&["broker", "config", "update", "storePathRootDir=/tmp/evil"]);
    assert_refused(&refused, "NO_PERMISSION (16)");
    assert!(refused.stderr.contains(&c.addr()), "{refused:?}");
    assert_eq!(
        c.ctl(&[
            "broker",
            "config",
            "get",
            "-b",
            &c.addr(),
            "-k",
            "noSuchKey"
        ])
        .code,
        1
    );

    c.ctl(&["kv", "put", "--namespace", "NS", "-k", "a", "-v", "1"])
        .ok();
    c.ctl(&["kv", "put", "--namespace", "NS", "-k", "b", "-v", "2"])
        .ok();
    assert_eq!(
        c.ctl(&["kv", "get", "--namespace", "NS", "-k", "a"])
            .ok()
            .json()["value"],
        "1"
    );
    let list = c.ctl(&["kv", "list", "--namespace", "NS"]).ok().json();
    assert_eq!(list["table"], serde_json::json!({"a": "1", "b": "2"}));
    c.ctl(&["kv", "delete", "--namespace", "NS", "-k", "a"])
        .ok();
    let gone = c.ctl(&["kv", "get", "--namespace", "NS", "-k", "a"]);
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("no KV config NS/a"));
    assert_eq!(
        c.ctl(&["kv", "list", "--namespace", "Empty"]).ok().json()["table"],
        Value::Object(Default::default())
    );
}

#[test]
fn unreachable_nameserver_and_bad_usage() {
    // Free now and outside the ephemeral range, so nothing will be listening there.
    let port = e2e::ports::free_port();
    for args in [
        &["cluster", "list"][..],
        &["topic", "route", "-t", "T"],
        &["kv", "get", "--namespace", "N", "-k", "k"],
    ] {
        let out = rmqctl_json(port, args);
        assert_eq!(out.code, 3, "{out:?}");
        assert!(
            out.stderr
                .contains(&format!("cannot connect to nameserver 127.0.0.1:{port}")),
            "{out:?}"
        );
    }
    let usage = run("rmqctl", &["topic", "create"]);
    assert_eq!(usage.code, 2, "{usage:?}");
    // A nameserver address without its port is a usage error, not "unreachable".
    let no_port = run("rmqctl", &["-n", "127.0.0.1", "cluster", "list"]);
    assert_eq!(no_port.code, 2, "{no_port:?}");
    assert!(no_port.stderr.contains("127.0.0.1:9876"), "{no_port:?}");
    let no_port = run(
        "rmqctl",
        &["-n", "127.0.0.1", "-o", "json", "cluster", "list"],
    );
    assert_eq!(no_port.code, 2, "{no_port:?}");
    assert!(
        no_port.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("is not host:port")),
        "{no_port:?}"
    );
    // -o json: the failure as a document on stdout as well as text on stderr.
    let out = rmqctl_json(port, &["cluster", "list"]);
    assert_eq!(out.json()["exitCode"], 3, "{out:?}");
    let help = run("rmqctl", &["topic", "create", "--help"]).ok();
    assert!(help.stdout.contains("Example:"), "{help:?}");
    // The command's own options first, the shared ones in their sections; the mqadmin
    // counterpart named; no option without a description.
    let help = run("rmqctl", &["consumer", "reset", "--help"]).ok().stdout;
    let own = help.find("Options:").expect("Options section");
    let global = help
        .find("Global options:")
        .expect("Global options section");
    let acl = help.find("ACL options:").expect("ACL options section");
    let tls = help.find("TLS options:").expect("TLS options section");
    let group = help.find("-g, --group <GROUP>").expect("--group listed");
    assert!(
        own < group && group < global && global < acl && acl < tls,
        "{help}"
    );
    assert!(help.contains("mqadmin resetOffsetByTime"), "{help}");
    assert!(
        help.contains("Consumer (subscription) group name"),
        "{help}"
    );
}

/// With every broker down but the nameserver up, the nameserver has forgotten the
/// brokers (it drops one when its connection closes): commands that need a topic's route
/// say that no broker is reachable (exit 3), not that the topic does not exist.
#[test]
fn broker_down_is_unreachable_not_a_missing_topic() {
    let mut c = Cluster::start();
    c.ctl(&["topic", "create", "-t", "Demo", "-r", "1", "-w", "1"])
        .ok();
    c.broker.broker.kill9();
    eventually_ok_sync(Duration::from_secs(15), "the broker to be dropped", || {
        let out = c.ctl(&["cluster", "list"]);
        let empty = out.code == 0
            && out.json()["brokers"]
                .as_array()
                .is_some_and(|b| b.is_empty());
        if empty {
            Ok(())
        } else {
            Err(format!("{out:?}"))
        }
    });
    for args in [
        &["message", "send", "-t", "Demo", "--body", "x"][..],
        &["topic", "status", "-t", "Demo"],
        &["consumer", "progress", "-g", "AnyGroup"],
    ] {
        let out = c.ctl(args);
        assert_eq!(out.code, 3, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("lists no") && !out.stderr.contains("does not exist"),
            "{args:?}: {out:?}"
        );
        assert_eq!(out.json()["exitCode"], 3, "{out:?}");
    }
}

fn e2e_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
