//! SQL92 subscriptions with the third-party `rocketmq-client-rust` push consumer
//! (`MessageSelector::by_sql`) against real rmq-nameserver + rmq-broker processes: only
//! matching messages arrive, across a broker restart, and through `%RETRY%` with
//! `filterSupportRetry` (a redelivered matching message comes back; a retry message that
//! does not match the original subscription is filtered).

#![recursion_limit = "256"]

#[path = "support/rust_client.rs"]
mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::broker_harness::{properties, send_v2};
use e2e::metrics::{wait_delays_delivered, wait_dispatched};
use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MQPushConsumer, MessageSelector,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use support::{Cluster, body_of, eventually, producer, push_consumer, runtime, within};

const TOPIC: &str = "SqlRust";
const GROUP: &str = "sql-rust-group";
const SELECTOR: &str = "a > 5 AND color = 'red'";

fn message(body: &str, a: i32, color: &str) -> Message {
    Message::builder()
        .topic(TOPIC)
        .tags("t")
        .body_slice(body.as_bytes())
        .raw_property("a", a.to_string())
        .and_then(|b| b.raw_property("color", color))
        .expect("user properties")
        .build_unchecked()
}

type Seen = Arc<Mutex<Vec<String>>>;

/// A push consumer of [`GROUP`] with the SQL92 selector; the first delivery of
/// `bounce-*` bodies is answered RECONSUME_LATER.
async fn start_consumer(
    namesrv: &str,
    instance: &'static str,
    seen: &Seen,
) -> rocketmq_client_rust::DefaultMQPushConsumer {
    let mut c = push_consumer(namesrv, GROUP, instance, |b| b);
    c.subscribe_with_selector(TOPIC, Some(MessageSelector::by_sql(SELECTOR)))
        .await
        .expect("subscribe with SQL92");
    let sink = Arc::clone(seen);
    c.register_message_listener_concurrently(
        move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
            let mut sink = sink.lock().expect("seen lock");
            let mut status = ConsumeConcurrentlyStatus::ConsumeSuccess;
            for m in msgs {
                let body = body_of(m);
                if body.starts_with("bounce") && !sink.contains(&body) {
                    status = ConsumeConcurrentlyStatus::ReconsumeLater;
                }
                sink.push(body);
            }
            Ok(status)
        },
    );
    within("push consumer start", Duration::from_secs(30), c.start())
        .await
        .expect("push consumer start (CHECK_CLIENT_CONFIG accepts the selector)");
    c
}

fn delivered(seen: &Seen) -> Vec<String> {
    seen.lock().expect("seen lock").clone()
}

/// Waits until nothing is left for the group to receive, so that a message that should
/// not have been delivered would be in `seen` by now. A matching `end-<round>-<queue>`
/// message goes to each of the topic's queues (and into `want`): a parked SQL92 pull is
/// woken by a matching message only, so a queue ending in non-matching ones would be
/// read to its end only when the pull's hold runs out. Then: no retry waits in the
/// schedule queues, everything is dispatched, and the consumer has taken the topic and
/// its retry topic to the end.
async fn settled(cluster: &Cluster, round: &str, want: &mut BTreeSet<String>) {
    let raw = e2e::Client::connect(cluster.broker.port)
        .await
        .expect("connect");
    let props = properties(&[("a", "9"), ("color", "red")]);
    for queue in 0..4 {
        let body = format!("end-{round}-{queue}");
        let r = raw
            .request(send_v2(TOPIC, queue, body.as_bytes(), &props))
            .await
            .expect("end send");
        assert_eq!(r.code, 0, "{:?}", r.remark);
        want.insert(body);
    }
    raw.close().await;
    let http_port = cluster.broker.http_port;
    wait_delays_delivered(http_port, Duration::from_secs(30)).await;
    wait_dispatched(http_port, Duration::from_secs(10)).await;
    let retry = format!("%RETRY%{GROUP}");
    cluster
        .wait_consumed_to_the_end(GROUP, &[TOPIC, &retry])
        .await;
}

#[test]
fn sql92_push_consumer_gets_only_matching_messages_across_restart_and_retry() {
    let mut cluster = Cluster::start(&[
        ("enablePropertyFilter", "true"),
        ("filterSupportRetry", "true"),
    ]);
    let namesrv = cluster.namesrv();
    let rt = runtime();
    let seen: Seen = Arc::default();
    rt.block_on(async {
        let mut p = producer(&namesrv, "sql-rust-producer").await;
        p.send_with_timeout(message("boot", 0, "red"), 5_000)
            .await
            .expect("bootstrap send");
        let mut c = start_consumer(&namesrv, "sql-a", &seen).await;

        let mut want = BTreeSet::new();
        for i in 0..30 {
            let (a, color) = (i % 10, ["red", "blue"][i as usize % 2]);
            let body = format!("m{i}");
            if a > 5 && color == "red" {
                want.insert(body.clone());
            }
            p.send_with_timeout(message(&body, a, color), 5_000)
                .await
                .expect("send")
                .expect("send result");
        }
        // Matching, refused once by the listener: it comes back through %RETRY%.
        p.send_with_timeout(message("bounce-1", 9, "red"), 5_000)
            .await
            .expect("send")
            .expect("send result");
        want.insert("bounce-1".to_owned());

        // Straight into the group's retry topic: only the one that matches the original
        // subscription may be delivered (filterSupportRetry).
        let raw = e2e::Client::connect(cluster.broker.port)
            .await
            .expect("connect");
        let retry_topic = format!("%RETRY%{GROUP}");
        for (body, a) in [("retry-no", "1"), ("retry-yes", "8")] {
            let props = properties(&[("RETRY_TOPIC", TOPIC), ("a", a), ("color", "red")]);
            let r = raw
                .request(send_v2(&retry_topic, 0, body.as_bytes(), &props))
                .await
                .expect("retry send");
            assert_eq!(r.code, 0, "{:?}", r.remark);
        }
        want.insert("retry-yes".to_owned());

        eventually(
            "every matching message, and the bounced one twice",
            Duration::from_secs(60),
            || {
                let got = delivered(&seen);
                want.iter().all(|w| got.contains(w))
                    && got.iter().filter(|b| *b == "bounce-1").count() >= 2
            },
            || format!("{:?}\n{}", delivered(&seen), cluster.logs()),
        )
        .await;
        settled(&cluster, "before", &mut want).await;
        let got: BTreeSet<String> = delivered(&seen).into_iter().collect();
        assert_eq!(got, want, "only matching messages\n{}", cluster.logs());
        within("consumer shutdown", Duration::from_secs(30), c.shutdown()).await;
        p.shutdown().await;
    });

    assert!(cluster.broker.terminate().success());
    cluster.broker.restart();
    seen.lock().expect("seen lock").clear();

    rt.block_on(async {
        let mut p = producer(&namesrv, "sql-rust-producer-2").await;
        let mut c = start_consumer(&namesrv, "sql-b", &seen).await;
        let mut want = BTreeSet::new();
        for i in 0..12 {
            let (a, color) = (i, ["red", "red", "blue"][i as usize % 3]);
            let body = format!("after-{i}");
            if a > 5 && color == "red" {
                want.insert(body.clone());
            }
            p.send_with_timeout(message(&body, a, color), 5_000)
                .await
                .unwrap_or_else(|e| panic!("send after restart: {e:?}\n{}", cluster.logs()))
                .expect("send result");
        }
        eventually(
            "the matching messages after the restart",
            Duration::from_secs(60),
            || {
                let got = delivered(&seen);
                want.iter().all(|w| got.contains(w))
            },
            || format!("{:?}\n{}", delivered(&seen), cluster.logs()),
        )
        .await;
        settled(&cluster, "after", &mut want).await;
        let got: BTreeSet<String> = delivered(&seen).into_iter().collect();
        assert_eq!(
            got,
            want,
            "committed offsets honoured, only matches\n{}",
            cluster.logs()
        );
        within("consumer shutdown", Duration::from_secs(30), c.shutdown()).await;
        p.shutdown().await;
    });
}
