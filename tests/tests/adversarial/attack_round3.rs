//! Round three of hostile clients with nothing but a socket, against what the shared
//! frame reader, the admin-secret gate and END_TRANSACTION's half lookup now do: raw
//! malformed frames at both servers, replayed and mangled admin signatures, and
//! END_TRANSACTION naming records that are not its half.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use e2e::broker_harness::{TempBroker, ha_status, send_v2, with_fields};
use e2e::nameserver::Options;
use e2e::wait::runtime;
use e2e::{Client, NameServer};
use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::header::GetRouteInfoRequestHeader;
use security::admin_secret::ADMIN_ACCESS_KEY;
use security::sign::{Credentials, sign_request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{refusals, victim_is_served};

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const SECRET: &str = "round3-admin-secret-0123456789";

async fn attacker_socket(port: u16) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind((ATTACKER, 0).into()).unwrap();
    socket
        .connect(([127, 0, 0, 1], port).into())
        .await
        .expect("attacker connects")
}

/// A JSON-serialized frame whose header text is `header` (no body).
fn frame(header: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(header.len() + 8);
    out.extend_from_slice(&((4 + header.len()) as u32).to_be_bytes());
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(header);
    out
}

/// Frames whose lengths lie, a deeply nested header, and a TLS ClientHello: each must
/// end in an error answer or a closed connection.
fn malformed_frames() -> Vec<(&'static str, Vec<u8>)> {
    let mut header_longer = 8u32.to_be_bytes().to_vec();
    header_longer.extend_from_slice(&0x00ff_ffffu32.to_be_bytes());
    header_longer.extend_from_slice(b"{}{}");
    let mut negative = (-16i32).to_be_bytes().to_vec();
    negative.extend_from_slice(&(-1i32).to_be_bytes());
    let mut negative_header = 12u32.to_be_bytes().to_vec();
    negative_header.extend_from_slice(&(-8i32).to_be_bytes());
    negative_header.extend_from_slice(&[b'{'; 8]);
    let mut too_short = 2u32.to_be_bytes().to_vec();
    too_short.extend_from_slice(b"{}");
    let depth = 200_000;
    let nested = format!(
        "{{\"code\":105,\"flag\":0,\"language\":\"JAVA\",\"opaque\":7,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":317,\"x\":{}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let unbalanced = format!(
        "{{\"code\":105,\"opaque\":8,\"x\":{}",
        "[{\"a\":".repeat(depth / 4)
    );
    // A TLS 1.2 ClientHello's record header read as a frame length: 0x16030100 + ...
    let client_hello: Vec<u8> = [
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ]
    .into_iter()
    .chain([0x42; 64])
    .collect();
    vec![
        ("header length > frame length", header_longer),
        ("negative frame length", negative),
        ("negative header length", negative_header),
        ("frame length < 4", too_short),
        ("header nested 200000 deep", frame(nested.as_bytes())),
        ("unbalanced nesting", frame(unbalanced.as_bytes())),
        ("TLS ClientHello on plaintext", client_hello),
    ]
}

/// Writes `bytes`, then waits for the server to close the connection or answer.
async fn send_raw(port: u16, what: &str, bytes: &[u8]) {
    let mut s = attacker_socket(port).await;
    // The server may close before all bytes are written: that is a refusal too.
    let _ = s.write_all(bytes).await;
    let mut buf = vec![0u8; 64 * 1024];
    // EOF or a reset is a closed connection; bytes are an error answer (the nested
    // header is a valid request without a topic).
    let ended = tokio::time::timeout(Duration::from_secs(15), s.read(&mut buf)).await;
    assert!(
        ended.is_ok(),
        "{what}: the server neither answered nor closed the connection"
    );
}

fn route(topic: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    )
}

/// The nameserver lives and answers a route request of a client that took no part.
async fn nameserver_serves(ns: &mut NameServer) {
    assert!(ns.running(), "the nameserver died; log:\n{}", ns.log());
    let c = Client::connect(ns.port).await.expect("victim connects");
    let r = c
        .request(route("NoSuchTopic"))
        .await
        .expect("route answered");
    assert_eq!(r.code, response::TOPIC_NOT_EXIST, "{:?}", r.remark);
}

#[test]
fn malformed_frames_end_one_connection_at_the_nameserver() {
    let mut ns = NameServer::start(Options::default());
    runtime().block_on(async {
        for (what, bytes) in malformed_frames() {
            send_raw(ns.port, what, &bytes).await;
            nameserver_serves(&mut ns).await;
        }
        let rss = ns.anon_rss_kib().expect("RssAnon");
        assert!(rss < 256 * 1024, "nameserver RssAnon {rss} KiB");
    });
}

#[test]
fn malformed_frames_end_one_connection_at_the_broker() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        for (what, bytes) in malformed_frames() {
            send_raw(b.broker.port, what, &bytes).await;
            victim_is_served(&mut b.broker).await;
        }
        let rss = b.broker.anon_rss_kib().expect("RssAnon");
        assert!(rss < 512 * 1024, "broker RssAnon {rss} KiB");
    });
}

/// A slowloris writes a frame one byte at a time: the first-request deadline is counted
/// from accept, so the nameserver closes it before the frame is whole, and 200 half-open
/// connections holding three bytes each do not keep a victim out.
#[test]
fn slowloris_and_half_open_connections_at_the_nameserver() {
    let mut ns = NameServer::start(Options::default().config("firstRequestTimeoutMillis", 1000));
    runtime().block_on(async {
        let mut half_open = Vec::new();
        for _ in 0..200 {
            let mut s = attacker_socket(ns.port).await;
            s.write_all(&[0, 0, 1]).await.unwrap();
            half_open.push(s);
        }
        nameserver_serves(&mut ns).await;

        // 1 byte every 50 ms of a 1 KiB frame would take 50 s; the deadline is 1 s.
        let header = format!(
            "{{\"code\":105,\"opaque\":1,\"pad\":\"{}\"}}",
            "p".repeat(1000)
        );
        let bytes = frame(header.as_bytes());
        let mut s = attacker_socket(ns.port).await;
        let mut pace = tokio::time::interval(Duration::from_millis(50));
        let mut sent = 0;
        for b in &bytes {
            pace.tick().await;
            if s.write_all(&[*b]).await.is_err() {
                break;
            }
            sent += 1;
        }
        let mut buf = [0u8; 16];
        let closed = matches!(
            tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        ) || sent < bytes.len();
        assert!(
            closed,
            "a byte-by-byte frame outlived the first-request deadline"
        );
        // The half-open connections were closed by the same deadline.
        for mut s in half_open {
            let r = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
            assert!(matches!(r, Ok(Ok(0) | Err(_))), "half-open connection kept");
        }
        nameserver_serves(&mut ns).await;
    });
}

/// NOTIFY_BROKER_ROLE_CHANGED naming `master_id` master at `epoch`.
fn role_change(master_id: i64, epoch: i32) -> RemotingCommand {
    with_fields(
        request::NOTIFY_BROKER_ROLE_CHANGED,
        &[
            ("masterAddress", "127.0.0.1:1".to_owned()),
            ("masterHaAddress", "127.0.0.1:2".to_owned()),
            ("masterEpoch", epoch.to_string()),
            ("syncStateSetEpoch", epoch.to_string()),
            ("masterBrokerId", master_id.to_string()),
        ],
    )
}

fn signed_as(mut cmd: RemotingCommand, access_key: &str) -> RemotingCommand {
    let creds = Credentials::new(access_key, SECRET);
    let creds = if access_key == ADMIN_ACCESS_KEY {
        creds.stamped()
    } else {
        creds
    };
    sign_request(&mut cmd, &creds);
    cmd
}

async fn is_master(c: &Client) -> bool {
    ha_status(c).await["master"].as_bool() == Some(true)
}

/// Mangled signatures: the access key in other case, a megabyte signature, a missing
/// signature, a valid signature with an extField changed after signing (the epoch),
/// and a captured older-epoch role change replayed. Every one leaves the master master.
#[test]
fn mangled_and_replayed_role_change_signatures_are_refused() {
    let mut b = TempBroker::start(None, &[("adminSecret", SECRET)]);
    runtime().block_on(async {
        let admin = Client::connect(b.broker.port).await.unwrap();
        let attacker = Client::connect_from(ATTACKER, b.broker.port).await.unwrap();
        let captured = signed_as(role_change(0, 2), ADMIN_ACCESS_KEY);
        let r = admin.request(captured.clone()).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = admin
            .request(signed_as(role_change(0, 3), ADMIN_ACCESS_KEY))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);

        let upper = signed_as(role_change(1, 9), "RMQ-ADMIN");
        let mut huge = signed_as(role_change(1, 9), ADMIN_ACCESS_KEY);
        huge.ext_fields.insert("Signature", "A".repeat(1 << 20));
        let mut missing = signed_as(role_change(1, 9), ADMIN_ACCESS_KEY);
        missing.ext_fields.remove("Signature");
        let mut altered = signed_as(role_change(0, 10), ADMIN_ACCESS_KEY);
        altered.ext_fields.insert("masterBrokerId", "1");
        let mut moved_body = signed_as(role_change(1, 11), ADMIN_ACCESS_KEY);
        moved_body.body = b"masterBrokerId=0".to_vec().into();
        for (what, attempt) in [
            ("upper-case access key", upper),
            ("1 MiB signature", huge),
            ("no signature", missing),
            ("masterBrokerId changed after signing", altered),
            ("body added after signing", moved_body),
        ] {
            let r = attacker.request(attempt).await.expect("answered");
            assert_eq!(r.code, response::NO_PERMISSION, "{what}: {:?}", r.remark);
        }
        assert_eq!(refusals(b.broker.http_port, "adminSecret").await, 5.0);

        // The captured epoch-2 request replayed at epoch 3: a valid signature, refused
        // by the epoch fence.
        let r = attacker.request(captured).await.expect("answered");
        assert_ne!(
            r.code,
            response::SUCCESS,
            "a stale role change was replayed"
        );
        let status = ha_status(&admin).await;
        assert_eq!(status["epoch"].as_i64(), Some(3), "{status}");
        assert!(is_master(&admin).await);
        victim_is_served(&mut b.broker).await;
    });
}

fn config_update(text: &str) -> RemotingCommand {
    RemotingCommand::bare_request(request::UPDATE_BROKER_CONFIG).with_body(text.as_bytes().to_vec())
}

/// An administrator makes the broker read-only for maintenance, then writable again,
/// both signed. Whoever saw the first request on the wire sends it again unchanged: the
/// signature covers no time, nonce or sequence, so it still verifies.
#[test]
fn a_captured_signed_config_push_cannot_be_replayed() {
    let mut b = TempBroker::start(None, &[("adminSecret", SECRET)]);
    runtime().block_on(async {
        let admin = Client::connect(b.broker.port).await.unwrap();
        let read_only = signed_as(config_update("brokerPermission=4\n"), ADMIN_ACCESS_KEY);
        let r = admin.request(read_only.clone()).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let writable = signed_as(config_update("brokerPermission=6\n"), ADMIN_ACCESS_KEY);
        let r = admin.request(writable).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);

        let attacker = Client::connect_from(ATTACKER, b.broker.port).await.unwrap();
        let r = attacker.request(read_only).await.expect("answered");
        assert_eq!(
            r.code,
            response::NO_PERMISSION,
            "the replayed push was served: {:?}",
            r.remark
        );
        victim_is_served(&mut b.broker).await;
    });
}

/// The record of admitted nonces is bounded: with `adminReplayCacheMaxEntries=2`, a third
/// signed push inside the window is refused with a remark naming the key (only holders
/// of the secret can fill it, so refusing is safer than forgetting a nonce).
#[test]
fn the_nonce_record_is_bounded() {
    let mut b = TempBroker::start(
        None,
        &[("adminSecret", SECRET), ("adminReplayCacheMaxEntries", "2")],
    );
    runtime().block_on(async {
        let admin = Client::connect(b.broker.port).await.unwrap();
        for expected in [
            response::SUCCESS,
            response::SUCCESS,
            response::NO_PERMISSION,
        ] {
            let push = signed_as(config_update("brokerPermission=6\n"), ADMIN_ACCESS_KEY);
            let r = admin.request(push).await.unwrap();
            assert_eq!(r.code, expected, "{:?}", r.remark);
            if expected == response::NO_PERMISSION {
                let remark = r.remark.unwrap_or_default();
                assert!(remark.contains("adminReplayCacheMaxEntries"), "{remark}");
            }
        }
        assert_eq!(
            refusals(b.broker.http_port, "adminReplayCacheMaxEntries").await,
            1.0
        );
        victim_is_served(&mut b.broker).await;
    });
}

/// END_TRANSACTION naming a record that is not the producer group's half: negative,
/// past the end, a plain message, the half of another producer group. Each is refused;
/// nothing is committed to the real topic.
#[test]
fn end_transaction_cannot_name_a_foreign_or_missing_half() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        // A plain message at the CommitLog's start.
        let r = c.request(send_v2("Plain", 0, b"plain", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        // A half of group "owner".
        let props = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}owner\u{2}UNIQ_KEY\u{1}K1\u{2}";
        let r = c
            .request(send_v2("TxTopic", 0, b"half", props))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let half_at: i64 = r.ext_fields.get("msgId").map_or(0, |id| {
            i64::from_str_radix(&id[id.len() - 16..], 16).unwrap()
        });
        let queue_offset: i64 = r.ext_fields.get("queueOffset").unwrap().parse().unwrap();

        let end = |group: &str, offset: i64| {
            with_fields(
                request::END_TRANSACTION,
                &[
                    ("producerGroup", group.to_owned()),
                    ("tranStateTableOffset", queue_offset.to_string()),
                    ("commitLogOffset", offset.to_string()),
                    ("commitOrRollback", "8".to_owned()),
                    ("fromTransactionCheck", "false".to_owned()),
                    ("msgId", "K1".to_owned()),
                ],
            )
        };
        for (what, attempt) in [
            ("negative offset", end("owner", -1)),
            ("past the end", end("owner", i64::MAX)),
            ("a plain message", end("owner", 0)),
            ("another group's half", end("thief", half_at)),
            ("inside the half record", end("owner", half_at + 4)),
        ] {
            let r = c.request(attempt).await.expect("answered");
            assert_eq!(r.code, response::SYSTEM_ERROR, "{what}: {:?}", r.remark);
        }
        // Whatever was stored is dispatched before the queue is read: an empty pull
        // then means nothing was committed, not that reput has not caught up.
        e2e::metrics::wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        let pulled = e2e::broker_harness::pull_queue(&c, "g", "TxTopic", 0).await;
        assert!(pulled.is_empty(), "a refused commit stored {pulled:?}");
        // The owner's commit is still served.
        let r = c.request(end("owner", half_at)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        e2e::metrics::wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        let pulled = e2e::broker_harness::pull_queue(&c, "g", "TxTopic", 0).await;
        assert_eq!(pulled.len(), 1);
        victim_is_served(&mut b.broker).await;
    });
}

/// A batch's inner messages carry the broker-owned `DELAY_PARKED_OFFSET` and the
/// `UNIQ_KEY` of someone else's delayed message still parked (both can be learnt: the
/// parked offset is in the producer's offset msgId, the key is the client's). On the
/// next start, delay recovery takes the forged record for the delivered copy and skips
/// the real message: it is never delivered.
#[test]
fn a_forged_parked_offset_inside_a_batch_does_not_drop_a_delayed_message() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        // Level 4 is 30 s: still parked when the broker restarts.
        let props = e2e::broker_harness::properties(&[("DELAY", "4"), ("UNIQ_KEY", "VICTIM-U")]);
        let r = c
            .request(send_v2("Delayed", 0, b"late", &props))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let msg_id = r.ext_fields.get("msgId").unwrap().to_owned();
        let parked_at = i64::from_str_radix(&msg_id[msg_id.len() - 16..], 16).unwrap();

        let attacker = Client::connect_from(ATTACKER, b.broker.port).await.unwrap();
        let inner = e2e::broker_harness::properties(&[
            ("UNIQ_KEY", "VICTIM-U"),
            ("DELAY_PARKED_OFFSET", &parked_at.to_string()),
        ]);
        let mut body = Vec::new();
        protocol::message::batch::BatchEntry {
            flag: 0,
            body: b"forged",
            properties: &inner,
        }
        .encode_to(&mut body)
        .unwrap();
        let mut batch = send_v2("Delayed", 0, &body, "");
        batch.code = request::SEND_BATCH_MESSAGE;
        batch.ext_fields.insert("m", "true");
        let r = attacker.request(batch).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    });

    b.broker.terminate();
    b.broker.restart();
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        e2e::wait::eventually(Duration::from_secs(90), "the delayed message", || async {
            e2e::broker_harness::pull_queue(&c, "g", "Delayed", 0)
                .await
                .iter()
                .any(|m| m.body == b"late")
        })
        .await;
        victim_is_served(&mut b.broker).await;
    });
}

/// With the ACL on, the ACL alone decides: the `rmq-admin` access key signed with the
/// broker's own `adminSecret` is an unknown account, and a non-admin account's valid
/// signature is not enough for a role change or a config push.
#[test]
fn with_the_acl_on_the_admin_secret_account_is_not_an_admin() {
    let dir = tempfile::tempdir().unwrap();
    let acl_path = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl_path,
        "accounts:\n  - accessKey: adminUser1\n    secretKey: adminSecret1\n    admin: true\n  \
         - accessKey: producer01\n    secretKey: producerSecret\n    defaultTopicPerm: PUB\n",
    )
    .unwrap();
    let acl = acl_path.display().to_string();
    let mut b = TempBroker::start(
        None,
        &[
            ("aclEnable", "true"),
            ("aclFile", &acl),
            ("adminSecret", SECRET),
        ],
    );
    runtime().block_on(async {
        let attacker = Client::connect_from(ATTACKER, b.broker.port).await.unwrap();
        let mut by_producer = role_change(1, 9);
        sign_request(
            &mut by_producer,
            &Credentials::new("producer01", "producerSecret"),
        );
        let mut push_by_producer = config_update("brokerPermission=4\n");
        sign_request(
            &mut push_by_producer,
            &Credentials::new("producer01", "producerSecret"),
        );
        for (what, attempt) in [
            (
                "rmq-admin with the adminSecret",
                signed_as(role_change(1, 9), ADMIN_ACCESS_KEY),
            ),
            (
                "rmq-admin config push",
                signed_as(config_update("brokerPermission=4\n"), ADMIN_ACCESS_KEY),
            ),
            ("non-admin account role change", by_producer),
            ("non-admin account config push", push_by_producer),
        ] {
            let r = attacker.request(attempt).await.expect("answered");
            assert_ne!(r.code, response::SUCCESS, "{what} was served");
        }
        let mut status = RemotingCommand::bare_request(request::GET_BROKER_HA_STATUS);
        sign_request(&mut status, &Credentials::new("adminUser1", "adminSecret1"));
        let r = attacker.request(status).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let status: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(status["master"].as_bool(), Some(true), "{status}");
        assert!(
            b.broker.running(),
            "the broker died; log:\n{}",
            b.broker.log()
        );
        // A signed producer is still served.
        let c = Client::connect(b.broker.port).await.unwrap();
        let mut send = send_v2("VictimTopic", 0, b"victim", "");
        sign_request(&mut send, &Credentials::new("producer01", "producerSecret"));
        let r = c.request(send).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    });
}

/// A plain or batch send straight into the broker's own topics (the half queue, the op
/// queue, the delay schedule) with forged broker-owned properties: refused, so no forged
/// half, op record or parked message reaches the checker or the schedule.
#[test]
fn sends_into_the_brokers_own_topics_are_refused() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let attacker = Client::connect_from(ATTACKER, b.broker.port).await.unwrap();
        let forged = e2e::broker_harness::properties(&[
            ("TRAN_MSG", "true"),
            ("PGROUP", "owner"),
            ("REAL_TOPIC", "VictimTopic"),
            ("REAL_QID", "0"),
            ("TRAN_ORIGIN_OFFSET", "0"),
            ("DELAY_PARKED_OFFSET", "0"),
            ("UNIQ_KEY", "FORGED"),
        ]);
        for topic in [
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "RMQ_SYS_TRANS_OP_HALF_TOPIC",
            "SCHEDULE_TOPIC_XXXX",
        ] {
            let r = attacker
                .request(send_v2(topic, 0, b"forged", &forged))
                .await
                .expect("answered");
            assert_ne!(
                r.code,
                response::SUCCESS,
                "plain send into {topic} was stored"
            );
            let mut body = Vec::new();
            protocol::message::batch::BatchEntry {
                flag: 0,
                body: b"forged",
                properties: &forged,
            }
            .encode_to(&mut body)
            .unwrap();
            let mut batch = send_v2(topic, 0, &body, "");
            batch.code = request::SEND_BATCH_MESSAGE;
            batch.ext_fields.insert("m", "true");
            let r = attacker.request(batch).await.expect("answered");
            assert_ne!(r.code, response::SUCCESS, "batch into {topic} was stored");
        }
        victim_is_served(&mut b.broker).await;
    });
}
