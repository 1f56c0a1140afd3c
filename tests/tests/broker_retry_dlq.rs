//! Retry and dead-letter delivery with `rocketmq-client-rust`: a push consumer that
//! fails a message gets it again through `%RETRY%<group>` (CONSUMER_SEND_MSG_BACK and the
//! schedule service), and a message that always fails ends in `%DLQ%<group>` after the
//! consumer's `maxReconsumeTimes`, where a pull consumer can read it.

#![recursion_limit = "256"]

#[path = "support/rust_client.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::metrics::{wait_delays_delivered, wait_dispatched};
use e2e::wait::eventually_ok;
use rocketmq_client_rust::{ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MQPushConsumer};
use rocketmq_model::common::message::message_ext::MessageExt;
use support::{
    Cluster, assigned, body_of, eventually, msg, producer, prop, pull_all, pull_consumer,
    push_consumer, runtime, within,
};

/// Every level 1 s: the retry levels (3 + reconsumeTimes) then take a second each.
const FAST_LEVELS: &str = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";

/// One delivery as the listener saw it.
#[derive(Debug, Clone)]
struct Seen {
    topic: String,
    reconsume_times: i32,
}

#[test]
fn failed_messages_are_retried_through_the_retry_topic_then_dead_lettered() {
    let cluster = Cluster::start(&[("messageDelayLevel", FAST_LEVELS)]);
    let namesrv = cluster.namesrv();
    let topic = "RetryTopic";
    let group = "retry-group";
    let rt = runtime();
    rt.block_on(async {
        let mut producer = producer(&namesrv, "retry-producer").await;
        producer
            .send_with_timeout(msg(topic, "Boot", b"boot"), 5_000)
            .await
            .expect("bootstrap send");

        let seen: Arc<Mutex<BTreeMap<String, Vec<Seen>>>> = Arc::default();
        let mut consumer = push_consumer(&namesrv, group, "retry-consumer", |b| {
            b.max_reconsume_times(2)
        });
        consumer.subscribe(topic, "TagR").await.expect("subscribe");
        let sink = Arc::clone(&seen);
        consumer.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                let mut sink = sink.lock().expect("seen lock");
                let mut status = ConsumeConcurrentlyStatus::ConsumeSuccess;
                for m in msgs {
                    let body = body_of(m);
                    let attempts = sink.entry(body.clone()).or_default();
                    attempts.push(Seen {
                        topic: m.topic().to_string(),
                        reconsume_times: m.reconsume_times(),
                    });
                    // "flaky" fails once; "poison" always.
                    if body == "poison" || (body == "flaky" && attempts.len() == 1) {
                        status = ConsumeConcurrentlyStatus::ReconsumeLater;
                    }
                }
                Ok(status)
            },
        );
        within("consumer start", Duration::from_secs(30), consumer.start())
            .await
            .expect("consumer start");
        eventually(
            "the consumer to own the queues",
            Duration::from_secs(30),
            || assigned("retry-consumer", topic).len() == 4,
            || cluster.logs(),
        )
        .await;
        for body in ["flaky", "poison", "fine"] {
            producer
                .send_with_timeout(msg(topic, "TagR", body.as_bytes()), 5_000)
                .await
                .expect("send")
                .expect("send result");
        }

        let state = || format!("{:?}\n{}", seen.lock().expect("seen lock"), cluster.logs());
        eventually(
            "the retry and the last poison attempt",
            Duration::from_secs(25),
            || {
                let s = seen.lock().expect("seen lock");
                s.get("flaky").is_some_and(|v| v.len() >= 2)
                    && s.get("poison").is_some_and(|v| v.len() >= 3)
            },
            state,
        )
        .await;
        {
            let s = seen.lock().expect("seen lock");
            let flaky = &s["flaky"];
            assert_eq!(flaky[0].reconsume_times, 0);
            assert!(flaky[1].reconsume_times >= 1, "{flaky:?}");
            // The client restores the original topic from RETRY_TOPIC.
            assert!(flaky.iter().all(|x| x.topic == topic), "{flaky:?}");
            assert_eq!(s["fine"].len(), 1);
            let poison: Vec<i32> = s["poison"].iter().map(|x| x.reconsume_times).collect();
            assert_eq!(poison[..3], [0, 1, 2], "{poison:?}");
        }

        // The poison message lands in the DLQ once, readable with a pull consumer.
        let reader = pull_consumer(&namesrv, "dlq-reader").await;
        let dlq = format!("%DLQ%{group}");
        let dead = eventually_ok(Duration::from_secs(10), &dlq, || async {
            let dead = pull_all(&reader, &dlq).await;
            if dead.is_empty() {
                Err("nothing")
            } else {
                Ok(dead)
            }
        })
        .await;
        assert_eq!(dead.len(), 1, "one message in {dlq}\n{}", cluster.logs());
        let m = &dead[0];
        assert_eq!(body_of(m), "poison");
        assert_eq!(m.reconsume_times(), 3);
        assert_eq!(prop(m, "RETRY_TOPIC").as_deref(), Some(topic));
        assert!(prop(m, "ORIGIN_MESSAGE_ID").is_some());
        assert_eq!(prop(m, "MAX_RECONSUME_TIMES").as_deref(), Some("2"));

        // The retry topic carried the retries (flaky once, poison twice).
        let retried = pull_all(&reader, &format!("%RETRY%{group}")).await;
        let mut bodies: Vec<String> = retried.iter().map(body_of).collect();
        bodies.sort();
        assert_eq!(bodies, ["flaky", "poison", "poison"]);

        // No more attempts after the DLQ: nothing waits in the schedule queues, and the
        // consumer has taken everything in its topics, so a further attempt would be seen.
        let http_port = cluster.broker.http_port;
        wait_delays_delivered(http_port, Duration::from_secs(15)).await;
        wait_dispatched(http_port, Duration::from_secs(10)).await;
        let retry = format!("%RETRY%{group}");
        cluster
            .wait_consumed_to_the_end(group, &[topic, &retry])
            .await;
        assert_eq!(seen.lock().expect("seen lock")["poison"].len(), 3);

        let metrics = cluster.metrics().await;
        assert!(
            metrics.contains(&format!(
                "rocketmq_dlq_messages_total{{group=\"{group}\"}} 1"
            )),
            "{metrics}"
        );
        assert!(
            metrics.contains(&format!(
                "rocketmq_retry_messages_total{{group=\"{group}\"}} 3"
            )),
            "{metrics}"
        );
        reader.shutdown().await.expect("reader shutdown");
        within(
            "consumer shutdown",
            Duration::from_secs(30),
            consumer.shutdown(),
        )
        .await;
        producer.shutdown().await;
    });
}
