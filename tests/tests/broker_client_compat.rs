//! Client-compatibility gaps found with real clients, reproduced with raw frames: the
//! C++ client 2.x sends a batch as SEND_MESSAGE with the V1 header and `batch="1"`. The
//! broker stores the batch's messages, each with its own keys and properties, and refuses
//! a body that is not a batch without storing anything.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, decode_records, properties, property, pull};
use e2e::metrics::wait_dispatched;
use e2e::wait::runtime;
use protocol::RemotingCommand;
use protocol::code::{request, response};
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
