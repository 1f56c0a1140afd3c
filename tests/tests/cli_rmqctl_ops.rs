//! `rmqctl`'s day-2 commands against real rmq-nameserver and
//! rmq-broker processes, with their exit codes and `-o json` output: write permission
//! wipe/add, producer connections, consumer status and reset refusals, nameserver
//! configuration, `message send` bodies from a file and stdin, and the DLQ re-send end
//! to end (including that a second run re-sends nothing). Offset reset with live
//! `rocketmq-client-rust` consumers is in `consumer_offset_reset.rs`.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use e2e::broker_harness::{
    self, TempBroker, decode_records, properties, pull, send_v2, with_fields,
};
use e2e::cli::{CliOutput, rmqctl_json};
use e2e::metrics::wait_dispatched;
use e2e::nameserver::Options;
use e2e::wait::{eventually_sync, runtime};
use e2e::{Client, NameServer};
use protocol::RemotingCommand;
use protocol::code::{request, response};
use serde_json::Value;

struct Cluster {
    ns: NameServer,
    broker: TempBroker,
}

impl Cluster {
    fn start() -> Self {
        let ns = NameServer::start(Options::default());
        let broker = TempBroker::start(Some(ns.port), &[]);
        let c = Self { ns, broker };
        eventually_sync(Duration::from_secs(15), "the broker to register", || {
            c.ctl(&["cluster", "list"])
                .json_if_ok()
                .is_some_and(|j| j["brokers"].as_array().is_some_and(|b| !b.is_empty()))
        });
        c
    }

    fn ctl(&self, args: &[&str]) -> CliOutput {
        rmqctl_json(self.ns.port, args)
    }

    fn namesrv(&self) -> String {
        format!("127.0.0.1:{}", self.ns.port)
    }
}

trait JsonIfOk {
    fn json_if_ok(&self) -> Option<Value>;
}

impl JsonIfOk for CliOutput {
    fn json_if_ok(&self) -> Option<Value> {
        (self.code == 0).then(|| self.json())
    }
}

/// `rmqctl` with `stdin` fed to it.
fn ctl_with_stdin(ns: &str, args: &[&str], stdin: &[u8]) -> CliOutput {
    let mut child = Command::new(e2e::binary::path("rmqctl"))
        .args(["-n", ns, "-o", "json"])
        .args(args)
        .env_remove("NAMESRV_ADDR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rmqctl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write stdin");
    let out = child.wait_with_output().expect("rmqctl output");
    CliOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The perm the nameserver's route for `topic` carries.
fn route_perm(c: &Cluster, topic: &str) -> i64 {
    let route = c.ctl(&["topic", "route", "-t", topic]).ok().json();
    route["queueDatas"][0]["perm"].as_i64().expect("perm")
}

#[test]
fn write_perm_producers_consumers_and_nameserver_config() {
    let c = Cluster::start();
    c.ctl(&["topic", "create", "-t", "PermTopic", "-r", "2", "-w", "2"])
        .ok();
    assert_eq!(route_perm(&c, "PermTopic"), 6);

    let wiped = c
        .ctl(&["broker", "wipe-write-perm", "--broker-name", "broker-e2e"])
        .ok()
        .json();
    assert_eq!(wiped["writable"], false);
    assert!(
        wiped["nameservers"][0]["topics"].as_i64().unwrap() >= 1,
        "{wiped}"
    );
    assert_eq!(route_perm(&c, "PermTopic"), 4);
    let added = c
        .ctl(&["broker", "add-write-perm", "--broker-name", "broker-e2e"])
        .ok()
        .json();
    assert_eq!(added["writable"], true);
    assert_eq!(route_perm(&c, "PermTopic"), 6);
    let usage = c.ctl(&["broker", "wipe-write-perm"]);
    assert_eq!(usage.code, 2, "{usage:?}");

    // A producer and a consumer connected with our own client (heartbeats).
    runtime().block_on(async {
        let client = Client::connect(c.broker.broker.port).await.expect("connect");
        let hb = r#"{"clientID":"127.0.0.1@ops","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,"groupName":"OpsConsumers","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"1","topic":"PermTopic"}]}],"producerDataSet":[{"groupName":"OpsProducers"}]}"#;
        let r = client
            .request(RemotingCommand::bare_request(request::HEART_BEAT).with_body(hb.as_bytes().to_vec()))
            .await
            .expect("heartbeat");
        assert_eq!(r.code, response::SUCCESS);

        let conns = c
            .ctl(&["producer", "connections", "-g", "OpsProducers", "-t", "PermTopic"])
            .ok()
        .json();
        assert_eq!(conns["connections"][0]["clientId"], "127.0.0.1@ops", "{conns}");
        let none = c.ctl(&["producer", "connections", "-g", "NobodyProduces"]);
        assert_eq!(none.code, 1, "{none:?}");

        // This client does not answer GET_CONSUMER_STATUS_FROM_CLIENT: after the broker's
        // bounded wait the report names it and why (exit 1, not a hang or "unreachable").
        let out = c.ctl(&["--timeout-ms", "15000", "consumer", "status", "-g", "OpsConsumers", "-t", "PermTopic"]);
        assert_eq!(out.code, 1, "{out:?}");
        let status = out.json();
        assert_eq!(status["clients"], serde_json::json!({}), "{status}");
        let why = status["unanswered"]["127.0.0.1@ops"].as_str().unwrap_or_default();
        assert!(
            why.contains("127.0.0.1@ops") && why.contains("consumerStatusAnswerTimeoutMillis"),
            "{status}"
        );
        drop(client);
    });
    let offline = c.ctl(&[
        "consumer",
        "status",
        "-g",
        "NobodyConsumes",
        "-t",
        "PermTopic",
    ]);
    assert_eq!(offline.code, 1, "{offline:?}");
    assert!(offline.stderr.contains("no online client"), "{offline:?}");
    assert_eq!(
        c.ctl(&[
            "consumer",
            "reset",
            "-g",
            "OpsConsumers",
            "-t",
            "NoSuchTopic",
            "--to-latest"
        ])
        .code,
        1
    );
    assert_eq!(
        c.ctl(&[
            "consumer",
            "reset",
            "-g",
            "G",
            "-t",
            "PermTopic",
            "--to-time",
            "yesterday"
        ])
        .code,
        2
    );

    let all = c.ctl(&["nameserver", "config", "get"]).ok().json();
    assert_eq!(
        all["nameservers"][c.namesrv()]["orderMessageEnable"],
        "false",
        "{all}"
    );
    c.ctl(&["nameserver", "config", "update", "orderMessageEnable=true"])
        .ok();
    let one = c
        .ctl(&["nameserver", "config", "get", "-k", "orderMessageEnable"])
        .ok()
        .json();
    assert_eq!(one["values"][c.namesrv()], "true");
    let refused = c.ctl(&["nameserver", "config", "update", "kvConfigPath=/tmp/evil"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert_eq!(
        c.ctl(&["nameserver", "config", "get", "-k", "noSuchKey"])
            .code,
        1
    );
}

#[test]
fn message_send_reads_the_body_from_a_file_or_stdin() {
    let c = Cluster::start();
    c.ctl(&["topic", "create", "-t", "BodyTopic", "-r", "1", "-w", "1"])
        .ok();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("body.bin");
    let binary: Vec<u8> = (0..=255u8).collect();
    std::fs::write(&file, &binary).expect("write body");
    let file_text = file.display().to_string();
    c.ctl(&[
        "message",
        "send",
        "-t",
        "BodyTopic",
        "--body-file",
        &file_text,
    ])
    .ok();
    ctl_with_stdin(
        &c.namesrv(),
        &["message", "send", "-t", "BodyTopic", "--body-file", "-"],
        b"from stdin",
    )
    .ok();
    runtime().block_on(async {
        let client = Client::connect(c.broker.broker.port)
            .await
            .expect("connect");
        wait_dispatched(c.broker.broker.http_port, Duration::from_secs(10)).await;
        let r = client
            .request(pull("G", "BodyTopic", 0, 0, 32, None, "*"))
            .await
            .expect("pull");
        let got = decode_records(&r.body);
        assert_eq!(got.len(), 2, "bodies stored: {:?}", r.remark);
        assert_eq!(got[0].body, binary);
        assert_eq!(got[1].body, b"from stdin");
    });
    let missing = c.ctl(&[
        "message",
        "send",
        "-t",
        "BodyTopic",
        "--body-file",
        "/no/such/file",
    ]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(missing.stderr.contains("/no/such/file"), "{missing:?}");
    let both = c.ctl(&[
        "message",
        "send",
        "-t",
        "BodyTopic",
        "--body",
        "x",
        "--body-file",
        &file_text,
    ]);
    assert_eq!(both.code, 2, "{both:?}");
    let neither = c.ctl(&["message", "send", "-t", "BodyTopic"]);
    assert_eq!(neither.code, 2, "{neither:?}");
}

/// Sends `body` to `topic` and dead-letters it for `group` through the broker's own
/// CONSUMER_SEND_MSG_BACK path (delay level -1: straight to `%DLQ%<group>`).
async fn dead_letter(
    http_port: u16,
    client: &Client,
    topic: &str,
    group: &str,
    body: &str,
    props: &str,
) {
    let r = client
        .request(send_v2(topic, 0, body.as_bytes(), props))
        .await
        .expect("send");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let queue_offset: i64 = r
        .ext_fields
        .get("queueOffset")
        .and_then(|o| o.parse().ok())
        .expect("queueOffset");
    let offset_msg_id = r.ext_fields.get("msgId").expect("msgId").to_owned();
    wait_dispatched(http_port, Duration::from_secs(10)).await;
    let p = client
        .request(pull("G", topic, 0, queue_offset, 1, None, "*"))
        .await
        .expect("pull");
    let physical = decode_records(&p.body)
        .first()
        .unwrap_or_else(|| panic!("message not pullable: {:?}", p.remark))
        .physical_offset;
    // The broker sends back only what the group consumes: say so first.
    let hb = client
        .request(broker_harness::consumer_heartbeat(
            "dlq@e2e",
            group,
            &[topic],
        ))
        .await
        .expect("heartbeat");
    assert_eq!(hb.code, response::SUCCESS, "{:?}", hb.remark);
    let back = with_fields(
        request::CONSUMER_SEND_MSG_BACK,
        &[
            ("offset", physical.to_string()),
            ("group", group.to_owned()),
            ("delayLevel", "-1".to_owned()),
            ("originMsgId", offset_msg_id),
            ("originTopic", topic.to_owned()),
        ],
    );
    let r = client.request(back).await.expect("send back");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
}

#[test]
fn dlq_messages_are_resent_to_their_topic_once() {
    let c = Cluster::start();
    let http_port = c.broker.broker.http_port;
    for t in ["Orders", "Replay"] {
        c.ctl(&["topic", "create", "-t", t, "-r", "1", "-w", "1"])
            .ok();
    }
    runtime().block_on(async {
        let client = Client::connect(c.broker.broker.port)
            .await
            .expect("connect");
        let props = properties(&[
            ("TAGS", "paid"),
            ("KEYS", "order-7 customer-3"),
            ("UNIQ_KEY", "AC110001000000000000000000000007"),
            ("color", "blue"),
        ]);
        dead_letter(
            http_port,
            &client,
            "Orders",
            "Billing",
            "order seven",
            &props,
        )
        .await;
        let props = properties(&[
            ("KEYS", "order-8"),
            ("UNIQ_KEY", "AC110001000000000000000000000008"),
        ]);
        dead_letter(
            http_port,
            &client,
            "Orders",
            "Billing",
            "order eight",
            &props,
        )
        .await;
    });
    let dlq = "%DLQ%Billing";
    eventually_sync(Duration::from_secs(10), "dead letters readable", || {
        c.ctl(&["message", "consume", "-t", dlq])
            .json_if_ok()
            .is_some_and(|j| j["count"] == 2)
    });

    // --max bounds one run.
    let first = c
        .ctl(&["message", "resend-dlq", "-g", "Billing", "--max", "1"])
        .ok()
        .json();
    assert_eq!(first["resent"].as_array().unwrap().len(), 1, "{first}");
    assert_eq!(first["resent"][0]["topic"], "Orders");
    // Index lookups need the copy dispatched.
    runtime().block_on(wait_dispatched(http_port, Duration::from_secs(10)));
    let second = c
        .ctl(&["message", "resend-dlq", "-g", "Billing"])
        .ok()
        .json();
    assert_eq!(second["resent"].as_array().unwrap().len(), 1, "{second}");
    assert_eq!(second["skipped"].as_array().unwrap().len(), 1, "{second}");
    runtime().block_on(wait_dispatched(http_port, Duration::from_secs(10)));
    // Idempotent: a third run finds every copy and sends nothing.
    let third = c
        .ctl(&["message", "resend-dlq", "-g", "Billing"])
        .ok()
        .json();
    assert_eq!(third["resent"].as_array().unwrap().len(), 0, "{third}");
    assert_eq!(third["skipped"].as_array().unwrap().len(), 2, "{third}");

    // The copy keeps body, tags, keys, user properties and the client msgId.
    let q = c
        .ctl(&["message", "query", "-t", "Orders", "-k", "order-7"])
        .ok()
        .json();
    assert_eq!(q["count"], 2, "original and copy: {q}");
    let copy = q["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["properties"]["RMQ_DLQ_SOURCE"].is_string())
        .expect("a re-sent copy");
    assert_eq!(copy["body"], "order seven");
    assert_eq!(copy["msgId"], "AC110001000000000000000000000007");
    assert_eq!(copy["properties"]["TAGS"], "paid");
    assert_eq!(copy["properties"]["KEYS"], "order-7 customer-3");
    assert_eq!(copy["properties"]["color"], "blue");
    assert!(copy["properties"]["RETRY_TOPIC"].is_null(), "{copy}");

    // --to-topic sends elsewhere (and is idempotent there too).
    let replay = c
        .ctl(&[
            "message",
            "resend-dlq",
            "-g",
            "Billing",
            "--to-topic",
            "Replay",
        ])
        .ok()
        .json();
    assert_eq!(replay["resent"].as_array().unwrap().len(), 2, "{replay}");
    let replayed = c.ctl(&["message", "consume", "-t", "Replay"]).ok().json();
    assert_eq!(replayed["count"], 2, "{replayed}");

    let none = c.ctl(&["message", "resend-dlq", "-g", "NoDeadLetters"]);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains("%DLQ%NoDeadLetters"), "{none:?}");
}
