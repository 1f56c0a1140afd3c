//! SEARCH_OFFSET_BY_TIMESTAMP over real TCP answers with RocketMQ 4.9's rule
//! (`ConsumeQueue.getOffsetInQueueByTime`): the message with exactly that store time, else
//! the closer neighbour in time, the first message before it and the LAST message (not
//! the max offset) after it.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, pull, send_v2, with_fields};
use e2e::wait::eventually_ok;
use protocol::code::{request, response};
use protocol::message::record::records;

const TOPIC: &str = "ByTime";

async fn search(c: &Client, queue: i32, timestamp: i64) -> i64 {
    let r = c
        .request(with_fields(
            request::SEARCH_OFFSET_BY_TIMESTAMP,
            &[
                ("topic", TOPIC.to_owned()),
                ("queueId", queue.to_string()),
                ("timestamp", timestamp.to_string()),
            ],
        ))
        .await
        .expect("search");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    r.ext_fields
        .get("offset")
        .and_then(|v| v.parse().ok())
        .expect("offset field")
}

/// Store timestamps of the queue's messages, by pulling until all `count` are indexed.
async fn store_times(c: &Client, count: usize) -> Vec<i64> {
    let what = format!("{count} messages pullable");
    eventually_ok(Duration::from_secs(5), &what, || async {
        let r = c
            .request(pull("ByTimeGroup", TOPIC, 0, 0, 32, None, "*"))
            .await
            .expect("pull");
        let times: Vec<i64> = if r.code == response::SUCCESS {
            records(&r.body, true)
                .map(|v| v.expect("well-formed record").store_timestamp())
                .collect()
        } else {
            Vec::new()
        };
        if times.len() == count {
            Ok(times)
        } else {
            Err(format!("{times:?}"))
        }
    })
    .await
}

#[test]
fn search_offset_by_timestamp_uses_the_4_9_rule() {
    let b = TempBroker::start(None, &[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        for i in 0..3 {
            let r = c
                .request(send_v2(TOPIC, 0, format!("m{i}").as_bytes(), ""))
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
            // Time itself: store times at least 40 ms apart, so "closer" is unambiguous.
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        let t = store_times(&c, 3).await;
        assert!(t[0] + 40 <= t[1] && t[1] + 40 <= t[2], "{t:?}");

        assert_eq!(search(&c, 0, t[1]).await, 1, "exact store time");
        assert_eq!(search(&c, 0, t[0] + 5).await, 0, "closer to the older one");
        assert_eq!(search(&c, 0, t[2] - 5).await, 2, "closer to the newer one");
        assert_eq!(search(&c, 0, t[0] - 60_000).await, 0, "before the first");
        // After the last message RocketMQ 4.9 answers the last message's offset (2),
        // not the max offset (3) that RocketMQ 5 answers.
        assert_eq!(search(&c, 0, t[2] + 60_000).await, 2, "after the last");
        assert_eq!(search(&c, 3, t[1]).await, 0, "a queue without messages");
    });
}
