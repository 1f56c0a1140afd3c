//! The third-party `rocketmq-client-rust` producer and consumers against our real
//! `rmq-nameserver` + `rmq-broker` processes: every send flavour, pull and push
//! consumption (clustering, tag filter, orderly with queue locks), message content
//! fidelity, query by key / view by id, and committed offsets across a broker restart.

#![recursion_limit = "256"]

#[path = "support/rust_client.rs"]
mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use e2e::metrics::wait_dispatched;
use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, MQPushConsumer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::result::SendStatus;
use support::{
    Cluster, assigned, body_bytes, body_of, client_runtime, eventually, msg, producer, prop,
    push_consumer, runtime, shared_out, within,
};

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Sync, async-callback, oneway, batch and selector sends; a classic pull consumer
/// reads everything back with content intact; query by key and view by id find a
/// message.
#[test]
#[allow(deprecated)]
fn producer_flavours_pull_consumer_and_lookups() {
    let cluster = Cluster::start(&[]);
    let namesrv = cluster.namesrv();
    let topic = "RustClientProduce";
    let rt = runtime();
    let expected = rt.block_on(async {
        let producer = producer(&namesrv, "rc-producer").await;

        // Sync send with keys, tags and a user property.
        let keyed = Message::builder()
            .topic(topic)
            .tags("TagK")
            .key("order-42")
            .body_slice(b"keyed message")
            .raw_property("color", "blue")
            .expect("user property")
            .build_unchecked();
        let sent = producer
            .send_with_timeout(keyed, 5_000)
            .await
            .unwrap_or_else(|e| panic!("sync send: {e:?}\n{}", cluster.logs()))
            .expect("send result");
        assert_eq!(sent.send_status, SendStatus::SendOk);
        let uniq_id = sent.msg_id.clone().expect("msg id").to_string();
        let offset_id = sent.offset_msg_id.clone().expect("offset msg id");

        // A 1 MiB body and a body holding every byte value.
        let big: Vec<u8> = (0..1024 * 1024).map(|i| (i * 31 % 251) as u8).collect();
        let binary: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for body in [&big, &binary] {
            let r = producer
                .send_with_timeout(msg(topic, "TagBin", body), 10_000)
                .await
                .expect("send large/binary")
                .expect("send result");
            assert_eq!(r.send_status, SendStatus::SendOk);
        }

        // Async send with a callback.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = Mutex::new(Some(tx));
        producer
            .send_with_callback_timeout(
                msg(topic, "TagAsync", b"async message"),
                move |result, error| {
                    let outcome = match (result, error) {
                        (Some(r), None) => Ok(r.send_status),
                        (_, e) => Err(format!("{e:?}")),
                    };
                    if let Some(tx) = tx.lock().expect("callback lock").take() {
                        let _ = tx.send(outcome);
                    }
                },
                5_000,
            )
            .await
            .expect("async send accepted");
        let status = within("async send callback", Duration::from_secs(10), rx)
            .await
            .expect("callback ran");
        assert_eq!(status, Ok(SendStatus::SendOk));

        producer
            .send_oneway(msg(topic, "TagOneway", b"oneway message"))
            .await
            .expect("oneway send");

        let batch = producer
            .send_batch(vec![
                msg(topic, "TagBatch", b"batch-0"),
                msg(topic, "TagBatch", b"batch-1"),
                msg(topic, "TagBatch", b"batch-2"),
            ])
            .await
            .expect("batch send");
        assert_eq!(batch.send_status, SendStatus::SendOk);

        // Orderly producer: every message to the queue chosen by the order id.
        for i in 0..6 {
            let selector = |queues: &[MessageQueue], _m: &Message, id: &i32| {
                queues.get(*id as usize % queues.len()).cloned()
            };
            let r = producer
                .send_with_selector_timeout(
                    msg(topic, "TagOrder", format!("order-{i}").as_bytes()),
                    selector,
                    1,
                    5_000,
                )
                .await
                .expect("selector send")
                .expect("send result");
            assert_eq!(r.message_queue.as_ref().map(|q| q.queue_id()), Some(1));
        }

        // Lookups: query by key (through the index, once dispatch has built it) and view
        // by offset msgId.
        wait_dispatched(cluster.broker.http_port, Duration::from_secs(10)).await;
        let mut admin = producer;
        let result = admin
            .query_message(topic, "order-42", 32, 0, now_millis() + 60_000)
            .await
            .unwrap_or_else(|e| panic!("query by key: {e:?}\n{}", cluster.logs()));
        assert!(
            result
                .message_list()
                .iter()
                .any(|m| body_bytes(m) == b"keyed message"),
            "query by key found the message\n{}",
            cluster.logs()
        );
        let viewed = admin
            .view_message(topic, &offset_id)
            .await
            .unwrap_or_else(|e| panic!("view by offset id: {e:?}\n{}", cluster.logs()));
        assert_eq!(body_bytes(&viewed), b"keyed message");
        assert_eq!(prop(&viewed, "UNIQ_KEY").as_deref(), Some(uniq_id.as_str()));

        admin.shutdown().await;

        let mut expected: Vec<(String, Vec<u8>)> = vec![
            ("TagK".into(), b"keyed message".to_vec()),
            ("TagBin".into(), big),
            ("TagBin".into(), binary),
            ("TagAsync".into(), b"async message".to_vec()),
            ("TagOneway".into(), b"oneway message".to_vec()),
        ];
        for i in 0..3 {
            expected.push(("TagBatch".into(), format!("batch-{i}").into_bytes()));
        }
        for i in 0..6 {
            expected.push(("TagOrder".into(), format!("order-{i}").into_bytes()));
        }
        expected
    });

    // Pull everything back, commit offsets, and check content and per-queue order.
    let group = "rc-pull-group";
    rt.block_on(async {
        let consumer = rocketmq_client_rust::DefaultMQPullConsumer::builder(client_runtime("pull"))
            .consumer_group(group.to_owned())
            .name_server_addr(namesrv.clone())
            .consumer_pull_timeout(Duration::from_secs(5))
            .build()
            .expect("pull consumer");
        consumer.start().await.expect("pull consumer start");
        let queues = consumer
            .fetch_subscribe_message_queues(topic)
            .await
            .expect("subscribe queues");
        assert_eq!(queues.len(), 4);
        let mut got: Vec<(String, Vec<u8>)> = Vec::new();
        let mut order_queue = Vec::new();
        let mut keyed_props = None;
        for q in &queues {
            let min = consumer.min_offset(q).await.expect("min offset");
            let max = consumer.max_offset(q).await.expect("max offset");
            let mut offset = min;
            while offset < max {
                let result = consumer.pull(q, "*", offset, 32).await.expect("pull");
                let next = result.next_begin_offset() as i64;
                assert!(
                    next > offset,
                    "pull made progress on queue {}",
                    q.queue_id()
                );
                for m in result.msg_found_list().unwrap_or_default() {
                    let tag = m.get_tags().map(|t| t.to_string()).unwrap_or_default();
                    if tag == "TagOrder" {
                        order_queue.push(body_of(m));
                    }
                    if tag == "TagK" {
                        keyed_props = Some((prop(m, "KEYS"), prop(m, "color")));
                    }
                    got.push((tag, body_bytes(m)));
                }
                offset = next;
            }
            consumer
                .update_consume_offset(q, max)
                .await
                .expect("update offset");
            assert_eq!(
                consumer.fetch_consume_offset(q, false).await.ok(),
                Some(max)
            );
        }
        consumer.shutdown().await.expect("pull consumer shutdown");

        let sort = |v: &mut Vec<(String, Vec<u8>)>| v.sort();
        let mut want = expected.clone();
        sort(&mut got);
        sort(&mut want);
        assert_eq!(got.len(), want.len(), "every sent message pulled once");
        assert!(got == want, "pulled content differs from what was sent");
        assert_eq!(
            order_queue,
            (0..6).map(|i| format!("order-{i}")).collect::<Vec<_>>(),
            "one queue keeps send order"
        );
        assert_eq!(
            keyed_props,
            Some((Some("order-42".to_owned()), Some("blue".to_owned())))
        );
    });
}

/// Two push consumers of one group share the topic's queues and both see only the
/// tags they subscribed to; after a clean broker restart, a later consumer of the
/// same group resumes from the committed offsets instead of re-reading.
#[test]
fn push_consumers_share_queues_filter_tags_and_resume_after_broker_restart() {
    let mut cluster = Cluster::start(&[]);
    let namesrv = cluster.namesrv();
    let topic = "RustClientPush";
    let group = "rc-push-group";
    let rt = runtime();
    rt.block_on(async {
        let mut producer = producer(&namesrv, "rc-push-producer").await;
        // Create the topic (4 queues through TBW102) before the consumers subscribe.
        producer
            .send_with_timeout(msg(topic, "Boot", b"boot"), 5_000)
            .await
            .expect("bootstrap send");

        let seen: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
        let mut consumers = Vec::new();
        for instance in ["member-a", "member-b"] {
            let mut c = push_consumer(&namesrv, group, instance, |b| b);
            c.subscribe(topic, "TagA || TagB").await.expect("subscribe");
            let seen = Arc::clone(&seen);
            let name = instance.to_owned();
            c.register_message_listener_concurrently(
                move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                    let mut seen = seen.lock().expect("seen lock");
                    for m in msgs {
                        let tag = m.get_tags().map(|t| t.to_string()).unwrap_or_default();
                        let body = body_of(m);
                        seen.entry(name.clone())
                            .or_default()
                            .push(format!("{tag}:{body}"));
                    }
                    Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
                },
            );
            within("push consumer start", Duration::from_secs(30), c.start())
                .await
                .expect("push consumer start");
            consumers.push(c);
        }
        // Both members rebalanced (NOTIFY_CONSUMER_IDS_CHANGED makes it prompt): each
        // owns some of the four queues before anything is sent.
        eventually(
            "both members to own queues",
            Duration::from_secs(30),
            || shared_out(topic, &["member-a", "member-b"], 4),
            || {
                let owners = ["member-a", "member-b"].map(|i| assigned(i, topic));
                format!("{owners:?}\n{}", cluster.logs())
            },
        )
        .await;

        let mut want = HashSet::new();
        for i in 0..48 {
            let tag = ["TagA", "TagB", "TagC"][i % 3];
            let body = format!("m{i}");
            if tag != "TagC" {
                want.insert(format!("{tag}:{body}"));
            }
            producer
                .send_with_timeout(msg(topic, tag, body.as_bytes()), 5_000)
                .await
                .expect("send")
                .expect("send result");
        }
        let all_seen = |seen: &BTreeMap<String, Vec<String>>| -> HashSet<String> {
            seen.values().flatten().cloned().collect()
        };
        eventually(
            "both members to consume",
            Duration::from_secs(60),
            || want.is_subset(&all_seen(&seen.lock().expect("seen lock"))),
            || format!("{:?}\n{}", seen.lock().expect("seen lock"), cluster.logs()),
        )
        .await;
        {
            let seen = seen.lock().expect("seen lock");
            let got = all_seen(&seen);
            assert!(
                got.iter()
                    .all(|m| !m.starts_with("TagC:") && !m.starts_with("Boot:")),
                "only subscribed tags delivered: {got:?}"
            );
            assert_eq!(got, want);
            assert_eq!(seen.len(), 2, "both members got queues: {seen:?}");
        }
        for mut c in consumers {
            within("consumer shutdown", Duration::from_secs(30), c.shutdown()).await;
        }
        producer.shutdown().await;
    });

    // The consumers' shutdown committed their offsets; they must survive a restart.
    assert!(cluster.broker.terminate().success());
    cluster.broker.restart();

    rt.block_on(async {
        // A new member of the group starts from the committed offsets: it sees only
        // what is sent after the first members left.
        let mut producer = producer(&namesrv, "rc-push-producer-2").await;
        producer
            .send_with_timeout(msg(topic, "TagA", b"after"), 5_000)
            .await
            .unwrap_or_else(|e| panic!("send after restart: {e:?}\n{}", cluster.logs()))
            .expect("send result");
        let later: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut c = push_consumer(&namesrv, group, "member-c", |b| b);
        c.subscribe(topic, "TagA || TagB").await.expect("subscribe");
        let sink = Arc::clone(&later);
        c.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                let mut sink = sink.lock().expect("sink lock");
                sink.extend(msgs.iter().map(|m| body_of(m)));
                Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
            },
        );
        within("push consumer start", Duration::from_secs(30), c.start())
            .await
            .expect("start");
        eventually(
            "the new message",
            Duration::from_secs(30),
            || !later.lock().expect("later lock").is_empty(),
            || cluster.logs(),
        )
        .await;
        // Every queue consumed to its end: a re-read of older messages would be in too.
        cluster.wait_consumed_to_the_end(group, &[topic]).await;
        assert_eq!(
            *later.lock().expect("later lock"),
            vec!["after".to_owned()],
            "committed offsets were honoured\n{}",
            cluster.logs()
        );
        within("consumer shutdown", Duration::from_secs(30), c.shutdown()).await;
        producer.shutdown().await;
    });
}

/// An orderly push consumer (which locks its queues with LOCK_BATCH_MQ) receives each
/// order id's messages in send order.
#[test]
fn orderly_consumer_receives_each_queue_in_send_order() {
    let cluster = Cluster::start(&[]);
    let namesrv = cluster.namesrv();
    let topic = "RustClientOrderly";
    let rt = runtime();
    rt.block_on(async {
        let mut producer = producer(&namesrv, "rc-orderly-producer").await;
        producer
            .send_with_timeout(msg(topic, "Boot", b"boot"), 5_000)
            .await
            .expect("bootstrap send");

        let received: Arc<Mutex<BTreeMap<String, Vec<u32>>>> = Arc::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let mut c = push_consumer(&namesrv, "rc-orderly-group", "orderly", |b| b);
        c.subscribe(topic, "TagO").await.expect("subscribe");
        let sink = Arc::clone(&received);
        let counter = Arc::clone(&calls);
        c.register_message_listener_orderly(
            move |msgs: &[&MessageExt], ctx: &mut ConsumeOrderlyContext| {
                ctx.set_auto_commit(true);
                counter.fetch_add(1, Ordering::Relaxed);
                let mut sink = sink.lock().expect("sink lock");
                for m in msgs {
                    let body = body_of(m);
                    if let Some((order, seq)) = body.split_once('#')
                        && let Ok(seq) = seq.parse()
                    {
                        sink.entry(order.to_owned()).or_default().push(seq);
                    }
                }
                Ok(ConsumeOrderlyStatus::Success)
            },
        );
        within("orderly consumer start", Duration::from_secs(30), c.start())
            .await
            .expect("start");
        assert!(c.is_consume_orderly());
        eventually(
            "the orderly consumer to own the queues",
            Duration::from_secs(30),
            || assigned("orderly", topic).len() == 4,
            || cluster.logs(),
        )
        .await;

        let orders = ["order-a", "order-b", "order-c"];
        for seq in 0..20u32 {
            for (n, order) in orders.iter().enumerate() {
                let selector = |queues: &[MessageQueue], _m: &Message, id: &usize| {
                    queues.get(*id % queues.len()).cloned()
                };
                producer
                    .send_with_selector_timeout(
                        msg(topic, "TagO", format!("{order}#{seq}").as_bytes()),
                        selector,
                        n,
                        5_000,
                    )
                    .await
                    .expect("send")
                    .expect("send result");
            }
        }
        eventually(
            "all orderly messages",
            Duration::from_secs(60),
            || {
                let r = received.lock().expect("received lock");
                orders
                    .iter()
                    .all(|o| r.get(*o).is_some_and(|v| v.len() >= 20))
            },
            || format!("{:?}", received.lock().expect("received lock")),
        )
        .await;
        let r = received.lock().expect("received lock").clone();
        for order in orders {
            assert_eq!(
                r[order],
                (0..20).collect::<Vec<_>>(),
                "{order} consumed in send order\n{}",
                cluster.logs()
            );
        }
        assert!(calls.load(Ordering::Relaxed) >= 60);
        within("consumer shutdown", Duration::from_secs(30), c.shutdown()).await;
        producer.shutdown().await;
    });
}
