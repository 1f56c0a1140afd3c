//! The RocketMQ 5.x gRPC endpoint of a real `rmq-broker` process, driven by a tonic
//! client built from rmq-grpc-api: health, QueryRoute, Heartbeat, the Telemetry settings
//! handshake, SendMessage of each type (read back with 4.x raw pulls to prove what was
//! stored), EndTransaction, a transaction check-back over Telemetry, the decode limit,
//! and the ACL.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use e2e::broker_harness::{self, TempBroker};
use e2e::client::Client;
use e2e::wait::{eventually, runtime};
use grpc_api::v2::messaging_service_client::MessagingServiceClient;
use grpc_api::v2::settings::PubSub;
use grpc_api::v2::telemetry_command::Command;
use grpc_api::v2::*;
use protocol::code::{request, response};
use tonic::transport::Channel;

#[path = "support/grpc_client.rs"]
mod grpc_client;
use grpc_client::{channel, create_topic, req, res};

const WAIT: Duration = Duration::from_secs(20);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn ts(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms / 1000,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

fn message(topic: &str, id: &str, body: &[u8]) -> Message {
    Message {
        topic: Some(res(topic)),
        user_properties: HashMap::from([("color".to_owned(), "red".to_owned())]),
        system_properties: Some(SystemProperties {
            tag: Some("TagA".into()),
            keys: vec!["key-1".into()],
            message_id: id.to_owned(),
            born_timestamp: Some(ts(now_ms())),
            message_type: MessageType::Normal as i32,
            ..Default::default()
        }),
        body: body.to_vec(),
    }
}

/// Every record stored in `topic`'s queues, by 4.x raw pulls.
async fn stored(c: &Client, topic: &str, queues: i32) -> Vec<broker_harness::Pulled> {
    let mut all = Vec::new();
    for q in 0..queues {
        all.extend(broker_harness::pull_queue(c, "G_READBACK", topic, q).await);
    }
    all
}

fn code(s: &Option<grpc_api::v2::Status>) -> i32 {
    s.as_ref().map_or(-1, |s| s.code)
}

#[test]
fn health_route_heartbeat_and_settings() {
    let b = TempBroker::start(None, &[]);
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        create_topic(&c, "T_GRPC_ROUTE", 4).await;
        let ch = channel(b.broker.grpc_port).await;

        let mut health = tonic_health::pb::health_client::HealthClient::new(ch.clone());
        let h = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: "apache.rocketmq.v2.MessagingService".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            h.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );

        let mut cl = MessagingServiceClient::new(ch);
        let route = cl
            .query_route(req(
                QueryRouteRequest {
                    topic: Some(res("T_GRPC_ROUTE")),
                    endpoints: None,
                },
                "c1",
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&route.status), Code::Ok as i32);
        assert_eq!(route.message_queues.len(), 4);
        for q in &route.message_queues {
            assert_eq!(q.permission, Permission::ReadWrite as i32);
            let ep = q.broker.as_ref().unwrap().endpoints.as_ref().unwrap();
            assert_eq!(ep.addresses[0].host, "127.0.0.1");
            assert_eq!(ep.addresses[0].port, i32::from(b.broker.grpc_port));
        }
        let missing = cl
            .query_route(req(
                QueryRouteRequest {
                    topic: Some(res("T_NOT_THERE")),
                    endpoints: None,
                },
                "c1",
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&missing.status), Code::TopicNotFound as i32);

        let hb = cl
            .heartbeat(req(
                HeartbeatRequest {
                    group: None,
                    client_type: ClientType::Producer as i32,
                },
                "c1",
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&hb.status), Code::Ok as i32);

        // Telemetry: the client's Settings are answered with the merged settings.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(TelemetryCommand {
            status: None,
            command: Some(Command::Settings(Settings {
                client_type: Some(ClientType::Producer as i32),
                pub_sub: Some(PubSub::Publishing(Publishing {
                    topics: vec![res("T_GRPC_ROUTE")],
                    max_body_size: 0,
                    validate_message_type: true,
                })),
                ..Default::default()
            })),
        })
        .await
        .unwrap();
        let stream =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
        let mut answers = cl.telemetry(req(stream, "c1")).await.unwrap().into_inner();
        let first = answers.message().await.unwrap().expect("settings answer");
        let Some(Command::Settings(s)) = first.command else {
            panic!("expected Settings, got {first:?}")
        };
        let Some(PubSub::Publishing(p)) = s.pub_sub else {
            panic!("publishing settings")
        };
        assert_eq!(p.max_body_size, 4 * 1024 * 1024);
        assert!(s.backoff_policy.is_some());
        // The producer shows up in the registry like a 4.x producer, under its topic.
        let (_, metrics) = e2e::http::get(b.broker.http_port, "/metrics")
            .await
            .unwrap();
        assert!(
            metrics.contains("rocketmq_grpc_active_streams 1"),
            "{metrics}"
        );
        drop(tx);
    });
}

#[test]
fn send_each_type_and_read_back_with_4x_pulls() {
    let b = TempBroker::start(None, &[("messageDelayLevel", "1s 2s 5s 10s")]);
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        create_topic(&c, "T_GRPC_SEND", 4).await;
        let cl = MessagingServiceClient::new(channel(b.broker.grpc_port).await);

        let send = |m: Message| {
            let mut cl = cl.clone();
            async move {
                cl.send_message(req(SendMessageRequest { messages: vec![m] }, "c2"))
                    .await
                    .unwrap()
                    .into_inner()
            }
        };
        // NORMAL
        let normal = send(message("T_GRPC_SEND", "ID-NORMAL", b"normal")).await;
        assert_eq!(code(&normal.status), Code::Ok as i32, "{normal:?}");
        assert_eq!(normal.entries[0].message_id, "ID-NORMAL");
        // FIFO: one group stays on one queue.
        for i in 0..3 {
            let mut m = message("T_GRPC_SEND", &format!("ID-FIFO-{i}"), b"fifo");
            let sys = m.system_properties.as_mut().unwrap();
            sys.message_group = Some("order-7".into());
            sys.message_type = MessageType::Fifo as i32;
            let r = send(m).await;
            assert_eq!(code(&r.status), Code::Ok as i32, "{r:?}");
        }
        // DELAY: due in 1.5 s -> level 2 (2 s).
        let mut m = message("T_GRPC_SEND", "ID-DELAY", b"delay");
        let sys = m.system_properties.as_mut().unwrap();
        sys.delivery_timestamp = Some(ts(now_ms() + 1500));
        sys.message_type = MessageType::Delay as i32;
        let r = send(m).await;
        assert_eq!(code(&r.status), Code::Ok as i32, "{r:?}");
        // Further away than the longest delay level: refused, never delivered early.
        let mut far = message("T_GRPC_SEND", "ID-FAR", b"far");
        let sys = far.system_properties.as_mut().unwrap();
        sys.delivery_timestamp = Some(ts(now_ms() + 3 * 24 * 3600 * 1000));
        sys.message_type = MessageType::Delay as i32;
        let r = send(far).await;
        assert_eq!(code(&r.status), Code::IllegalDeliveryTime as i32, "{r:?}");
        // A reserved property is refused with a clear status, nothing stored.
        let mut bad = message("T_GRPC_SEND", "ID-BAD", b"bad");
        bad.user_properties.insert("UNIQ_KEY".into(), "x".into());
        let r = send(bad).await;
        assert_eq!(
            code(&r.status),
            Code::IllegalMessagePropertyKey as i32,
            "{r:?}"
        );

        eventually(WAIT, "every message readable by 4.x pulls", || async {
            stored(&c, "T_GRPC_SEND", 4).await.len() == 5
        })
        .await;
        let all = stored(&c, "T_GRPC_SEND", 4).await;
        let by_id = |id: &str| {
            all.iter()
                .find(|p| broker_harness::property(&p.properties, "UNIQ_KEY") == Some(id))
                .unwrap_or_else(|| panic!("{id} stored"))
                .clone()
        };
        let n = by_id("ID-NORMAL");
        assert_eq!(n.body, b"normal");
        assert_eq!(
            broker_harness::property(&n.properties, "TAGS"),
            Some("TagA")
        );
        assert_eq!(
            broker_harness::property(&n.properties, "KEYS"),
            Some("key-1")
        );
        assert_eq!(
            broker_harness::property(&n.properties, "color"),
            Some("red")
        );
        let fifo_queues: std::collections::BTreeSet<i32> = (0..3)
            .map(|i| by_id(&format!("ID-FIFO-{i}")))
            .inspect(|p| {
                assert_eq!(
                    broker_harness::property(&p.properties, "__SHARDINGKEY"),
                    Some("order-7")
                )
            })
            .map(|p| p.queue_id)
            .collect();
        assert_eq!(fifo_queues.len(), 1, "one message group, one queue");
        assert_eq!(by_id("ID-DELAY").body, b"delay");
        // It went through delay level 2 (2 s, the smallest covering 1.5 s).
        let (_, metrics) = e2e::http::get(b.broker.http_port, "/metrics")
            .await
            .unwrap();
        assert!(
            metrics.contains("rocketmq_delay_messages_delivered_total{level=\"2\"} 1"),
            "{metrics}"
        );
    });
}

#[test]
fn transaction_commit_rollback_and_check_back_over_telemetry() {
    let b = TempBroker::start(
        None,
        &[
            ("transactionCheckInterval", "1000"),
            ("transactionTimeOut", "1000"),
        ],
    );
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        create_topic(&c, "T_GRPC_TX", 2).await;
        let mut cl = MessagingServiceClient::new(channel(b.broker.grpc_port).await);

        // The producer's Telemetry stream, publishing the topic (registers it for check-backs).
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(TelemetryCommand {
            status: None,
            command: Some(Command::Settings(Settings {
                client_type: Some(ClientType::Producer as i32),
                pub_sub: Some(PubSub::Publishing(Publishing {
                    topics: vec![res("T_GRPC_TX")],
                    max_body_size: 0,
                    validate_message_type: true,
                })),
                ..Default::default()
            })),
        })
        .await
        .unwrap();
        let stream =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
        let mut answers = cl
            .telemetry(req(stream, "tx-client"))
            .await
            .unwrap()
            .into_inner();
        answers.message().await.unwrap().expect("settings answer");

        let send_half = |id: &'static str| {
            let mut cl = cl.clone();
            async move {
                let mut m = message("T_GRPC_TX", id, id.as_bytes());
                m.system_properties.as_mut().unwrap().message_type =
                    MessageType::Transaction as i32;
                let r = cl
                    .send_message(req(SendMessageRequest { messages: vec![m] }, "tx-client"))
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(code(&r.status), Code::Ok as i32, "{r:?}");
                r.entries[0].transaction_id.clone()
            }
        };
        let end = |id: &'static str, tid: String, resolution: TransactionResolution| {
            let mut cl = cl.clone();
            async move {
                cl.end_transaction(req(
                    EndTransactionRequest {
                        topic: Some(res("T_GRPC_TX")),
                        message_id: id.to_owned(),
                        transaction_id: tid,
                        resolution: resolution as i32,
                        source: TransactionSource::SourceClient as i32,
                        trace_context: String::new(),
                    },
                    "tx-client",
                ))
                .await
                .unwrap()
                .into_inner()
            }
        };
        let commit = send_half("TX-COMMIT").await;
        let rollback = send_half("TX-ROLLBACK").await;
        let orphan = send_half("TX-ORPHAN").await;
        assert!(
            stored(&c, "T_GRPC_TX", 2).await.is_empty(),
            "halves are not visible"
        );
        let r = end("TX-COMMIT", commit, TransactionResolution::Commit).await;
        assert_eq!(code(&r.status), Code::Ok as i32, "{r:?}");
        let r = end("TX-ROLLBACK", rollback, TransactionResolution::Rollback).await;
        assert_eq!(code(&r.status), Code::Ok as i32, "{r:?}");
        // A transaction id naming another message's half is refused.
        let r = end("TX-NOT-THIS", orphan.clone(), TransactionResolution::Commit).await;
        assert_ne!(code(&r.status), Code::Ok as i32, "{r:?}");

        // The orphan is checked back over Telemetry; the answer commits it.
        let check = tokio::time::timeout(WAIT, async {
            loop {
                let m = answers.message().await.unwrap().expect("stream open");
                if let Some(Command::RecoverOrphanedTransactionCommand(cmd)) = m.command {
                    return cmd;
                }
            }
        })
        .await
        .expect("a check-back within the wait");
        let msg = check.message.unwrap();
        assert_eq!(
            msg.system_properties.as_ref().unwrap().message_id,
            "TX-ORPHAN"
        );
        assert_eq!(msg.body, b"TX-ORPHAN");
        let r = end(
            "TX-ORPHAN",
            check.transaction_id,
            TransactionResolution::Commit,
        )
        .await;
        assert_eq!(code(&r.status), Code::Ok as i32, "{r:?}");

        eventually(WAIT, "the two committed messages readable", || async {
            stored(&c, "T_GRPC_TX", 2).await.len() == 2
        })
        .await;
        let ids: std::collections::BTreeSet<String> = stored(&c, "T_GRPC_TX", 2)
            .await
            .iter()
            .filter_map(|p| broker_harness::property(&p.properties, "UNIQ_KEY").map(str::to_owned))
            .collect();
        assert_eq!(ids, ["TX-COMMIT", "TX-ORPHAN"].map(String::from).into());
        drop(tx);
    });
}

#[test]
fn a_message_over_the_decode_limit_is_refused_and_counted() {
    let b = TempBroker::start(None, &[("maxMessageSize", "65536")]);
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        create_topic(&c, "T_GRPC_BIG", 1).await;
        let mut cl = MessagingServiceClient::new(channel(b.broker.grpc_port).await);
        // Over maxMessageSize + the decode headroom: refused before it is decoded.
        let huge = message("T_GRPC_BIG", "ID-HUGE", &vec![b'x'; 65536 + 70 * 1024]);
        let err = cl
            .send_message(req(
                SendMessageRequest {
                    messages: vec![huge],
                },
                "c3",
            ))
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::OutOfRange, "{err:?}");
        // Over maxMessageSize but within the headroom: the send handler refuses it.
        let big = message("T_GRPC_BIG", "ID-BIG", &vec![b'x'; 65536 + 1]);
        let r = cl
            .send_message(req(
                SendMessageRequest {
                    messages: vec![big],
                },
                "c3",
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&r.status), Code::BadRequest as i32, "{r:?}");
        // The endpoint still serves.
        let ok = message("T_GRPC_BIG", "ID-OK", b"ok");
        let r = cl
            .send_message(req(SendMessageRequest { messages: vec![ok] }, "c3"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&r.status), Code::Ok as i32, "{r:?}");
        // Consumer calls that are not served yet, and those never served, name the call.
        let e = cl
            .pull_message(req(PullMessageRequest::default(), "c3"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented);
        assert!(e.message().contains("PullMessage"), "{e:?}");
    });
}

/// `authorization` as the 5.x clients build it: HMAC-SHA1 of `x-mq-date-time`, hex.
fn sign<T>(r: &mut tonic::Request<T>, ak: &str, sk: &str, upper: bool) {
    let date = "20260101T000000Z";
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, sk.as_bytes());
    let tag = ring::hmac::sign(&key, date.as_bytes());
    let mut hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if upper {
        hex = hex.to_ascii_uppercase();
    }
    let md = r.metadata_mut();
    md.insert("x-mq-date-time", date.parse().unwrap());
    md.insert(
        "authorization",
        format!("MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={hex}")
            .parse()
            .unwrap(),
    );
}

#[test]
fn acl_refuses_unsigned_and_unpermitted_calls_and_accepts_signed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let acl_path = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl_path,
        "globalWhiteRemoteAddresses: []\naccounts:\n  - accessKey: adminUser1\n    secretKey: adminSecret1\n    admin: true\n  - accessKey: producer01\n    secretKey: producerSecret\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - Allowed=PUB|SUB\n",
    )
    .unwrap();
    let acl = acl_path.display().to_string();
    let b = TempBroker::start(None, &[("aclEnable", "true"), ("aclFile", &acl)]);
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        for topic in ["Allowed", "Denied"] {
            let mut cmd = broker_harness::with_fields(
                request::UPDATE_AND_CREATE_TOPIC,
                &[
                    ("topic", topic.to_owned()),
                    ("defaultTopic", "TBW102".to_owned()),
                    ("readQueueNums", "1".to_owned()),
                    ("writeQueueNums", "1".to_owned()),
                    ("perm", "6".to_owned()),
                    ("topicFilterType", "SINGLE_TAG".to_owned()),
                    ("topicSysFlag", "0".to_owned()),
                    ("order", "false".to_owned()),
                ],
            );
            security::sign::sign_request(
                &mut cmd,
                &security::sign::Credentials::new("adminUser1", "adminSecret1"),
            );
            let r = c.request(cmd).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        let cl = MessagingServiceClient::new(channel(b.broker.grpc_port).await);
        let send = |topic: &str, who: Option<(&str, &str, bool)>| {
            let mut r = req(
                SendMessageRequest {
                    messages: vec![message(topic, "ID-ACL", b"acl")],
                },
                "acl-client",
            );
            if let Some((ak, sk, upper)) = who {
                sign(&mut r, ak, sk, upper);
            }
            let mut cl = cl.clone();
            async move { cl.send_message(r).await }
        };
        let e = send("Allowed", None).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
        let e = send("Allowed", Some(("producer01", "wrongSecret", false)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
        let e = send("Allowed", Some(("nobody", "producerSecret", false)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
        let e = send("Denied", Some(("producer01", "producerSecret", false)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("Denied"), "{e:?}");
        for upper in [false, true] {
            let ok = send("Allowed", Some(("producer01", "producerSecret", upper)))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(code(&ok.status), Code::Ok as i32, "{ok:?}");
        }
    });
}

fn producer_settings(topic: &str) -> TelemetryCommand {
    TelemetryCommand {
        status: None,
        command: Some(Command::Settings(Settings {
            client_type: Some(ClientType::Producer as i32),
            pub_sub: Some(PubSub::Publishing(Publishing {
                topics: vec![res(topic)],
                max_body_size: 0,
                validate_message_type: true,
            })),
            ..Default::default()
        })),
    }
}

#[test]
fn telemetry_streams_and_connections_per_source_are_bounded() {
    let b = TempBroker::start(
        None,
        &[
            ("grpcMaxTelemetryStreamsPerClient", "1"),
            ("grpcMaxConnectionsPerIp", "1"),
            ("connectionReservePercent", "0"),
        ],
    );
    let rt = runtime();
    rt.block_on(async {
        let mut cl = MessagingServiceClient::new(channel(b.broker.grpc_port).await);
        let open = |cl: &mut MessagingServiceClient<Channel>| {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let mut cl = cl.clone();
            async move {
                tx.send(producer_settings("T_LIMIT")).await.unwrap();
                let stream = futures::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|m| (m, rx))
                });
                let r = cl.telemetry(req(stream, "limit-client")).await;
                (tx, r)
            }
        };
        let (_keep, first) = open(&mut cl).await;
        let mut first = first.expect("first stream").into_inner();
        first.message().await.unwrap().expect("settings answer");
        let (_tx2, second) = open(&mut cl).await;
        let refused = match second {
            Err(e) => e,
            Ok(r) => r.into_inner().message().await.unwrap_err(),
        };
        assert_eq!(
            refused.code(),
            tonic::Code::ResourceExhausted,
            "{refused:?}"
        );
        assert!(
            refused
                .message()
                .contains("grpcMaxTelemetryStreamsPerClient")
        );

        // A second connection from the same source is closed at accept.
        let second_conn = tonic::transport::Endpoint::from_shared(format!(
            "http://127.0.0.1:{}",
            b.broker.grpc_port
        ))
        .unwrap()
        .connect()
        .await;
        if let Ok(ch) = second_conn {
            let r = MessagingServiceClient::new(ch)
                .heartbeat(req(HeartbeatRequest::default(), "other"))
                .await;
            assert!(r.is_err(), "over grpcMaxConnectionsPerIp: {r:?}");
        }
        let (_, metrics) = e2e::http::get(b.broker.http_port, "/metrics")
            .await
            .unwrap();
        for key in [
            "grpcMaxTelemetryStreamsPerClient",
            "grpcMaxConnectionsPerIp",
        ] {
            // The client retries a refused connection: counted once per attempt.
            let prefix = format!("rocketmq_broker_limit_refusals_total{{limit=\"{key}\"}} ");
            let count: u64 = metrics
                .lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            assert!(count >= 1, "{key}: {metrics}");
        }
        // The first connection and stream are still served.
        let hb = cl
            .heartbeat(req(HeartbeatRequest::default(), "limit-client"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&hb.status), Code::Ok as i32);
    });
}
