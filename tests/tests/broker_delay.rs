//! Delay levels with `rocketmq-client-rust`: a level-2 message (5 s with the default
//! table) reaches its consumer no earlier than 5 s after it was sent and soon after;
//! delayed messages still pending when the broker is SIGKILLed are delivered after the
//! restart, and nothing delivered before the kill is delivered again.

#![recursion_limit = "256"]

#[path = "support/rust_client.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::metrics::{wait_delays_delivered, wait_dispatched};
use e2e::wait::{Lazy, eventually_ok};
use rocketmq_client_rust::{ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MQPushConsumer};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use support::{
    Cluster, assigned, body_of, eventually, msg, producer, prop, pull_all, pull_consumer,
    push_consumer, runtime, within,
};

/// Body, arrival time and DELAY property of each delivery.
type Arrivals = Arc<Mutex<Vec<(String, Instant, Option<String>)>>>;

fn delayed(topic: &str, body: &str, level: i32) -> Message {
    let mut m = msg(topic, "TagD", body.as_bytes());
    m.set_delay_time_level(level);
    m
}

#[test]
fn level_two_waits_five_seconds_with_the_default_table() {
    let cluster = Cluster::start(&[]);
    let namesrv = cluster.namesrv();
    let topic = "DelayDefault";
    let rt = runtime();
    rt.block_on(async {
        let mut producer = producer(&namesrv, "delay-producer").await;
        producer
            .send_with_timeout(msg(topic, "Boot", b"boot"), 5_000)
            .await
            .expect("bootstrap send");
        let arrived: Arrivals = Arc::default();
        let mut consumer = push_consumer(&namesrv, "delay-group", "delay-consumer", |b| b);
        consumer.subscribe(topic, "TagD").await.expect("subscribe");
        let sink = Arc::clone(&arrived);
        consumer.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                let mut sink = sink.lock().expect("arrived lock");
                for m in msgs {
                    sink.push((body_of(m), Instant::now(), prop(m, "DELAY")));
                }
                Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
            },
        );
        within("consumer start", Duration::from_secs(30), consumer.start())
            .await
            .expect("consumer start");
        // Pulling before anything is sent: the plain message is not held up by a rebalance.
        eventually(
            "the consumer to own the queues",
            Duration::from_secs(30),
            || assigned("delay-consumer", topic).len() == 4,
            || cluster.logs(),
        )
        .await;

        let sent_at = Instant::now();
        producer
            .send_with_timeout(delayed(topic, "later", 2), 5_000)
            .await
            .expect("send")
            .expect("send result");
        producer
            .send_with_timeout(msg(topic, "TagD", b"now"), 5_000)
            .await
            .expect("send")
            .expect("send result");
        eventually(
            "the delayed message",
            Duration::from_secs(15),
            || arrived.lock().expect("arrived lock").len() >= 2,
            || {
                format!(
                    "{:?}\n{}",
                    arrived.lock().expect("arrived lock"),
                    cluster.logs()
                )
            },
        )
        .await;
        let got = arrived.lock().expect("arrived lock").clone();
        assert_eq!(
            got[0].0, "now",
            "the plain message is not held back: {got:?}"
        );
        assert_eq!(got[1].0, "later");
        let waited = got[1].1.duration_since(sent_at);
        assert!(
            waited >= Duration::from_secs(5),
            "delivered after {waited:?}"
        );
        assert!(
            waited < Duration::from_secs(8),
            "delivered only after {waited:?}"
        );
        assert_eq!(got[1].2, None, "DELAY is cleared on the delivered copy");
        assert_eq!(got.len(), 2);

        let metrics = cluster.metrics().await;
        assert!(
            metrics.contains("rocketmq_delay_messages_delivered_total{level=\"2\"} 1"),
            "{metrics}"
        );
        assert!(
            metrics.contains("rocketmq_delay_messages_waiting{level=\"2\"} 0"),
            "{metrics}"
        );
        within(
            "consumer shutdown",
            Duration::from_secs(30),
            consumer.shutdown(),
        )
        .await;
        producer.shutdown().await;
    });
}

/// Level 1 (1 s) messages are delivered before the kill; level 3 (6 s) ones are still
/// parked. delayOffset.json is only written every 60 s here, so after the SIGKILL the
/// broker restarts with level 1's offset at 0 and must recognise what it had already
/// delivered.
#[test]
fn pending_delayed_messages_survive_sigkill_and_arrive_once() {
    let mut cluster = Cluster::start(&[
        ("messageDelayLevel", "1s 2s 6s 10s"),
        ("flushDelayOffsetInterval", "60000"),
    ]);
    let namesrv = cluster.namesrv();
    let topic = "DelayCrash";
    let rt = runtime();
    let count_bodies = |all: &[MessageExt]| -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for m in all {
            *counts.entry(body_of(m)).or_default() += 1;
        }
        counts
    };
    rt.block_on(async {
        let mut producer = producer(&namesrv, "crash-producer").await;
        for i in 0..10 {
            producer
                .send_with_timeout(delayed(topic, &format!("early-{i}"), 1), 5_000)
                .await
                .expect("send")
                .expect("send result");
        }
        let reader = pull_consumer(&namesrv, "crash-reader").await;
        eventually_ok(
            Duration::from_secs(5),
            "level 1 delivered before the kill",
            || async {
                let delivered = count_bodies(&pull_all(&reader, topic).await);
                if delivered.len() == 10 {
                    Ok(())
                } else {
                    Err(format!("{delivered:?}"))
                }
            },
        )
        .await;
        for i in 0..10 {
            producer
                .send_with_timeout(delayed(topic, &format!("late-{i}"), 3), 5_000)
                .await
                .expect("send")
                .expect("send result");
        }
        assert!(
            count_bodies(&pull_all(&reader, topic).await)
                .keys()
                .all(|b| b.starts_with("early-")),
            "level 3 still parked at the kill"
        );
        reader.shutdown().await.expect("reader shutdown");
        producer.shutdown().await;
    });

    cluster.broker.kill9();
    cluster.broker.restart();

    rt.block_on(async {
        let reader = pull_consumer(&namesrv, "crash-reader-2").await;
        let log = || cluster.logs();
        eventually_ok(
            Duration::from_secs(15),
            "all delivered after the restart",
            || async {
                let counts = count_bodies(&pull_all(&reader, topic).await);
                if counts.len() == 20 {
                    Ok(())
                } else {
                    Err(Lazy(move || format!("{counts:?}\n{}", log())))
                }
            },
        )
        .await;
        // A would-be duplicate is in the topic once every level has walked its whole
        // schedule queue and the broker has dispatched what that stored.
        let http_port = cluster.broker.http_port;
        wait_delays_delivered(http_port, Duration::from_secs(15)).await;
        wait_dispatched(http_port, Duration::from_secs(10)).await;
        let counts = count_bodies(&pull_all(&reader, topic).await);
        assert!(
            counts.values().all(|&n| n == 1),
            "every message exactly once: {counts:?}\n{}",
            cluster.logs()
        );
        reader.shutdown().await.expect("reader shutdown");
    });
}

/// Two delayed messages share a `UNIQ_KEY` (a producer re-sending one `Message`
/// object); the second is parked before the first is delivered. The broker is
/// SIGKILLed after the first delivery, before `delayOffset.json` caught up: after the
/// restart the second is still delivered (the first's copy names its own parked record,
/// not the key), and each arrives once.
#[test]
fn a_parked_message_sharing_a_delivered_ones_key_survives_sigkill() {
    use e2e::Client;
    use e2e::broker_harness::{properties, pull_queue, send_v2};
    use protocol::code::response;

    let mut cluster = Cluster::start(&[
        ("messageDelayLevel", "1s 4s"),
        ("flushDelayOffsetInterval", "60000"),
    ]);
    let topic = "DelaySameKey";
    let rt = runtime();
    let bodies = |port: u16| async move {
        let c = Client::connect(port).await.expect("connect");
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for p in pull_queue(&c, "delay-same-key", topic, 0).await {
            *counts
                .entry(String::from_utf8_lossy(&p.body).into_owned())
                .or_default() += 1;
        }
        c.close().await;
        counts
    };
    rt.block_on(async {
        let c = Client::connect(cluster.broker.port).await.expect("connect");
        for (body, level) in [("first", "1"), ("second", "2")] {
            let props = properties(&[("UNIQ_KEY", "SHAREDKEY01"), ("DELAY", level)]);
            let r = c
                .request(send_v2(topic, 0, body.as_bytes(), &props))
                .await
                .expect("send");
            assert_eq!(r.code, response::SUCCESS, "{body}: {:?}", r.remark);
        }
        c.close().await;
        let port = cluster.broker.port;
        eventually_ok(Duration::from_secs(10), "the first delivered", || async {
            let counts = bodies(port).await;
            if counts.contains_key("first") {
                Ok(())
            } else {
                Err(Lazy(move || format!("{counts:?}")))
            }
        })
        .await;
        assert!(
            !bodies(port).await.contains_key("second"),
            "the second was due 4 s after sending"
        );
    });
    cluster.broker.kill9();
    cluster.broker.restart();
    rt.block_on(async {
        let port = cluster.broker.port;
        eventually_ok(
            Duration::from_secs(20),
            "the second delivered after the restart",
            || async {
                let counts = bodies(port).await;
                if counts.get("second") == Some(&1) {
                    Ok(())
                } else {
                    Err(Lazy(move || format!("{counts:?}")))
                }
            },
        )
        .await;
        wait_delays_delivered(cluster.broker.http_port, Duration::from_secs(10)).await;
        wait_dispatched(cluster.broker.http_port, Duration::from_secs(10)).await;
        let counts = bodies(port).await;
        assert_eq!(counts.get("first"), Some(&1), "{counts:?}");
        assert_eq!(counts.get("second"), Some(&1), "{counts:?}");
    });
}
