//! MessageStore end to end on real files with tiny segments: round trips across many
//! file boundaries and restarts, concurrent appenders, batches, retention.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use common::{message_for, small_config, verify_store};
use protocol::message::{PhysicalOffset, QueueOffset, decode};
use store::commitlog::{BatchItem, BatchMessage};
use store::{FlushDiskType, MessageStore, PutMessageStatus};

const FILE_SIZE: u32 = 16 * 1024;

#[test]
fn round_trip_across_file_boundaries_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path(), FILE_SIZE, FlushDiskType::AsyncFlush);
    let mut acked = Vec::new();
    let mut next_queue_offset: HashMap<(String, i32), i64> = HashMap::new();
    for restart in 0..4u64 {
        let store = MessageStore::open(config.clone()).unwrap();
        assert!(store.last_exit_ok());
        verify_store(&store, &acked);
        for i in 0..300 {
            let id = restart * 1000 + i;
            let msg = message_for(id);
            let r = store.put_message(&msg).wait();
            assert_eq!(r.status, PutMessageStatus::PutOk);
            let a = r.append.unwrap();
            let expected = next_queue_offset
                .entry((msg.topic.clone(), msg.queue_id))
                .or_default();
            assert_eq!(
                a.logics_offset,
                QueueOffset(*expected),
                "queue offsets continue across restarts"
            );
            *expected += 1;
            assert_eq!(a.msg_id().len(), 32);
            acked.push((id, a.wrote_offset.0));
        }
        assert_eq!(verify_store(&store, &acked), acked.len());
        store.shutdown().unwrap();
    }
    let files = std::fs::read_dir(dir.path().join("commitlog"))
        .unwrap()
        .count();
    assert!(files > 30, "{files} files");
}

#[test]
fn concurrent_appenders_get_disjoint_offsets_and_consecutive_queue_offsets() {
    for flush in [FlushDiskType::AsyncFlush, FlushDiskType::SyncFlush] {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(MessageStore::open(small_config(dir.path(), FILE_SIZE, flush)).unwrap());
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    (0..150u64)
                        .map(|n| {
                            let id = t << 32 | n;
                            let r = store.put_message(&message_for(id)).wait();
                            assert_eq!(r.status, PutMessageStatus::PutOk);
                            let a = r.append.unwrap();
                            (id, a.wrote_offset.0, a.wrote_bytes, a.logics_offset)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let all: Vec<_> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let mut by_offset: BTreeMap<i64, u32> = BTreeMap::new();
        let mut per_queue: HashMap<(String, i32), Vec<i64>> = HashMap::new();
        for (id, offset, len, qo) in &all {
            assert!(by_offset.insert(*offset, *len).is_none());
            let m = message_for(*id);
            per_queue
                .entry((m.topic, m.queue_id))
                .or_default()
                .push(qo.0);
        }
        let mut end = 0;
        for (offset, len) in &by_offset {
            assert!(*offset >= end, "records overlap at {offset}");
            end = offset + i64::from(*len);
        }
        for offsets in per_queue.values_mut() {
            offsets.sort_unstable();
            assert_eq!(*offsets, (0..offsets.len() as i64).collect::<Vec<_>>());
        }
        let acked: Vec<_> = all
            .iter()
            .map(|(id, offset, _, _)| (*id, *offset))
            .collect();
        assert_eq!(verify_store(&store, &acked), acked.len());
        if flush == FlushDiskType::SyncFlush {
            assert!(store.flushed_phy_offset() >= PhysicalOffset(end));
        }
    }
}

#[test]
fn batches_round_trip_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path(), FILE_SIZE, FlushDiskType::SyncFlush);
    let store = MessageStore::open(config.clone()).unwrap();
    let template = message_for(0);
    let mut offsets = Vec::new();
    for b in 0..40u8 {
        let batch = BatchMessage {
            topic: "Batch".into(),
            queue_id: 0,
            sys_flag: template.sys_flag,
            born_timestamp: 1,
            born_host: template.born_host,
            store_host: template.store_host,
            reconsume_times: 0,
            wait_store_msg_ok: true,
            items: (0..7u8)
                .map(|i| BatchItem {
                    flag: i32::from(i),
                    body: Bytes::from(vec![b ^ i | 1; 200]),
                    properties: String::new(),
                })
                .collect(),
        };
        let r = store.put_messages(&batch).wait();
        assert_eq!(r.status, PutMessageStatus::PutOk);
        let a = r.append.unwrap();
        assert_eq!(a.logics_offset, QueueOffset(i64::from(b) * 7));
        let first_file = a.wrote_offset.0 / i64::from(FILE_SIZE);
        assert_eq!(
            (a.end_offset().0 - 1) / i64::from(FILE_SIZE),
            first_file,
            "batch written in one file"
        );
        offsets.extend(a.batch_offsets.iter().map(|o| (b, *o)));
    }
    store.shutdown().unwrap();
    drop(store);
    let store = MessageStore::open(config).unwrap();
    for (i, (b, offset)) in offsets.iter().enumerate() {
        let bytes = store.read_by_offset(*offset).unwrap();
        let view = decode(&bytes, true).unwrap();
        assert_eq!(view.queue_offset(), QueueOffset(i as i64));
        assert_eq!(view.body()[0], b ^ (i % 7) as u8 | 1);
    }
}

#[test]
fn retention_deletes_expired_files_but_never_the_one_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path(), FILE_SIZE, FlushDiskType::AsyncFlush);
    config.file_reserved_time = 1;
    config.delete_when = "04".into();
    let store = MessageStore::open(config).unwrap();
    let mut acked = Vec::new();
    for id in 0..600 {
        let r = store.put_message(&message_for(id)).wait();
        acked.push((id, r.append.unwrap().wrote_offset.0));
    }
    let files = store.commit_log().mapped_files().files();
    assert!(files.len() > 12);
    let first_view = store.read_by_offset(PhysicalOffset(acked[0].1)).unwrap();
    let now = SystemTime::now();
    let old = now - Duration::from_secs(2 * 3600);
    for f in &files[..5] {
        std::fs::File::options()
            .write(true)
            .open(f.path())
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    // Not the deleteWhen hour and no space pressure: nothing happens.
    assert!(store.run_retention(now, 5).deleted.is_empty());
    // At 04:00 the five expired files go; the sixth is fresh so deletion stops there.
    let pass = store.run_retention(now, 4);
    assert_eq!(pass.deleted.len(), 5);
    assert_eq!(
        store.min_phy_offset(),
        PhysicalOffset(5 * i64::from(FILE_SIZE))
    );
    assert!(store.read_by_offset(PhysicalOffset(acked[0].1)).is_none());
    assert_eq!(
        decode(&first_view, true).unwrap().body(),
        &common::body_for(0)[..],
        "open views stay valid"
    );
    // Everything expired: all files but the last one (being written) go, in batches of 10.
    for f in store.commit_log().mapped_files().files() {
        std::fs::File::options()
            .write(true)
            .open(f.path())
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    while !store.run_retention(now, 4).deleted.is_empty() {}
    assert_eq!(store.commit_log().mapped_files().file_count(), 1);
    let last: Vec<_> = acked
        .iter()
        .filter(|(_, o)| PhysicalOffset(*o) >= store.min_phy_offset())
        .copied()
        .collect();
    verify_store(&store, &last);
    assert!(store.put_message(&message_for(10_000)).wait().is_ok());
}
