//! The official RocketMQ 5.x Python client (PyPI `rocketmq-python-client`, gRPC) against
//! real nameservers and brokers serving the 5.x `MessagingService` themselves, driven by
//! `tests/clients/python5/driver.py`: sends of every message type, SimpleConsumer and
//! PushConsumer consumption (POP), redelivery, invisible-time changes, FIFO order,
//! transactions with check-backs, a two-group route, and 4.x clients on the same topics.
//!
//! The client is found through `RMQ_PY5_PYTHON` (a python with the client installed;
//! `.ci/run` sets it up). Without it the tests print why and pass, unless
//! `RMQ_REQUIRE_PY5_CLIENT=1` (CI), where they fail.

mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use e2e::Client;
use e2e::broker_harness::{properties, send_v2};
use e2e::wait::eventually_ok_sync;
use harness::{Cluster, attempts, bodies, deliveries, python};
use protocol::code::response;

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

#[test]
fn keys_and_tags_round_trip_and_4x_clients_share_the_topic() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py, 1, &[]);
    let topic = "Py5Normal";
    c.create_topic(topic, Some("NORMAL"));
    c.drive(&[
        "produce",
        "--topic",
        topic,
        "--count",
        "8",
        "--prefix",
        "five",
        "--tag",
        "TagA",
        "--key-prefix",
        "order",
    ]);
    // A 4.x producer on the same topic.
    let port = c.brokers[0].process.port;
    e2e::wait::runtime().block_on(async {
        let client = Client::connect(port).await.expect("connect");
        for i in 0..4 {
            let props = properties(&[("TAGS", "TagA"), ("KEYS", &format!("old-{i}"))]);
            let body = format!("four-{i:04}");
            let r = client
                .request(send_v2(topic, -1, body.as_bytes(), &props))
                .await
                .expect("SEND_MESSAGE_V2");
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
    });
    // The 5.x consumer gets both producers' messages, tags intact.
    let out = c.out_file("py5-simple");
    c.drive(&[
        "simple",
        "--topic",
        topic,
        "--group",
        "py5-simple",
        "--tag",
        "TagA",
        "--want",
        "12",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    let got = deliveries(&out);
    let seen: BTreeSet<String> = got.iter().map(|d| d.body.clone()).collect();
    let mut want = bodies("five", 8);
    want.extend(bodies("four", 4));
    assert_eq!(seen, want);
    assert!(got.iter().all(|d| d.tag == "TagA"), "{got:?}");
    // A 4.x reader sees the 5.x messages with their keys and tags as 4.x properties.
    let pulled = c.pulled(0, topic, 4);
    let five: Vec<_> = pulled
        .iter()
        .filter(|p| p.body.starts_with(b"five-"))
        .collect();
    assert_eq!(five.len(), 8, "{pulled:?}");
    for p in five {
        assert!(p.properties.contains("TAGS\u{1}TagA"), "{}", p.properties);
        assert!(p.properties.contains("KEYS\u{1}order-"), "{}", p.properties);
    }
}

#[test]
fn unacked_messages_come_back_and_invisible_time_can_be_changed() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py, 1, &[]);
    let topic = "Py5Redeliver";
    c.create_topic(topic, None);
    c.drive(&["produce", "--topic", topic, "--count", "4", "--prefix", "r"]);
    // Left unacked for its 2 s invisible time: delivered again, attempt 2.
    let out = c.out_file("py5-redeliver");
    c.drive(&[
        "simple",
        "--topic",
        topic,
        "--group",
        "py5-redeliver",
        "--want",
        "4",
        "--invisible-secs",
        "2",
        "--mode",
        "redeliver",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    for (body, a) in attempts(&deliveries(&out)) {
        assert!(a.contains(&1) && a.contains(&2), "{body}: attempts {a:?}");
    }
    // Received with 300 s, then shortened to 1 s: back well before the five minutes
    // (the driver gives up after 120 s; CI runs these suites side by side on 2 cores).
    let out = c.out_file("py5-change");
    c.drive(&[
        "simple",
        "--topic",
        topic,
        "--group",
        "py5-change",
        "--want",
        "4",
        "--invisible-secs",
        "300",
        "--mode",
        "change-invisible",
        "--timeout-secs",
        "120",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    for (body, a) in attempts(&deliveries(&out)) {
        assert!(a.contains(&2), "{body}: attempts {a:?}");
    }
}

#[test]
fn a_failing_push_listener_gets_the_message_again() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py, 1, &[]);
    let topic = "Py5Push";
    c.create_topic(topic, None);
    c.create_group("py5-push", false, 16);
    let consumer = c.push_consumer(topic, "py5-push", 1);
    c.drive(&["produce", "--topic", topic, "--count", "6", "--prefix", "p"]);
    eventually_ok_sync(
        Duration::from_secs(90),
        "every message consumed on its second attempt",
        || {
            let a = attempts(&consumer.deliveries());
            let done: BTreeSet<String> = a
                .iter()
                .filter(|(_, v)| v.contains(&1) && v.contains(&2))
                .map(|(b, _)| b.clone())
                .collect();
            if done == bodies("p", 6) {
                Ok(())
            } else {
                Err(format!("{a:?}"))
            }
        },
    );
}

#[test]
fn fifo_groups_receive_each_message_group_in_order() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py, 1, &[]);
    let topic = "Py5Fifo";
    c.create_topic(topic, Some("FIFO"));
    c.create_group("py5-fifo", true, 16);
    for g in ["g1", "g2"] {
        c.drive(&[
            "produce",
            "--topic",
            topic,
            "--count",
            "10",
            "--prefix",
            g,
            "--message-group",
            g,
        ]);
    }
    // A normal message on a FIFO topic is refused.
    let refused = c.drive_status(&["produce", "--topic", topic, "--count", "1", "--prefix", "n"]);
    assert!(!refused, "a NORMAL message was accepted by a FIFO topic");
    let consumer = c.push_consumer(topic, "py5-fifo", 0);
    eventually_ok_sync(
        Duration::from_secs(90),
        "both message groups consumed",
        || {
            let n = consumer.deliveries().len();
            if n >= 20 {
                Ok(())
            } else {
                Err(format!("{n} of 20"))
            }
        },
    );
    let mut per_group: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in consumer.deliveries() {
        per_group
            .entry(d.message_group.clone())
            .or_default()
            .push(d.body);
    }
    for g in ["g1", "g2"] {
        let order = &per_group[g];
        let expected: Vec<String> = bodies(g, 10).into_iter().collect();
        assert_eq!(order, &expected, "message group {g} out of order");
    }
}

#[test]
fn delayed_messages_arrive_after_their_delivery_time() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py, 1, &[]);
    let topic = "Py5Delay";
    c.create_topic(topic, Some("DELAY"));
    let sent_at = now_ms();
    c.drive(&[
        "produce",
        "--topic",
        topic,
        "--count",
        "3",
        "--prefix",
        "d",
        "--delay-ms",
        "3000",
    ]);
    let out = c.out_file("py5-delay");
    c.drive(&[
        "simple",
        "--topic",
        topic,
        "--group",
        "py5-delay",
        "--want",
        "3",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    let received_by = now_ms();
    assert!(
        received_by >= sent_at + 3000,
        "delivered before the delivery time: sent at {sent_at}, all received by {received_by}"
    );
    let seen: BTreeSet<String> = deliveries(&out).into_iter().map(|d| d.body).collect();
    assert_eq!(seen, bodies("d", 3));
}

#[test]
fn transactions_commit_roll_back_and_are_checked_back() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py, 1, &[]);
    let topic = "Py5Tx";
    c.create_topic(topic, Some("TRANSACTION"));
    c.drive(&[
        "transaction",
        "--topic",
        topic,
        "--count",
        "2",
        "--prefix",
        "commit",
        "--end",
        "commit",
    ]);
    c.drive(&[
        "transaction",
        "--topic",
        topic,
        "--count",
        "2",
        "--prefix",
        "rollback",
        "--end",
        "rollback",
    ]);
    // Left open: the broker asks the producer over its Telemetry stream, which commits.
    c.drive(&[
        "transaction",
        "--topic",
        topic,
        "--count",
        "2",
        "--prefix",
        "checked",
        "--end",
        "none",
        "--check",
        "commit",
    ]);
    let out = c.out_file("py5-tx");
    c.drive(&[
        "simple",
        "--topic",
        topic,
        "--group",
        "py5-tx",
        "--want",
        "4",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    let seen: BTreeSet<String> = deliveries(&out).into_iter().map(|d| d.body).collect();
    let mut want = bodies("commit", 2);
    want.extend(bodies("checked", 2));
    assert_eq!(seen, want, "rolled-back messages must never be delivered");
    // Nothing rolled back is readable by a 4.x client either.
    let pulled = c.pulled(0, topic, 4);
    assert!(
        pulled.iter().all(|p| !p.body.starts_with(b"rollback-")),
        "{pulled:?}"
    );
}

#[test]
fn two_broker_groups_route_each_queue_to_its_own_broker() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py, 2, &[]);
    let topic = "Py5TwoGroups";
    // Different queue counts: a queue routed to the wrong broker would not exist there.
    c.create_topic_on(0, topic, 2, None);
    c.create_topic_on(1, topic, 5, None);
    c.drive(&[
        "produce", "--topic", topic, "--count", "28", "--prefix", "t",
    ]);
    let on0 = c.pulled(0, topic, 2);
    let on1 = c.pulled(1, topic, 5);
    assert!(!on0.is_empty() && !on1.is_empty(), "{on0:?} {on1:?}");
    assert_eq!(on0.len() + on1.len(), 28);
    assert!(on1.iter().any(|p| p.queue_id >= 2), "{on1:?}");
    // A consumer routed through the first broker reads from both.
    let out = c.out_file("py5-two");
    c.drive(&[
        "simple",
        "--topic",
        topic,
        "--group",
        "py5-two",
        "--want",
        "28",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    let seen: BTreeSet<String> = deliveries(&out).into_iter().map(|d| d.body).collect();
    assert_eq!(seen, bodies("t", 28));
}

#[test]
fn signed_requests_are_checked_against_the_acl() {
    let Some(py) = python() else { return };
    let acl = "globalWhiteRemoteAddresses: []\n\
               accounts:\n\
               - accessKey: py5admin\n  secretKey: py5admin-secret-key\n  admin: true\n\
               - accessKey: py5reader\n  secretKey: py5reader-secret-key\n  defaultTopicPerm: SUB\n  defaultGroupPerm: SUB\n";
    let dir = tempfile::tempdir().expect("acl dir");
    let acl_file = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_file, acl).expect("write acl");
    let acl_path = acl_file.to_str().unwrap_or_default().to_owned();
    let mut c = Cluster::start(
        py,
        1,
        &[
            ("aclEnable", "true"),
            ("aclFile", acl_path.as_str()),
            ("accessKey", "py5admin"),
            ("secretKey", "py5admin-secret-key"),
        ],
    );
    let topic = "Py5Acl";
    c.sign_ctl_with("py5admin", "py5admin-secret-key");
    c.create_topic(topic, None);
    let ok = c.drive_status(&[
        "produce",
        "--topic",
        topic,
        "--count",
        "1",
        "--prefix",
        "a",
        "--ak",
        "py5admin",
        "--sk",
        "py5admin-secret-key",
    ]);
    assert!(ok, "the admin account may publish");
    let wrong_key = c.drive_status(&[
        "produce",
        "--topic",
        topic,
        "--count",
        "1",
        "--prefix",
        "b",
        "--ak",
        "py5admin",
        "--sk",
        "not-the-key",
    ]);
    assert!(!wrong_key, "a wrong secret key was accepted");
    let no_pub = c.drive_status(&[
        "produce",
        "--topic",
        topic,
        "--count",
        "1",
        "--prefix",
        "c",
        "--ak",
        "py5reader",
        "--sk",
        "py5reader-secret-key",
    ]);
    assert!(!no_pub, "an account without PUB published");
    // The reader may subscribe; only the accepted message is there.
    let out = c.out_file("py5-acl");
    c.drive(&[
        "simple",
        "--topic",
        topic,
        "--group",
        "py5-acl",
        "--want",
        "1",
        "--ak",
        "py5reader",
        "--sk",
        "py5reader-secret-key",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    let seen: Vec<String> = deliveries(&out).into_iter().map(|d| d.body).collect();
    assert_eq!(seen, ["a-0000"]);
}

/// A CA and a server certificate for 127.0.0.1 (rcgen; nothing committed).
fn write_pki(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "rmq py5 test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA cert");
    let key = KeyPair::generate().expect("server key");
    let params =
        CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).expect("params");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("server cert");
    let put = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write PEM");
        p
    };
    (
        put("ca.pem", ca.pem()),
        put("server.pem", cert.pem()),
        put("server.key", key.serialize_pem()),
    )
}

#[test]
fn tls_and_plaintext_clients_share_the_grpc_port() {
    let Some(py) = python() else { return };
    let pki_dir = tempfile::tempdir().expect("pki dir");
    let (ca, cert, key) = write_pki(pki_dir.path());
    let (cert, key) = (
        cert.to_str().unwrap_or_default().to_owned(),
        key.to_str().unwrap_or_default().to_owned(),
    );
    let c = Cluster::start(
        py,
        1,
        &[
            ("tls.server.mode", "permissive"),
            ("tls.server.certPath", cert.as_str()),
            ("tls.server.keyPath", key.as_str()),
        ],
    );
    let topic = "Py5Tls";
    c.create_topic(topic, None);
    // The client verifies the broker against the test CA (gRPC core's root file).
    c.drive_env(
        &[
            "produce", "--tls", "--topic", topic, "--count", "3", "--prefix", "tls",
        ],
        &[("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", ca.as_path())],
    );
    // A plaintext consumer on the same port reads what the TLS producer sent.
    let out = c.out_file("py5-tls");
    c.drive(&[
        "simple",
        "--topic",
        topic,
        "--group",
        "py5-tls",
        "--want",
        "3",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    let seen: BTreeSet<String> = deliveries(&out).into_iter().map(|d| d.body).collect();
    assert_eq!(seen, bodies("tls", 3));
}
