//! Broadcast and orderly consumption end to end with `rocketmq-client-rust`: every
//! instance of a broadcast group receives every message; an orderly group keeps each
//! key's order while a second consumer joins mid-stream and leaves again (the broker's
//! LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bookkeeping decides who may consume a queue).

#![recursion_limit = "256"]

#[path = "support/rust_client.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, DefaultMQPushConsumer, MQPushConsumer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;
use support::{
    Cluster, assigned, body_of, eventually, msg, producer, push_consumer, runtime, within,
};

/// The client's rebalance and lock-renewal periods (its equivalents of RocketMQ's
/// `rocketmq.client.rebalance.*` system properties) shortened from 20 s to 1 s, so a
/// joining orderly consumer whose first LOCK_BATCH_MQ loses the race with the previous
/// owner's unlock retries within the test's time budget.
fn fast_rebalance() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for key in [
            "rocketmq.client.rebalance.waitInterval",
            "rocketmq.client.rebalance.lockInterval",
            "rocketmq.client.unlockDelayTimeMills",
        ] {
            // SAFETY: every test of this binary calls this before it creates any client,
            // and `Once` makes the others wait until it returns, so nothing reads the
            // environment concurrently.
            unsafe { std::env::set_var(key, "1000") };
        }
    });
}

/// Broadcast consumers keep their offsets in local files named after the group; a
/// group unique to this run cannot pick up a previous run's offsets.
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

#[test]
fn every_broadcast_instance_receives_every_message() {
    fast_rebalance();
    let cluster = Cluster::start(&[]);
    let namesrv = cluster.namesrv();
    let topic = "BroadcastTopic";
    let group = unique("broadcast-group");
    let rt = runtime();
    rt.block_on(async {
        let mut producer = producer(&namesrv, "broadcast-producer").await;
        producer
            .send_with_timeout(msg(topic, "Boot", b"boot"), 5_000)
            .await
            .expect("bootstrap send");
        let seen: Arc<Mutex<BTreeMap<&'static str, BTreeSet<String>>>> = Arc::default();
        let mut consumers = Vec::new();
        for instance in ["broadcast-a", "broadcast-b"] {
            let mut c = push_consumer(&namesrv, &group, instance, |b| {
                b.message_model(MessageModel::Broadcasting)
            });
            c.subscribe(topic, "TagB").await.expect("subscribe");
            let sink = Arc::clone(&seen);
            c.register_message_listener_concurrently(
                move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                    let mut sink = sink.lock().expect("seen lock");
                    for m in msgs {
                        sink.entry(instance).or_default().insert(body_of(m));
                    }
                    Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
                },
            );
            within("consumer start", Duration::from_secs(30), c.start())
                .await
                .expect("consumer start");
            consumers.push(c);
        }
        // A broadcast instance is assigned every queue.
        eventually(
            "both instances to own every queue",
            Duration::from_secs(30),
            || ["broadcast-a", "broadcast-b"].map(|i| assigned(i, topic).len()) == [4, 4],
            || cluster.logs(),
        )
        .await;
        let want: BTreeSet<String> = (0..24).map(|i| format!("b{i}")).collect();
        for body in &want {
            producer
                .send_with_timeout(msg(topic, "TagB", body.as_bytes()), 5_000)
                .await
                .expect("send")
                .expect("send result");
        }
        eventually(
            "both instances to see everything",
            Duration::from_secs(20),
            || {
                let s = seen.lock().expect("seen lock");
                s.len() == 2 && s.values().all(|got| got.is_superset(&want))
            },
            || format!("{:?}\n{}", seen.lock().expect("seen lock"), cluster.logs()),
        )
        .await;
        for got in seen.lock().expect("seen lock").values() {
            assert_eq!(got, &want, "only the subscribed tag");
        }
        for mut c in consumers {
            within("consumer shutdown", Duration::from_secs(30), c.shutdown()).await;
        }
        producer.shutdown().await;
    });
}

/// `(key, seq, consumer)` of every delivery, in the order the listeners ran.
type DeliveryLog = Arc<Mutex<Vec<(String, u32, &'static str)>>>;

const KEYS: usize = 4;
const PER_KEY: u32 = 40;

/// One orderly consumer of the group; every delivery goes to the shared `log` in the
/// order the listeners ran.
async fn orderly_member(
    namesrv: &str,
    group: &str,
    instance: &'static str,
    topic: &str,
    log: &DeliveryLog,
) -> DefaultMQPushConsumer {
    let mut c = push_consumer(namesrv, group, instance, |b| b);
    c.subscribe(topic, "TagO").await.expect("subscribe");
    let sink = Arc::clone(log);
    c.register_message_listener_orderly(
        move |msgs: &[&MessageExt], ctx: &mut ConsumeOrderlyContext| {
            ctx.set_auto_commit(true);
            for m in msgs {
                let body = body_of(m);
                if let Some((key, seq)) = body.split_once('#')
                    && let Ok(seq) = seq.parse()
                {
                    sink.lock()
                        .expect("log lock")
                        .push((key.to_owned(), seq, instance));
                }
            }
            // Consuming takes time (what is tested is a handover mid-stream): slow enough
            // that a queue is mid-stream whenever ownership changes.
            std::thread::sleep(Duration::from_millis(5));
            Ok(ConsumeOrderlyStatus::Success)
        },
    );
    within("orderly consumer start", Duration::from_secs(30), c.start())
        .await
        .expect("start");
    c
}

#[test]
fn per_key_order_holds_while_a_consumer_joins_and_leaves() {
    fast_rebalance();
    let cluster = Cluster::start(&[]);
    let namesrv = cluster.namesrv();
    let topic = "OrderedHandover";
    let group = "ordered-group";
    let rt = runtime();
    rt.block_on(async {
        let mut producer = producer(&namesrv, "ordered-producer").await;
        producer
            .send_with_timeout(msg(topic, "Boot", b"boot"), 5_000)
            .await
            .expect("bootstrap send");
        let log: DeliveryLog = Arc::default();
        let mut first = orderly_member(&namesrv, group, "ordered-a", topic, &log).await;
        eventually(
            "the first consumer to own every queue",
            Duration::from_secs(30),
            || assigned("ordered-a", topic).len() == 4,
            || cluster.logs(),
        )
        .await;

        let mut second = None;
        for seq in 0..PER_KEY {
            for key in 0..KEYS {
                let selector = |queues: &[MessageQueue], _m: &Message, id: &usize| {
                    queues.get(*id % queues.len()).cloned()
                };
                producer
                    .send_with_selector_timeout(
                        msg(topic, "TagO", format!("key{key}#{seq}").as_bytes()),
                        selector,
                        key,
                        5_000,
                    )
                    .await
                    .expect("send")
                    .expect("send result");
            }
            // The stream is spread over time (what is tested is a join and a leave in
            // the middle of it), not sent before the second consumer can start.
            tokio::time::sleep(Duration::from_millis(50)).await;
            if seq == PER_KEY / 4 {
                second = Some(orderly_member(&namesrv, group, "ordered-b", topic, &log).await);
            }
            if seq == PER_KEY * 3 / 4
                && let Some(mut c) = second.take()
            {
                eventually(
                    "the joining consumer to own a queue",
                    Duration::from_secs(10),
                    || {
                        log.lock()
                            .expect("log lock")
                            .iter()
                            .any(|e| e.2 == "ordered-b")
                    },
                    || cluster.logs(),
                )
                .await;
                within(
                    "second consumer shutdown",
                    Duration::from_secs(30),
                    c.shutdown(),
                )
                .await;
            }
        }

        let complete = |log: &[(String, u32, &'static str)]| {
            let mut per_key: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
            for (key, seq, _) in log {
                per_key.entry(key).or_default().insert(*seq);
            }
            per_key.len() == KEYS && per_key.values().all(|s| s.len() == PER_KEY as usize)
        };
        eventually(
            "every key consumed to the end",
            Duration::from_secs(25),
            || complete(&log.lock().expect("log lock")),
            || format!("{:?}\n{}", log.lock().expect("log lock"), cluster.logs()),
        )
        .await;

        let log = log.lock().expect("log lock").clone();
        // A queue changing hands may replay what was consumed but not yet committed;
        // what must never happen is a message seen before an earlier one of its key.
        let mut next: BTreeMap<&str, u32> = BTreeMap::new();
        for (key, seq, who) in &log {
            let expected = next.entry(key).or_insert(0);
            assert!(
                *seq <= *expected,
                "{key}: {seq} consumed by {who} before {expected}\n{log:?}"
            );
            if *seq == *expected {
                *expected += 1;
            }
        }
        // Queues change hands only when the member set changes (join, leave): a key
        // whose deliveries alternate between consumers was consumed by two at once.
        for key in 0..KEYS {
            let key = format!("key{key}");
            let owners: Vec<&str> = log
                .iter()
                .filter(|(k, _, _)| *k == key)
                .map(|(_, _, who)| *who)
                .collect();
            let changes = owners.windows(2).filter(|w| w[0] != w[1]).count();
            assert!(
                changes <= 2,
                "{key} changed hands {changes} times: {owners:?}"
            );
        }
        let consumers: BTreeSet<&str> = log.iter().map(|(_, _, who)| *who).collect();
        assert!(
            consumers.contains("ordered-b"),
            "the joining consumer took part: {log:?}"
        );
        within(
            "first consumer shutdown",
            Duration::from_secs(30),
            first.shutdown(),
        )
        .await;
        producer.shutdown().await;
    });
}

fn heartbeat(client_id: &str, group: &str) -> protocol::RemotingCommand {
    use protocol::body::{
        ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel,
    };
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.to_owned(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            subscription_data_set: Vec::new(),
            unit_mode: false,
        }],
    };
    protocol::RemotingCommand::bare_request(protocol::code::request::HEART_BEAT)
        .with_body(protocol::body::encode(&data))
}

fn lock(client_id: &str, group: &str, queues: &[i32]) -> protocol::RemotingCommand {
    use protocol::body::{LockBatchRequestBody, MessageQueue};
    let body = LockBatchRequestBody {
        consumer_group: group.to_owned(),
        client_id: client_id.to_owned(),
        only_this_broker: false,
        mq_set: queues
            .iter()
            .map(|&queue_id| MessageQueue {
                topic: "LockTopic".into(),
                broker_name: "broker-e2e".into(),
                queue_id,
            })
            .collect(),
    };
    protocol::RemotingCommand::bare_request(protocol::code::request::LOCK_BATCH_MQ)
        .with_body(protocol::body::encode(&body))
}

/// Queue ids the LOCK_BATCH_MQ answer grants.
async fn granted(client: &e2e::Client, request: protocol::RemotingCommand) -> Vec<i32> {
    let out = client.request(request).await.expect("lock request");
    assert_eq!(out.code, protocol::code::response::SUCCESS);
    let body: protocol::body::LockBatchResponseBody =
        protocol::body::decode(&out.body).expect("lock body");
    body.lock_ok_mq_set.iter().map(|q| q.queue_id).collect()
}

/// The broker side of orderly rebalancing over real connections: a queue locked by one
/// consumer is refused to another, and freed at once when the holder's connection
/// drops (a crashed client) or it unregisters, instead of after the 60 s expiry.
#[test]
fn queue_locks_follow_their_holders_connection() {
    let cluster = Cluster::start(&[]);
    let group = "lock-group";
    let rt = runtime();
    rt.block_on(async {
        let port = cluster.broker.port;
        let a = e2e::Client::connect(port).await.expect("connect a");
        let b = e2e::Client::connect(port).await.expect("connect b");
        // Only queues that exist can be locked.
        let create = e2e::broker_harness::with_fields(
            protocol::code::request::UPDATE_AND_CREATE_TOPIC,
            &[
                ("topic", "LockTopic".to_owned()),
                ("defaultTopic", "TBW102".to_owned()),
                ("readQueueNums", "4".to_owned()),
                ("writeQueueNums", "4".to_owned()),
                ("perm", "6".to_owned()),
                ("topicFilterType", "SINGLE_TAG".to_owned()),
                ("order", "false".to_owned()),
            ],
        );
        let out = a.request(create).await.expect("create topic");
        assert_eq!(
            out.code,
            protocol::code::response::SUCCESS,
            "{:?}",
            out.remark
        );
        for (client, id) in [(&a, "10.0.0.1@a"), (&b, "10.0.0.2@b")] {
            let out = client
                .request(heartbeat(id, group))
                .await
                .expect("heartbeat");
            assert_eq!(out.code, protocol::code::response::SUCCESS);
        }
        assert_eq!(
            granted(&a, lock("10.0.0.1@a", group, &[0, 1])).await,
            [0, 1]
        );
        assert_eq!(granted(&b, lock("10.0.0.2@b", group, &[1, 2])).await, [2]);
        // The holder renews; the other is still refused.
        assert_eq!(
            granted(&a, lock("10.0.0.1@a", group, &[0, 1])).await,
            [0, 1]
        );
        assert!(
            granted(&b, lock("10.0.0.2@b", group, &[0]))
                .await
                .is_empty()
        );

        // A crash: the connection goes away without UNLOCK_BATCH_MQ.
        a.close().await;
        let cluster = &cluster;
        let got = e2e::wait::eventually_ok(
            Duration::from_secs(5),
            "the crashed holder's locks to go",
            || async {
                let got = granted(&b, lock("10.0.0.2@b", group, &[0, 1, 2])).await;
                if got.len() == 3 {
                    Ok(got)
                } else {
                    Err(e2e::wait::Lazy(move || {
                        format!("{got:?}\n{}", cluster.logs())
                    }))
                }
            },
        )
        .await;
        assert_eq!(got, [0, 1, 2]);

        // UNREGISTER_CLIENT releases too.
        let c = e2e::Client::connect(port).await.expect("connect c");
        c.request(heartbeat("10.0.0.3@c", group))
            .await
            .expect("heartbeat");
        let unregister = e2e::broker_harness::with_fields(
            protocol::code::request::UNREGISTER_CLIENT,
            &[
                ("clientID", "10.0.0.2@b".to_owned()),
                ("consumerGroup", group.to_owned()),
            ],
        );
        let out = b.request(unregister).await.expect("unregister");
        assert_eq!(out.code, protocol::code::response::SUCCESS);
        assert_eq!(
            granted(&c, lock("10.0.0.3@c", group, &[0, 1, 2])).await,
            [0, 1, 2]
        );
        b.close().await;
        c.close().await;
    });
}
