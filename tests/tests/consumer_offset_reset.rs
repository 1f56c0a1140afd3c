//! Offset reset and skip with `rocketmq-client-rust` consumers, driven
//! by `rmqctl consumer reset` (INVOKE_BROKER_TO_RESET_OFFSET):
//!
//! - a connected push consumer group rewinds to a store time: the broker tells it with
//!   RESET_CONSUMER_CLIENT_OFFSET and it re-reads exactly the messages stored after
//!   that time, none before;
//! - `consumer status` reads the offsets from the client (GET_CONSUMER_STATUS_FROM_CLIENT);
//! - an offline group skips its backlog (`--to-latest`): the stored offsets move to the
//!   end, so the group's next consumer gets only what is sent afterwards.

#![recursion_limit = "256"]

#[path = "support/rust_client.rs"]
mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::cli::{CliOutput, rmqctl_json};
use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQProducer,
    DefaultMQPushConsumer, MQPushConsumer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use support::{Cluster, body_of, eventually, msg, producer, push_consumer, runtime, within};

const TOPIC: &str = "ResetTopic";
const GROUP: &str = "reset-group";
const BATCH: usize = 12;

type Seen = Arc<Mutex<Vec<String>>>;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

async fn start_consumer(
    namesrv: &str,
    instance: &'static str,
    seen: &Seen,
) -> DefaultMQPushConsumer {
    let mut consumer = push_consumer(namesrv, GROUP, instance, |b| b);
    consumer.subscribe(TOPIC, "*").await.expect("subscribe");
    let sink = Arc::clone(seen);
    consumer.register_message_listener_concurrently(
        move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
            let mut sink = sink.lock().expect("seen lock");
            sink.extend(msgs.iter().map(|m| body_of(m)));
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    within("consumer start", Duration::from_secs(30), consumer.start())
        .await
        .expect("consumer start");
    consumer
}

fn distinct(seen: &Seen, prefix: &str) -> BTreeSet<String> {
    seen.lock()
        .expect("seen lock")
        .iter()
        .filter(|b| b.starts_with(prefix))
        .cloned()
        .collect()
}

fn batch(prefix: &str) -> BTreeSet<String> {
    (0..BATCH).map(|i| format!("{prefix}-{i:02}")).collect()
}

async fn send(producer: &mut DefaultMQProducer, prefix: &str) {
    for body in batch(prefix) {
        producer
            .send_with_timeout(msg(TOPIC, "T", body.as_bytes()), 5_000)
            .await
            .expect("send")
            .expect("send result");
    }
}

fn ctl(ns_port: u16, args: &[&str]) -> CliOutput {
    rmqctl_json(ns_port, args)
}

/// True once the brokers' committed offsets of the group cover every message.
fn fully_committed(ns_port: u16) -> bool {
    let out = ctl(ns_port, &["consumer", "progress", "-g", GROUP, "-t", TOPIC]);
    out.code == 0 && {
        let j = out.json();
        j["totalLag"] == 0 && j["queues"].as_array().is_some_and(|q| !q.is_empty())
    }
}

#[test]
fn a_group_rewinds_to_a_time_and_skips_to_the_end() {
    let cluster = Cluster::start(&[]);
    let namesrv = cluster.namesrv();
    let ns_port = cluster.ns.port;
    let rt = runtime();
    rt.block_on(async {
        let mut producer = producer(&namesrv, "reset-producer").await;
        send(&mut producer, "a").await;
        let seen: Seen = Arc::default();
        let mut consumer = start_consumer(&namesrv, "reset-consumer-1", &seen).await;
        let state = || format!("{:?}\n{}", seen.lock().expect("seen lock"), cluster.logs());
        eventually(
            "batch a consumed",
            Duration::from_secs(30),
            || distinct(&seen, "a-") == batch("a"),
            state,
        )
        .await;

        // T lies between the batches, nearer to b (4.9's time lookup picks the nearest
        // stored message): the store timestamps themselves are what the reset looks up.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let t = now_ms();
        // Time itself again: b's store times must come after T.
        tokio::time::sleep(Duration::from_millis(100)).await;
        send(&mut producer, "b").await;
        eventually(
            "batch b consumed",
            Duration::from_secs(30),
            || distinct(&seen, "b-") == batch("b"),
            state,
        )
        .await;
        eventually(
            "offsets committed",
            Duration::from_secs(30),
            || fully_committed(ns_port),
            state,
        )
        .await;

        // The client's own view of its offsets, through the broker.
        let status = ctl(ns_port, &["consumer", "status", "-g", GROUP, "-t", TOPIC])
            .ok()
            .json();
        let clients = status["clients"].as_object().expect("clients");
        assert_eq!(clients.len(), 1, "{status}");
        let total: i64 = clients
            .values()
            .flat_map(|qs| qs.as_array().cloned().unwrap_or_default())
            .map(|q| q["offset"].as_i64().unwrap_or(0))
            .sum();
        assert_eq!(total as usize, 2 * BATCH, "{status}");

        // Rewind to T while the consumer runs: it re-reads b, and only b.
        seen.lock().expect("seen lock").clear();
        let t_text = t.to_string();
        let reset = ctl(
            ns_port,
            &[
                "consumer",
                "reset",
                "-g",
                GROUP,
                "-t",
                TOPIC,
                "--to-time",
                &t_text,
            ],
        )
        .ok()
        .json();
        let offsets: i64 = reset["offsets"]
            .as_array()
            .expect("offsets")
            .iter()
            .map(|q| q["offset"].as_i64().unwrap_or(0))
            .sum();
        assert_eq!(
            offsets as usize, BATCH,
            "the reset table points at b: {reset}"
        );
        eventually(
            "batch b re-read after the reset",
            Duration::from_secs(60),
            || distinct(&seen, "b-") == batch("b"),
            state,
        )
        .await;
        // Committed to the end again: everything the rewound consumer pulled has been
        // through its listener, so a message stored before T would be seen.
        eventually(
            "offsets committed after the rewind",
            Duration::from_secs(30),
            || fully_committed(ns_port),
            state,
        )
        .await;
        assert!(
            distinct(&seen, "a-").is_empty(),
            "messages stored before T came back: {}",
            state()
        );

        // Skip while offline: the stored offsets move to the end.
        within(
            "consumer shutdown",
            Duration::from_secs(30),
            consumer.shutdown(),
        )
        .await;
        send(&mut producer, "c").await;
        let backlog = ctl(ns_port, &["consumer", "progress", "-g", GROUP, "-t", TOPIC])
            .ok()
            .json();
        assert_eq!(backlog["totalLag"], BATCH as i64, "{backlog}");
        let skipped = ctl(
            ns_port,
            &["consumer", "reset", "-g", GROUP, "-t", TOPIC, "--to-latest"],
        )
        .ok()
        .json();
        assert_eq!(skipped["timestamp"], -1);
        let after = ctl(ns_port, &["consumer", "progress", "-g", GROUP, "-t", TOPIC])
            .ok()
            .json();
        assert_eq!(after["totalLag"], 0, "{after}");

        seen.lock().expect("seen lock").clear();
        let mut consumer = start_consumer(&namesrv, "reset-consumer-2", &seen).await;
        send(&mut producer, "d").await;
        eventually(
            "batch d consumed by the group's next consumer",
            Duration::from_secs(30),
            || distinct(&seen, "d-") == batch("d"),
            state,
        )
        .await;
        // Everything the new consumer pulled has been through its listener.
        cluster.wait_consumed_to_the_end(GROUP, &[TOPIC]).await;
        assert!(
            distinct(&seen, "c-").is_empty(),
            "the skipped backlog was delivered: {}",
            state()
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

#[test]
fn reset_of_an_unknown_group_or_topic_is_refused() {
    let cluster = Cluster::start(&[]);
    let ns_port = cluster.ns.port;
    let rt = runtime();
    rt.block_on(async {
        let mut producer = producer(&cluster.namesrv(), "reset-producer-2").await;
        producer
            .send_with_timeout(msg(TOPIC, "T", b"x"), 5_000)
            .await
            .expect("send")
            .expect("send result");
        producer.shutdown().await;
    });
    let out = ctl(
        ns_port,
        &[
            "consumer",
            "reset",
            "-g",
            "nobody",
            "-t",
            TOPIC,
            "--to-latest",
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("not exist"), "{out:?}");
    let out = ctl(ns_port, &["consumer", "reset", "-g", GROUP, "-t", TOPIC]);
    assert_eq!(out.code, 2, "a reset target is required: {out:?}");
}
