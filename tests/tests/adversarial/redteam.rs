//! Findings of a red-team pass against a real broker with nothing but sockets: requests
//! whose cost to the broker (memory, CPU, answers queued) was out of proportion to their
//! size, or identities the broker trusted. Each test replays the attack and checks the
//! bound that now holds.

use std::time::Duration;

use bytes::BytesMut;
use e2e::Client;
use e2e::broker_harness::{TempBroker, pull, send_v2, with_fields};
use e2e::wait::{eventually, runtime};
use protocol::body::{HeartbeatData, LockBatchRequestBody, MessageQueue, ProducerData};
use protocol::code::{request, response};
use protocol::{RemotingCodec, RemotingCommand};
use tokio::io::AsyncWriteExt;
use tokio_util::codec::Encoder;

use crate::common::{metric, refusals, victim_is_served};

/// A HEART_BEAT naming `groups` producer groups under `client_id`.
fn producer_heartbeat(client_id: &str, groups: usize) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        producer_data_set: (0..groups)
            .map(|g| ProducerData {
                group_name: format!("amp-producer-{g}"),
            })
            .collect(),
        consumer_data_set: Vec::new(),
    };
    RemotingCommand::bare_request(request::HEART_BEAT).with_body(protocol::body::encode(&data))
}

/// The client id is stored once per membership: one heartbeat of half a MiB naming 512
/// groups under a 512 KiB id made the broker hold 256 MiB (a 15 MiB frame, 15 GiB).
/// Now an id longer than `maxClientIdLength` refuses the heartbeat, nothing is stored.
#[test]
fn a_huge_client_id_is_not_copied_into_every_membership() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let baseline = b.broker.anon_rss_kib().expect("rss");
        let r = c
            .request(producer_heartbeat(&"i".repeat(512 << 10), 512))
            .await
            .expect("heartbeat answered");
        let grown_mib = b
            .broker
            .anon_rss_kib()
            .expect("rss")
            .saturating_sub(baseline)
            / 1024;
        assert!(grown_mib < 64, "resident memory grew {grown_mib} MiB");
        assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
        assert!(
            r.remark
                .as_deref()
                .is_some_and(|m| m.contains("maxClientIdLength")),
            "{:?}",
            r.remark
        );
        assert_eq!(refusals(b.broker.http_port, "maxClientIdLength").await, 1.0);
        assert_eq!(
            metric(b.broker.http_port, "rocketmq_broker_client_groups").await,
            0.0
        );
        // An ordinary id is served.
        let r = c
            .request(producer_heartbeat("127.0.0.2@attacker", 4))
            .await
            .expect("heartbeat answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        victim_is_served(&mut b.broker).await;
    });
}

/// LOCK_BATCH_MQ stores its client id in every queue lock it takes: 512 queues under a
/// 512 KiB id held 256 MiB. An id over `maxClientIdLength` locks nothing.
#[test]
fn a_huge_client_id_is_not_copied_into_every_queue_lock() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c
            .request(with_fields(
                request::UPDATE_AND_CREATE_TOPIC,
                &[
                    ("topic", "Locked".into()),
                    ("defaultTopic", "TBW102".into()),
                    ("readQueueNums", "512".into()),
                    ("writeQueueNums", "512".into()),
                    ("perm", "6".into()),
                    ("topicFilterType", "SINGLE_TAG".into()),
                    ("order", "false".into()),
                ],
            ))
            .await
            .expect("create topic");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = c
            .request(crate::common::heartbeat(
                "127.0.0.2@attacker",
                "lock-group",
                Vec::new(),
            ))
            .await
            .expect("heartbeat");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let lock = |client_id: String| {
            let body = LockBatchRequestBody {
                consumer_group: "lock-group".to_owned(),
                client_id,
                only_this_broker: true,
                mq_set: (0..512)
                    .map(|q| MessageQueue {
                        topic: "Locked".to_owned(),
                        broker_name: "broker-e2e".to_owned(),
                        queue_id: q,
                    })
                    .collect(),
            };
            RemotingCommand::bare_request(request::LOCK_BATCH_MQ)
                .with_body(protocol::body::encode(&body))
        };
        let baseline = b.broker.anon_rss_kib().expect("rss");
        let r = c
            .request(lock("l".repeat(512 << 10)))
            .await
            .expect("lock answered");
        let grown_mib = b
            .broker
            .anon_rss_kib()
            .expect("rss")
            .saturating_sub(baseline)
            / 1024;
        assert!(grown_mib < 64, "resident memory grew {grown_mib} MiB");
        assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
        assert!(
            r.remark
                .as_deref()
                .is_some_and(|m| m.contains("maxClientIdLength")),
            "{:?}",
            r.remark
        );
        assert_eq!(refusals(b.broker.http_port, "maxClientIdLength").await, 1.0);
        // An ordinary id locks every queue.
        let r = c
            .request(lock("127.0.0.2@attacker".into()))
            .await
            .expect("lock");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let locked: protocol::body::LockBatchResponseBody =
            protocol::body::decode(&r.body).expect("lock answer");
        assert_eq!(locked.lock_ok_mq_set.len(), 512);
        victim_is_served(&mut b.broker).await;
    });
}

/// UPDATE_AND_CREATE_TOPIC of `topic` with `queues` read and write queues.
fn create_topic(topic: &str, queues: u32) -> RemotingCommand {
    with_fields(
        request::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", topic.to_owned()),
            ("defaultTopic", "TBW102".into()),
            ("readQueueNums", queues.to_string()),
            ("writeQueueNums", queues.to_string()),
            ("perm", "6".into()),
            ("topicFilterType", "SINGLE_TAG".into()),
            ("order", "false".into()),
        ],
    )
}

/// Answers waiting for a peer that does not read them: 400 GET_TOPIC_STATS_INFO of a
/// 1,024-queue topic (40 KB of requests, 100 MB of answers) pipelined by a peer that
/// never reads. The broker served every one and kept all the answers (its writer, woken
/// by a reader that never yielded, did not even run, so `writeTimeoutMillis` never fired).
/// Now answers not yet written count against `maxInFlightBytesPerConnection`, the
/// connection is not read further while over it, and the write deadline closes it.
#[test]
fn answers_a_peer_does_not_read_are_bounded_in_bytes() {
    let mut b = TempBroker::start(
        None,
        &[
            ("maxInFlightBytesPerConnection", "8388608"),
            ("writeTimeoutMillis", "10000"),
        ],
    );
    runtime().block_on(async {
        let topic = "S".repeat(127);
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c.request(create_topic(&topic, 1024)).await.expect("create");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let stats = || with_fields(request::GET_TOPIC_STATS_INFO, &[("topic", topic.clone())]);
        let r = c.request(stats()).await.expect("stats");
        assert!(
            r.body.len() > 200_000,
            "an answer of {} bytes",
            r.body.len()
        );
        let baseline = b.broker.anon_rss_kib().expect("rss");

        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(([127, 0, 0, 2], 0).into())
            .expect("bind 127.0.0.2");
        let mut attacker = socket
            .connect(([127, 0, 0, 1], b.broker.port).into())
            .await
            .expect("attacker connects");
        let mut frames = BytesMut::new();
        let mut codec = RemotingCodec::default();
        for opaque in 0..400 {
            let mut cmd = stats();
            cmd.opaque = opaque;
            codec.encode(cmd, &mut frames).expect("encode");
        }
        attacker.write_all(&frames).await.expect("requests written");

        let served =
            r#"rocketmq_request_latency_seconds_count{request_code="GET_TOPIC_STATS_INFO"}"#;
        let mut peak = 0;
        eventually(
            Duration::from_secs(120),
            "every request served, or the connection closed by the write deadline",
            || {
                peak = peak.max(b.broker.anon_rss_kib().unwrap_or(0));
                async {
                    metric(b.broker.http_port, served).await >= 401.0
                        || metric(b.broker.http_port, "rocketmq_broker_write_timeouts_total").await
                            >= 1.0
                }
            },
        )
        .await;
        peak = peak.max(b.broker.anon_rss_kib().unwrap_or(0));
        let grown_mib = peak.saturating_sub(baseline) / 1024;
        // 8 MiB of answers, one answer over it, the writer's buffer; without the bound
        // the broker held the 100 MB of answers.
        assert!(grown_mib < 32, "resident memory grew {grown_mib} MiB");
        victim_is_served(&mut b.broker).await;
        drop(attacker);
    });
}

/// A filtered pull scans ConsumeQueue units until it has a batch; with a selector that
/// matches nothing, `maxMsgNums` alone set how far: 2^31-1 read and evaluated every
/// message of the queue's file (300,000 with the default ConsumeQueue file) on the
/// connection's thread, for a 300-byte request. Two connections pipelining such pulls
/// left a victim unanswered for half a minute. Now one pull scans at most
/// `maxPullScanUnits` units, whatever it asks for, and says where to go on.
#[test]
fn a_filtered_pull_scans_a_bounded_window() {
    let mut b = TempBroker::start(
        None,
        &[
            ("enablePropertyFilter", "true"),
            ("mappedFileSizeConsumeQueue", "6000000"),
            ("mappedFileSizeCommitLog", "104857600"),
        ],
    );
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        for _ in 0..30 {
            let sends = (0..1000)
                .map(|_| send_v2("Scanned", 0, b"x", "a\u{1}1"))
                .collect();
            let answers = c.pipeline(sends).await.expect("sends");
            assert!(answers.iter().all(|r| r.code == response::SUCCESS));
        }
        let scan = |max: i32| {
            let mut p = pull("scan-group", "Scanned", 0, 0, max, None, "a = 'never'");
            p.ext_fields.insert("expressionType", "SQL92");
            p
        };
        for max in [32, 1024, 100_000, i32::MAX] {
            let r = c.request(scan(max)).await.expect("pull");
            assert_eq!(r.code, response::PULL_RETRY_IMMEDIATELY, "{:?}", r.remark);
            let next: i64 = r
                .ext_fields
                .get("nextBeginOffset")
                .and_then(|v| v.parse().ok())
                .expect("nextBeginOffset");
            // 800 units is 4.9's floor (16,000 bytes of ConsumeQueue); 1,024 the default
            // maxPullScanUnits. The consumer goes on from `next`.
            assert!(
                (800..=1024).contains(&next),
                "maxMsgNums {max}: next {next}"
            );
        }
        let port = b.broker.port;
        let attackers = futures::future::join_all((0..2).map(|_| async {
            let a = Client::connect_from([127, 0, 0, 2].into(), port)
                .await
                .expect("attacker");
            a.pipeline((0..200).map(|_| scan(i32::MAX)).collect())
                .await
                .expect("scans answered")
        }));
        let (answers, ()) = tokio::join!(attackers, victim_is_served(&mut b.broker));
        assert!(
            answers
                .iter()
                .flatten()
                .all(|r| r.code == response::PULL_RETRY_IMMEDIATELY)
        );
    });
}

/// Every (group, topic) pair that ever pulled a message kept a minute of per-second
/// counters (`consumeTps` of GET_CONSUME_STATS) for the life of the process, whether or
/// not the pair was still used, or the group and topic still existed: 300 topics times
/// 300 auto-created groups, one pull each, left 60 MB behind. Now the table holds at
/// most `maxConsumeRateEntries` pairs (pairs past it are not rated) and pairs idle for a
/// minute are dropped; a pair rated before the attack keeps its rate.
#[test]
fn consume_rates_are_bounded_by_pairs() {
    let mut b = TempBroker::start(None, &[("maxConsumeRateEntries", "1000")]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let topics: Vec<String> = (0..300).map(|t| format!("Rated-{t}")).collect();
        let sends = topics.iter().map(|t| send_v2(t, 0, b"x", "")).collect();
        for r in c.pipeline(sends).await.expect("sends") {
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        eventually(
            Duration::from_secs(20),
            "every message dispatched",
            || async {
                let max_offsets = topics
                    .iter()
                    .map(|t| {
                        with_fields(
                            request::GET_MAX_OFFSET,
                            &[("topic", t.clone()), ("queueId", "0".into())],
                        )
                    })
                    .collect();
                c.pipeline(max_offsets)
                    .await
                    .expect("max offsets")
                    .iter()
                    .all(|r| r.ext_fields.get("offset") == Some("1"))
            },
        )
        .await;
        let r = c
            .request(pull("victim-group", "Rated-0", 0, 0, 32, None, "*"))
            .await
            .expect("victim pull");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let baseline = b.broker.anon_rss_kib().expect("rss");

        let attacker = Client::connect_from([127, 0, 0, 2].into(), b.broker.port)
            .await
            .expect("attacker");
        for g in 0..300 {
            let pulls = topics
                .iter()
                .map(|t| pull(&format!("rate-{g}"), t, 0, 0, 32, None, "*"))
                .collect();
            for r in attacker.pipeline(pulls).await.expect("pulls") {
                assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
            }
        }
        let grown_mib = b
            .broker
            .anon_rss_kib()
            .expect("rss")
            .saturating_sub(baseline)
            / 1024;
        assert!(grown_mib < 24, "resident memory grew {grown_mib} MiB");
        assert!(refusals(b.broker.http_port, "maxConsumeRateEntries").await >= 1.0);
        let stats = c
            .request(with_fields(
                request::GET_CONSUME_STATS,
                &[
                    ("consumerGroup", "victim-group".into()),
                    ("topic", "Rated-0".into()),
                ],
            ))
            .await
            .expect("consume stats");
        assert_eq!(stats.code, response::SUCCESS, "{:?}", stats.remark);
        // `{"consumeTps":<rate>,"offsetTable":{<queue object>:...}}`: the table's keys are
        // objects (as fastjson writes them), so the rate is read from the text.
        let body = String::from_utf8_lossy(&stats.body).into_owned();
        let tps: f64 = body
            .strip_prefix("{\"consumeTps\":")
            .and_then(|rest| rest.split(',').next())
            .and_then(|v| v.parse().ok())
            .expect("consumeTps");
        assert!(tps > 0.0, "{body}");
        victim_is_served(&mut b.broker).await;
    });
}
