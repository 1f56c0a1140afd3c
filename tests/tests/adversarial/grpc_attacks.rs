//! Attacks on the 5.x gRPC endpoint (`apache.rocketmq.v2.MessagingService`), driven by a
//! tonic client built from rmq-grpc-api. The attacker connects from 127.0.0.2, the victim
//! from 127.0.0.1.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, with_fields};
use e2e::wait::runtime;
use grpc_api::v2::messaging_service_client::MessagingServiceClient;
use grpc_api::v2::*;
use protocol::code::{request, response};
use tonic::transport::{Channel, Endpoint};

use crate::common::victim_is_served;

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const VICTIM: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));

async fn channel_from(port: u16, local: IpAddr) -> Channel {
    Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .local_address(Some(local))
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .expect("connect to the gRPC port")
}

fn req<T>(msg: T, client_id: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let md = r.metadata_mut();
    md.insert("x-mq-client-id", client_id.parse().unwrap());
    md.insert("x-mq-language", "JAVA".parse().unwrap());
    md.insert("x-mq-protocol", "v2".parse().unwrap());
    r
}

fn res(name: &str) -> Resource {
    Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    }
}

/// The client ids 4.x GET_CONSUMER_LIST_BY_GROUP lists for `group`.
async fn members(c: &Client, group: &str) -> String {
    let r = c
        .request(with_fields(
            request::GET_CONSUMER_LIST_BY_GROUP,
            &[("consumerGroup", group.to_owned())],
        ))
        .await
        .expect("consumer list answered");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    String::from_utf8_lossy(&r.body).into_owned()
}

/// A client naming another client's `x-mq-client-id` from another address must not
/// end that client's session (NotifyClientTermination drops it from its groups and
/// closes its Telemetry stream) nor take it over (a Telemetry stream on it would carry
/// the victim's transaction check-backs).
#[test]
fn a_foreign_client_id_neither_ends_nor_takes_over_a_session() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        let victim_id = "10.1.1.1@4242@victim5x";
        let group = "G_GRPC_VICTIM";
        let mut victim = MessagingServiceClient::new(channel_from(port, VICTIM).await);
        let hb = victim
            .heartbeat(req(
                HeartbeatRequest {
                    group: Some(res(group)),
                    client_type: ClientType::SimpleConsumer as i32,
                },
                victim_id,
            ))
            .await
            .expect("victim heartbeat")
            .into_inner();
        assert_eq!(hb.status.map(|s| s.code), Some(Code::Ok as i32));
        let c = Client::connect(b.broker.port).await.unwrap();
        assert!(members(&c, group).await.contains(victim_id));

        let mut attacker = MessagingServiceClient::new(channel_from(port, ATTACKER).await);
        // Ending the victim's session is refused or ignored; either way it stays.
        let _ = attacker
            .notify_client_termination(req(
                NotifyClientTerminationRequest {
                    group: Some(res(group)),
                },
                victim_id,
            ))
            .await;
        assert!(
            members(&c, group).await.contains(victim_id),
            "an attacker's NotifyClientTermination ended the victim's session"
        );
        // Taking it over: a heartbeat under the victim's id from elsewhere is refused.
        let stolen = attacker
            .heartbeat(req(
                HeartbeatRequest {
                    group: Some(res("G_GRPC_ATTACKER")),
                    client_type: ClientType::SimpleConsumer as i32,
                },
                victim_id,
            ))
            .await;
        let err = stolen.expect_err("a heartbeat under a foreign client id is refused");
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
        assert!(err.message().contains(victim_id), "{err:?}");

        // The victim is still served under its own id, and so is a 4.x client.
        let again = victim
            .heartbeat(req(
                HeartbeatRequest {
                    group: Some(res(group)),
                    client_type: ClientType::SimpleConsumer as i32,
                },
                victim_id,
            ))
            .await
            .expect("victim heartbeat again")
            .into_inner();
        assert_eq!(again.status.map(|s| s.code), Some(Code::Ok as i32));
        assert!(members(&c, group).await.contains(victim_id));
        victim_is_served(&mut b.broker).await;
    });
}

/// A Settings of `bytes` bytes (publishing topics) on a Telemetry stream of `client_id`;
/// waits for the broker's answer, then ends the stream (the session stays).
async fn big_settings(cl: &mut MessagingServiceClient<Channel>, client_id: &str, bytes: usize) {
    let name = "T".repeat(100);
    let topics = (0..bytes / (name.len() + 4)).map(|_| res(&name)).collect();
    let settings = Settings {
        client_type: Some(ClientType::Producer as i32),
        pub_sub: Some(settings::PubSub::Publishing(Publishing {
            topics,
            ..Default::default()
        })),
        ..Default::default()
    };
    // The Settings, then the stream ends once the answer is read (`done` dropped).
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    let stream = futures::StreamExt::chain(
        futures::stream::iter([TelemetryCommand {
            status: None,
            command: Some(telemetry_command::Command::Settings(settings)),
        }]),
        futures::StreamExt::filter_map(futures::stream::once(ended), |_| async { None }),
    );
    let mut answers = cl
        .telemetry(req(stream, client_id))
        .await
        .expect("Telemetry opened")
        .into_inner();
    let first = answers.message().await.expect("settings answer");
    assert!(first.is_some(), "the broker answered the settings");
    drop(done);
    // The broker ends its side once the client's side ended.
    while answers.message().await.ok().flatten().is_some() {}
}

/// A 5.x client's Settings are kept on its session for as long as it lives; a client
/// sending a Settings near the decode limit under many client ids must not make the
/// broker keep each one whole.
#[test]
fn settings_kept_per_session_stay_small() {
    // Telemetry commands are capped at 1 MiB by default; raised here so what a session
    // keeps is measured with Settings near the decode limit.
    let mut b = TempBroker::start(None, &[("grpcMaxTelemetryMessageSize", "4194304")]);
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        let mut attacker = MessagingServiceClient::new(channel_from(port, ATTACKER).await)
            .max_encoding_message_size(8 << 20)
            .max_decoding_message_size(8 << 20);
        const SIZE: usize = 3 << 20;
        const SESSIONS: usize = 40;
        // One round first: what the transient decode costs is not what the test bounds.
        big_settings(&mut attacker, "attacker-warmup", SIZE).await;
        let before = b.broker.anon_rss_kib().expect("rss");
        for i in 0..SESSIONS {
            big_settings(&mut attacker, &format!("attacker-{i}"), SIZE).await;
        }
        let after = b.broker.anon_rss_kib().expect("rss");
        let grown_mib = after.saturating_sub(before) / 1024;
        // Kept whole, the settings would hold SESSIONS * 3 MiB = 120 MiB.
        assert!(
            grown_mib < 48,
            "{SESSIONS} sessions of {} MiB settings grew the broker by {grown_mib} MiB",
            SIZE >> 20
        );
        victim_is_served(&mut b.broker).await;
    });
}

/// `authorization` as the 5.x clients build it: HMAC-SHA1 of `x-mq-date-time`, hex.
fn signed<T>(mut r: tonic::Request<T>, ak: &str, sk: &str) -> tonic::Request<T> {
    let date = "20260101T000000Z";
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, sk.as_bytes());
    let hex: String = ring::hmac::sign(&key, date.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let md = r.metadata_mut();
    md.insert("x-mq-date-time", date.parse().unwrap());
    md.insert(
        "authorization",
        format!("MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={hex}")
            .parse()
            .unwrap(),
    );
    r
}

fn as_attacker<T>(r: tonic::Request<T>) -> tonic::Request<T> {
    signed(r, "consumer01", "consumerSecret01")
}

/// With the ACL on, an account that may consume topic `Allowed` in a shared group must
/// not settle (ack, hide again, dead-letter) a message of topic `Secret` it may not
/// consume by naming `Allowed` in the request and `Secret`'s receipt handle.
#[test]
fn a_receipt_handle_settles_only_the_topic_the_request_names() {
    let dir = tempfile::tempdir().unwrap();
    let acl_path = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl_path,
        "globalWhiteRemoteAddresses: []\naccounts:\n  - accessKey: adminUser1\n    secretKey: adminSecret1\n    admin: true\n  - accessKey: consumer01\n    secretKey: consumerSecret01\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - Allowed=SUB\n",
    )
    .unwrap();
    let acl = acl_path.display().to_string();
    let mut b = TempBroker::start(None, &[("aclEnable", "true"), ("aclFile", &acl)]);
    let admin = security::sign::Credentials::new("adminUser1", "adminSecret1");
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        for topic in ["Allowed", "Secret", "VictimTopic"] {
            let mut cmd = with_fields(
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
            security::sign::sign_request(&mut cmd, &admin);
            let r = c.request(cmd).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        let mut send = e2e::broker_harness::send_v2("Secret", 0, b"secret", "");
        security::sign::sign_request(&mut send, &admin);
        let r = c.request(send).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);

        let port = b.broker.grpc_port;
        let mut victim = MessagingServiceClient::new(channel_from(port, VICTIM).await);
        let group = "G_SHARED";
        let mut handle = None;
        for _ in 0..5 {
            let mut answers = victim
                .receive_message(signed(
                    req(
                        ReceiveMessageRequest {
                            group: Some(res(group)),
                            message_queue: Some(MessageQueue {
                                topic: Some(res("Secret")),
                                id: -1,
                                ..Default::default()
                            }),
                            batch_size: 1,
                            invisible_duration: Some(prost_types::Duration {
                                seconds: 60,
                                nanos: 0,
                            }),
                            long_polling_timeout: Some(prost_types::Duration {
                                seconds: 5,
                                nanos: 0,
                            }),
                            ..Default::default()
                        },
                        "victim-consumer",
                    ),
                    "adminUser1",
                    "adminSecret1",
                ))
                .await
                .expect("receive")
                .into_inner();
            while let Some(a) = answers.message().await.expect("answer") {
                if let Some(receive_message_response::Content::Message(m)) = a.content {
                    handle = m.system_properties.and_then(|s| s.receipt_handle);
                }
            }
            if handle.is_some() {
                break;
            }
        }
        let handle = handle.expect("the victim received the Secret message");

        let mut attacker = MessagingServiceClient::new(channel_from(port, ATTACKER).await);
        let ack = attacker
            .ack_message(as_attacker(req(
                AckMessageRequest {
                    group: Some(res(group)),
                    topic: Some(res("Allowed")),
                    entries: vec![AckMessageEntry {
                        message_id: String::new(),
                        receipt_handle: handle.clone(),
                        lite_topic: None,
                    }],
                },
                "attacker",
            )))
            .await
            .expect("ack answered")
            .into_inner();
        assert_eq!(
            ack.status.as_ref().map(|s| s.code),
            Some(Code::InvalidReceiptHandle as i32),
            "{ack:?}"
        );
        let hide = attacker
            .change_invisible_duration(as_attacker(req(
                ChangeInvisibleDurationRequest {
                    group: Some(res(group)),
                    topic: Some(res("Allowed")),
                    receipt_handle: handle.clone(),
                    invisible_duration: Some(prost_types::Duration {
                        seconds: 3600,
                        nanos: 0,
                    }),
                    ..Default::default()
                },
                "attacker",
            )))
            .await
            .expect("change answered")
            .into_inner();
        assert_eq!(
            hide.status.as_ref().map(|s| s.code),
            Some(Code::InvalidReceiptHandle as i32),
            "{hide:?}"
        );
        let dlq = attacker
            .forward_message_to_dead_letter_queue(as_attacker(req(
                ForwardMessageToDeadLetterQueueRequest {
                    group: Some(res(group)),
                    topic: Some(res("Allowed")),
                    receipt_handle: handle.clone(),
                    ..Default::default()
                },
                "attacker",
            )))
            .await
            .expect("forward answered")
            .into_inner();
        assert_eq!(
            dlq.status.as_ref().map(|s| s.code),
            Some(Code::InvalidReceiptHandle as i32),
            "{dlq:?}"
        );

        // The victim still holds its message: its own ack of the handle succeeds.
        let own = victim
            .ack_message(signed(
                req(
                    AckMessageRequest {
                        group: Some(res(group)),
                        topic: Some(res("Secret")),
                        entries: vec![AckMessageEntry {
                            message_id: String::new(),
                            receipt_handle: handle,
                            lite_topic: None,
                        }],
                    },
                    "victim-consumer",
                ),
                "adminUser1",
                "adminSecret1",
            ))
            .await
            .expect("victim ack")
            .into_inner();
        assert_eq!(
            own.status.as_ref().map(|s| s.code),
            Some(Code::Ok as i32),
            "{own:?}"
        );
        let mut victim_send = e2e::broker_harness::send_v2("VictimTopic", 0, b"v", "");
        security::sign::sign_request(&mut victim_send, &admin);
        let r = c.request(victim_send).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert!(
            b.broker.running(),
            "the broker died; log:\n{}",
            b.broker.log()
        );
    });
}
