//! Client-compatibility gaps found with real clients, reproduced with raw frames: the
//! C++ client 2.x sends a batch as SEND_MESSAGE with the V1 header and `batch="1"`. The
//! broker stores the batch's messages, each with its own keys and properties, and refuses
//! a body that is not a batch without storing anything. The C++ client ignores
//! RESET_CONSUMER_CLIENT_OFFSET: the broker enforces a reset on its pulls and commits.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, decode_records, properties, property, pull, send_v2};
use e2e::metrics::wait_dispatched;
use e2e::wait::runtime;
use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::header::{
    QueryConsumerOffsetRequestHeader, ResetOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use protocol::message::ConsumerOffset;
use protocol::message::batch::{BatchEntry, encode};

/// SEND_MESSAGE (10) with the V1 header as the C++ client builds it.
fn send_v1_batch(topic: &str, body: Vec<u8>, batch: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(request::SEND_MESSAGE).with_body(body);
    for (k, v) in [
        ("producerGroup", "cpp_producer"),
        ("topic", topic),
        ("defaultTopic", "TBW102"),
        ("defaultTopicQueueNums", "4"),
        ("queueId", "0"),
        ("sysFlag", "0"),
        ("bornTimestamp", "1700000000000"),
        ("flag", "0"),
        ("properties", ""),
        ("reconsumeTimes", "0"),
        ("unitMode", "false"),
        ("batch", batch),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    cmd
}

async fn max_offset(c: &Client, topic: &str) -> i64 {
    let r = c
        .request(pull("probe", topic, 0, 0, 1, None, "*"))
        .await
        .unwrap();
    r.ext_fields
        .get("maxOffset")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn cpp_v1_batch_flag_one_stores_each_message() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        let props: Vec<String> = (0..3)
            .map(|i| {
                properties(&[
                    ("KEYS", &format!("key-{i}")),
                    ("TAGS", "cpp"),
                    ("UNIQ_KEY", &format!("AC11000100002A9F00000000000000{i:02}")),
                    ("n", &i.to_string()),
                ])
            })
            .collect();
        let bodies: Vec<Vec<u8>> = (0..3).map(|i| format!("body-{i}").into_bytes()).collect();
        let entries: Vec<BatchEntry<'_>> = (0..3)
            .map(|i| BatchEntry {
                flag: 0,
                body: &bodies[i],
                properties: &props[i],
            })
            .collect();
        let body = encode(entries.iter()).unwrap();

        let r = c
            .request(send_v1_batch("CppBatch", body.clone(), "1"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert_eq!(
            r.ext_fields.get("msgId").map(|ids| ids.split(',').count()),
            Some(3)
        );

        wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        let r = c
            .request(pull("G", "CppBatch", 0, 0, 32, None, "*"))
            .await
            .unwrap();
        let msgs = decode_records(&r.body);
        assert_eq!(msgs.len(), 3, "stored: {msgs:?}");
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(m.body, bodies[i]);
            assert_eq!(
                property(&m.properties, "KEYS"),
                Some(format!("key-{i}").as_str())
            );
            assert_eq!(property(&m.properties, "n"), Some(i.to_string().as_str()));
            assert_eq!(property(&m.properties, "TAGS"), Some("cpp"));
        }

        // Not a batch: refused with a clear remark, nothing stored.
        for bad in [
            b"a plain message body sent with batch=1".to_vec(),
            body[..body.len() - 3].to_vec(),
            Vec::new(),
        ] {
            let r = c
                .request(send_v1_batch("CppBatch", bad, "1"))
                .await
                .unwrap();
            assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{:?}", r.remark);
            let remark = r.remark.unwrap_or_default();
            assert!(remark.contains("not a valid message batch"), "{remark}");
        }
        let mut wrong_size = body.clone();
        wrong_size[3] ^= 0x10;
        let r = c
            .request(send_v1_batch("CppBatch", wrong_size, "true"))
            .await
            .unwrap();
        assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{:?}", r.remark);
        assert_eq!(max_offset(&c, "CppBatch").await, 3);

        // batch="false" keeps the 4.9 meaning: the body is one message.
        let r = c
            .request(send_v1_batch("CppBatch", b"single".to_vec(), "false"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        assert_eq!(max_offset(&c, "CppBatch").await, 4, "single message stored");
    });
}

/// PULL_MESSAGE at `offset` carrying a piggy-backed commit (COMMIT_OFFSET | SUBSCRIPTION),
/// as push consumers pull.
fn pull_committing(group: &str, topic: &str, offset: i64, commit: i64) -> RemotingCommand {
    let mut cmd = pull(group, topic, 0, offset, 32, None, "*");
    cmd.ext_fields.insert("sysFlag", "5");
    cmd.ext_fields.insert("commitOffset", commit.to_string());
    cmd
}

async fn committed(c: &Client, group: &str, topic: &str) -> i64 {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: 0,
        bname: None,
    };
    let r = c
        .request(RemotingCommand::request(
            request::QUERY_CONSUMER_OFFSET,
            &header,
        ))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    r.ext_fields.get("offset").unwrap().parse().unwrap()
}

async fn commit(c: &Client, group: &str, topic: &str, offset: i64) {
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: 0,
        commit_offset: ConsumerOffset(offset),
        bname: None,
    };
    let r = c
        .request(RemotingCommand::request(
            request::UPDATE_CONSUMER_OFFSET,
            &header,
        ))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
}

/// A client that ignores RESET_CONSUMER_CLIENT_OFFSET (the C++ client cannot decode it)
/// keeps pulling and committing where it was. The broker moves its next pull to the
/// reset offset (PULL_OFFSET_MOVED, `nextBeginOffset`) and ignores its commits of the
/// queue until it has pulled past where the queue ended when it was reset.
#[test]
fn a_reset_is_enforced_on_a_client_that_ignores_the_notice() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let (topic, group) = ("ResetRaw", "reset-raw-group");
        let c = Client::connect(b.broker.port).await.unwrap();
        for i in 0..5 {
            let r = c
                .request(send_v2(topic, 0, format!("m{i}").as_bytes(), ""))
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        commit(&c, group, topic, 5).await;
        assert_eq!(committed(&c, group, topic).await, 5);

        let reset = ResetOffsetRequestHeader {
            topic: topic.to_owned(),
            group: group.to_owned(),
            timestamp: 0,
            is_force: true,
            queue_id: -1,
        };
        let r = c
            .request(RemotingCommand::request(
                request::INVOKE_BROKER_TO_RESET_OFFSET,
                &reset,
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert_eq!(committed(&c, group, topic).await, 0);

        // The stale periodic commit and the stale pull are both turned away.
        commit(&c, group, topic, 5).await;
        assert_eq!(committed(&c, group, topic).await, 0, "stale commit ignored");
        let r = c
            .request(pull_committing(group, topic, 5, 5))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_OFFSET_MOVED, "{:?}", r.remark);
        assert_eq!(r.ext_fields.get("nextBeginOffset"), Some("0"));
        assert_eq!(committed(&c, group, topic).await, 0);

        // The pull at the reset offset gets everything again; its stale commit too is
        // ignored, and so is the one of the pull right after (sent before the client
        // consumed what was delivered again).
        let r = c
            .request(pull_committing(group, topic, 0, 5))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert_eq!(decode_records(&r.body).len(), 5);
        commit(&c, group, topic, 5).await;
        assert_eq!(committed(&c, group, topic).await, 0);
        let r = c
            .request(pull_committing(group, topic, 5, 5))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_NOT_FOUND, "{:?}", r.remark);
        assert_eq!(committed(&c, group, topic).await, 0);

        // Past the re-delivered range the reset is done: commits count again.
        commit(&c, group, topic, 3).await;
        assert_eq!(committed(&c, group, topic).await, 3);
        let r = c
            .request(pull_committing(group, topic, 5, 5))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_NOT_FOUND, "{:?}", r.remark);
        assert_eq!(committed(&c, group, topic).await, 5);
    });
}
