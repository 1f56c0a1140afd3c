//! Model-based property test: random puts, batches, reads by queue and by offset, clean
//! and abnormal restarts, checked against an in-memory model of what was acknowledged.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use common::{body_for, message_for, small_config};
use proptest::prelude::*;
use protocol::message::properties::find as property;
use protocol::message::{PhysicalOffset, QueueOffset, decode};
use store::commitlog::{BatchItem, BatchMessage};
use store::lookup::GetMessageStatus;
use store::{FlushDiskType, MessageStore, MessageStoreConfig};

#[derive(Debug, Clone)]
enum Op {
    Put {
        topic: u8,
        queue: u8,
    },
    Batch {
        topic: u8,
        queue: u8,
        count: u8,
    },
    Get {
        topic: u8,
        queue: u8,
        from_pct: u8,
        max: u8,
    },
    ReadByOffset {
        pick: u16,
    },
    Restart {
        abnormal: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3u8, 0..3u8).prop_map(|(topic, queue)| Op::Put { topic, queue }),
        2 => (0..3u8, 0..3u8, 1..6u8).prop_map(|(topic, queue, count)| Op::Batch { topic, queue, count }),
        3 => (0..3u8, 0..3u8, 0..=110u8, 1..8u8).prop_map(|(topic, queue, from_pct, max)| Op::Get { topic, queue, from_pct, max }),
        2 => any::<u16>().prop_map(|pick| Op::ReadByOffset { pick }),
        1 => any::<bool>().prop_map(|abnormal| Op::Restart { abnormal }),
    ]
}

#[derive(Default)]
struct Model {
    /// (topic, queue) -> ids in queue-offset order.
    queues: HashMap<(u8, u8), Vec<u64>>,
    /// Every acknowledged (id, physical offset).
    stored: Vec<(u64, i64)>,
    next_id: u64,
}

fn topic_name(t: u8) -> String {
    format!("Model{t}")
}

fn config(root: &std::path::Path) -> MessageStoreConfig {
    let mut c = small_config(root, 16 * 1024, FlushDiskType::AsyncFlush);
    c.mapped_file_size_consume_queue = 20 * 64;
    c
}

fn check_body(bytes: &Bytes, id: u64) {
    let view = decode(bytes, true).expect("stored record decodes");
    assert_eq!(
        property(view.properties(), "ID"),
        Some(id.to_string().as_str())
    );
    assert_eq!(view.body(), &body_for(id)[..]);
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = MessageStore::open(config(dir.path())).unwrap();
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Put { topic, queue } => {
                let id = model.next_id;
                model.next_id += 1;
                let mut msg = message_for(id);
                msg.topic = topic_name(topic);
                msg.queue_id = i32::from(queue);
                let r = store.put_message(&msg).wait();
                assert!(r.is_ok(), "{:?}", r.status);
                let a = r.append.unwrap();
                let q = model.queues.entry((topic, queue)).or_default();
                assert_eq!(a.logics_offset, QueueOffset(q.len() as i64));
                q.push(id);
                model.stored.push((id, a.wrote_offset.0));
            }
            Op::Batch {
                topic,
                queue,
                count,
            } => {
                let ids: Vec<u64> = (0..u64::from(count)).map(|i| model.next_id + i).collect();
                model.next_id += u64::from(count);
                let template = message_for(0);
                let batch = BatchMessage {
                    topic: topic_name(topic),
                    queue_id: i32::from(queue),
                    sys_flag: template.sys_flag,
                    born_timestamp: template.born_timestamp,
                    born_host: template.born_host,
                    store_host: template.store_host,
                    reconsume_times: 0,
                    wait_store_msg_ok: true,
                    items: ids
                        .iter()
                        .map(|id| BatchItem {
                            flag: 0,
                            body: Bytes::from(body_for(*id)),
                            properties: message_for(*id).properties,
                        })
                        .collect(),
                };
                let r = store.put_messages(&batch).wait();
                assert!(r.is_ok(), "{:?}", r.status);
                let a = r.append.unwrap();
                let q = model.queues.entry((topic, queue)).or_default();
                assert_eq!(a.logics_offset, QueueOffset(q.len() as i64));
                q.extend(&ids);
                model
                    .stored
                    .extend(ids.iter().zip(&a.batch_offsets).map(|(id, o)| (*id, o.0)));
            }
            Op::Get {
                topic,
                queue,
                from_pct,
                max,
            } => {
                assert!(store.dispatcher().wait_caught_up(Duration::from_secs(10)));
                let ids = model
                    .queues
                    .get(&(topic, queue))
                    .cloned()
                    .unwrap_or_default();
                let from = (ids.len() * usize::from(from_pct) / 100) as i64;
                let r = store.dispatcher().get_message(
                    "g",
                    &topic_name(topic),
                    i32::from(queue),
                    QueueOffset(from),
                    usize::from(max),
                    None,
                );
                if ids.is_empty() {
                    assert_ne!(r.status, GetMessageStatus::Found);
                    continue;
                }
                assert_eq!(r.max_offset, QueueOffset(ids.len() as i64));
                if (from as usize) < ids.len() {
                    assert_eq!(r.status, GetMessageStatus::Found);
                    let expect = (ids.len() - from as usize).min(usize::from(max));
                    assert_eq!(r.messages.len(), expect);
                    for (i, bytes) in r.messages.iter().enumerate() {
                        assert_eq!(r.queue_offsets[i], QueueOffset(from + i as i64));
                        check_body(bytes, ids[from as usize + i]);
                    }
                } else {
                    assert_ne!(r.status, GetMessageStatus::Found);
                }
            }
            Op::ReadByOffset { pick } => {
                if model.stored.is_empty() {
                    continue;
                }
                let (id, offset) = model.stored[usize::from(pick) % model.stored.len()];
                check_body(
                    &store
                        .read_by_offset(PhysicalOffset(offset))
                        .expect("stored"),
                    id,
                );
            }
            Op::Restart { abnormal } => {
                store.shutdown().unwrap();
                drop(store);
                if abnormal {
                    std::fs::write(dir.path().join("abort"), b"").unwrap();
                }
                store = MessageStore::open(config(dir.path())).unwrap();
                assert_eq!(store.last_exit_ok(), !abnormal);
                common::verify_store(&store, &model.stored);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn store_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops);
    }
}
