//! ConsumeQueues and IndexFiles over the real CommitLog: deleting both directories and
//! reopening rebuilds them by re-dispatch, reads return the same records, and new puts
//! continue the queue offsets.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use protocol::message::{QueueOffset, decode};
use store::lookup::GetMessageStatus;
use store::{FlushDiskType, MessageStore};

/// Every (topic, queue) → [(queue offset, physical offset, body)] via get_message.
type QueueContents = BTreeMap<(String, i32), Vec<(i64, i64, Vec<u8>)>>;

fn read_all(store: &MessageStore) -> QueueContents {
    let d = store.dispatcher();
    assert!(d.wait_caught_up(Duration::from_secs(10)));
    let mut out = BTreeMap::new();
    for (topic, queue_id, max) in d.queue_max_offsets() {
        let mut offset = QueueOffset(0);
        let mut got = Vec::new();
        while offset < max {
            let r = d.get_message("g", &topic, queue_id, offset, 32, None);
            assert_eq!(
                r.status,
                GetMessageStatus::Found,
                "{topic}/{queue_id} at {offset}"
            );
            for record in &r.messages {
                let v = decode(record, true).unwrap();
                got.push((v.queue_offset().0, v.physical_offset().0, v.body().to_vec()));
            }
            offset = r.next_begin_offset;
        }
        out.insert((topic, queue_id), got);
    }
    out
}

#[test]
fn deleted_consume_queues_and_index_are_rebuilt_over_the_real_commitlog() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::small_config(dir.path(), 64 * 1024, FlushDiskType::AsyncFlush);
    let store = MessageStore::open(config.clone()).unwrap();
    for id in 0..600 {
        assert!(
            store
                .put_message(&common::message_for(id))
                .wait()
                .append
                .is_some()
        );
    }
    let before = read_all(&store);
    assert_eq!(before.values().map(Vec::len).sum::<usize>(), 600);
    for ((_, _), units) in &before {
        assert!(units.iter().enumerate().all(|(n, u)| u.0 == n as i64));
    }
    let hit = store
        .dispatcher()
        .query_message("T1", "k100", 32, 0, i64::MAX);
    assert_eq!(hit.messages.len(), 1);
    store.shutdown().unwrap();
    drop(store);

    std::fs::remove_dir_all(config.consume_queue_dir()).unwrap();
    std::fs::remove_dir_all(config.index_dir()).unwrap();
    let store = MessageStore::open(config.clone()).unwrap();
    assert_eq!(read_all(&store), before);
    let hit = store
        .dispatcher()
        .query_message("T1", "k100", 32, 0, i64::MAX);
    assert_eq!(hit.messages.len(), 1);
    assert_eq!(
        decode(&hit.messages[0], false).unwrap().body(),
        common::body_for(100)
    );

    // Queue offsets continue after the rebuilt queues (topicQueueTable re-read after start).
    let next = common::message_for(600);
    let key = (next.topic.clone(), next.queue_id);
    let append = store.put_message(&next).wait().append.unwrap();
    assert_eq!(append.logics_offset.0 as usize, before[&key].len());
    store.shutdown().unwrap();
}
