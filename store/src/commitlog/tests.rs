use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use protocol::message::properties::find as property;
use protocol::message::{MessageSysFlag, PhysicalOffset, QueueOffset, decode};

use super::append::SCHEDULE_TOPIC;
use super::*;
use crate::fs::OsFs;
use crate::put_result::PutMessageStatus;

pub(crate) fn config(dir: &std::path::Path, file_size: u32) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::with_root(dir);
    c.mapped_file_size_commit_log = file_size;
    c
}

pub(crate) fn message(topic: &str, queue_id: i32, body: &[u8]) -> BrokerMessage {
    BrokerMessage {
        topic: topic.to_owned(),
        queue_id,
        flag: 7,
        body: Bytes::copy_from_slice(body),
        properties: "TAGS\u{1}t\u{2}".to_owned(),
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_000,
        born_host: "10.0.0.2:5000".parse().unwrap(),
        store_host: "10.0.0.1:10911".parse::<SocketAddr>().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: true,
    }
}

fn open(dir: &std::path::Path, file_size: u32) -> CommitLog {
    CommitLog::open(&config(dir, file_size), Arc::new(OsFs)).unwrap()
}

/// Both write paths: through the mapping (ASYNC_FLUSH) and staged, then committed by
/// pwrite (SYNC_FLUSH, see `mapped_file/stage.rs`), whose bytes readers see through the
/// mapping once committed.
#[test]
fn round_trip_across_many_files_with_blanks() {
    for flush in [FlushDiskType::AsyncFlush, FlushDiskType::SyncFlush] {
        round_trip_with(flush);
    }
}

fn round_trip_with(flush: FlushDiskType) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 16 * 1024);
    c.flush_disk_type = flush;
    let log = CommitLog::open(&c, Arc::new(OsFs)).unwrap();
    assert_eq!(log.write_through, flush == FlushDiskType::SyncFlush);
    let mut stored = Vec::new();
    for i in 0..600usize {
        let body = vec![(i % 256) as u8; 17 + (i * 37) % 900];
        let r = log.append(&message("T", (i % 3) as i32, &body)).unwrap();
        assert_eq!(r.logics_offset, QueueOffset((i / 3) as i64));
        stored.push((r.wrote_offset, r.wrote_bytes, body));
    }
    if flush == FlushDiskType::SyncFlush {
        // Staged: the last file's records are not readable before their commit (a
        // roll committed the earlier files).
        let last = stored[599].0;
        assert!(log.read_record(last).is_none());
        assert!(log.max_offset() <= last);
        log.commit().unwrap();
        assert_eq!(log.append_signal().max_offset(), log.max_offset());
    }
    assert!(log.mapped_files().file_count() > 20);
    for (offset, len, body) in &stored {
        let bytes = log.read_record(*offset).unwrap();
        assert_eq!(bytes.len(), *len as usize);
        let view = decode(&bytes, true).unwrap();
        assert_eq!(view.body(), &body[..]);
        assert_eq!(view.physical_offset(), *offset);
        // Records never straddle files and leave room for a BLANK header.
        let start = offset.0 as u64 % log.file_size();
        assert!(start + u64::from(*len) + 8 <= log.file_size());
    }
    let walked: Vec<_> = log
        .records_from(PhysicalOffset(0))
        .map(|r| r.offset)
        .collect();
    assert_eq!(walked, stored.iter().map(|s| s.0).collect::<Vec<_>>());
    assert_eq!(log.queue_offset("T", 1), QueueOffset(200));
    // The bytes reached the files themselves, whichever way they were written.
    let (offset, len, _) = &stored[599];
    let name = format!(
        "{:020}",
        offset.0 as u64 / log.file_size() * log.file_size()
    );
    let on_disk = std::fs::read(dir.path().join("commitlog").join(name)).unwrap();
    let start = (offset.0 as u64 % log.file_size()) as usize;
    assert_eq!(
        &on_disk[start..start + *len as usize],
        &log.read_record(*offset).unwrap()[..]
    );
}

#[test]
fn limits_give_rocketmq_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 64 * 1024);
    c.max_message_size = 1000;
    let log = CommitLog::open(&c, Arc::new(OsFs)).unwrap();
    assert_eq!(
        log.append(&message("T", 0, &[0; 1001])).unwrap_err(),
        PutMessageStatus::MessageIllegal
    );
    let mut m = message("T", 0, b"x");
    m.properties = "K\u{1}".to_owned() + &"v".repeat(40_000);
    assert_eq!(
        log.append(&m).unwrap_err(),
        PutMessageStatus::PropertiesSizeExceeded
    );
    assert_eq!(
        log.append(&message(&"t".repeat(128), 0, b"x")).unwrap_err(),
        PutMessageStatus::MessageIllegal
    );
    // A record that could never fit a file.
    let small = tempfile::tempdir().unwrap();
    let log = open(small.path(), 16 * 1024);
    assert_eq!(
        log.append(&message("T", 0, &[0; 16 * 1024])).unwrap_err(),
        PutMessageStatus::MessageIllegal
    );
    assert_eq!(log.max_offset(), PhysicalOffset(0));
}

#[test]
fn transactions_and_delay_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 64 * 1024);
    let mut prepared = message("T", 0, b"half");
    prepared.sys_flag = MessageSysFlag(MessageSysFlag::TRANSACTION_PREPARED_TYPE);
    assert_eq!(log.append(&prepared).unwrap().logics_offset, QueueOffset(0));
    assert_eq!(log.append(&prepared).unwrap().logics_offset, QueueOffset(0));
    assert_eq!(
        log.append(&message("T", 0, b"a")).unwrap().logics_offset,
        QueueOffset(0)
    );
    assert_eq!(
        log.append(&message("T", 0, b"b")).unwrap().logics_offset,
        QueueOffset(1)
    );
    let mut delayed = message("T", 2, b"later");
    delayed.properties = "DELAY\u{1}99\u{2}".to_owned();
    let r = log.append(&delayed).unwrap();
    let bytes = log.read_record(r.wrote_offset).unwrap();
    let view = decode(&bytes, true).unwrap();
    assert_eq!(view.topic(), SCHEDULE_TOPIC);
    assert_eq!(view.queue_id(), 17, "level clamped to 18");
    assert_eq!(property(view.properties(), "REAL_TOPIC"), Some("T"));
    assert_eq!(property(view.properties(), "REAL_QID"), Some("2"));
    assert_eq!(log.queue_offset(SCHEDULE_TOPIC, 17), QueueOffset(1));
    assert_eq!(log.queue_offset("T", 2), QueueOffset(0));
}

#[test]
fn batch_is_contiguous_in_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 16 * 1024);
    log.append(&message("T", 0, &[1; 13_000])).unwrap();
    let m = message("B", 1, b"");
    let batch = BatchMessage {
        topic: "B".into(),
        queue_id: 1,
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1,
        born_host: m.born_host,
        store_host: m.store_host,
        reconsume_times: 0,
        wait_store_msg_ok: true,
        items: (0..10)
            .map(|i| BatchItem {
                flag: i,
                body: Bytes::from(vec![i as u8; 300]),
                properties: String::new(),
            })
            .collect(),
    };
    let r = log.append_batch(&batch).unwrap();
    assert_eq!(
        r.wrote_offset,
        PhysicalOffset(16 * 1024),
        "whole batch moved to the next file"
    );
    assert_eq!(r.msg_num, 10);
    assert_eq!(r.batch_offsets.len(), 10);
    assert_eq!(r.msg_ids().split(',').count(), 10);
    for (i, off) in r.batch_offsets.iter().enumerate() {
        let view_bytes = log.read_record(*off).unwrap();
        let view = decode(&view_bytes, true).unwrap();
        assert_eq!(view.queue_offset(), QueueOffset(i as i64));
        assert_eq!(view.flag(), i as i32);
    }
    let r2 = log.append_batch(&batch).unwrap();
    assert_eq!(r2.logics_offset, QueueOffset(10));
}

#[test]
fn views_survive_file_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 4 * 4096);
    let first = log.append(&message("T", 0, b"keep me")).unwrap();
    let view = log.read_record(first.wrote_offset).unwrap();
    while log.mapped_files().file_count() < 3 {
        log.append(&message("T", 0, &[0; 1000])).unwrap();
    }
    assert_eq!(log.delete_oldest_while(1, |_| true).len(), 1);
    assert!(log.read_record(first.wrote_offset).is_none());
    assert_eq!(decode(&view, true).unwrap().body(), b"keep me");
    assert_eq!(log.min_offset(), PhysicalOffset(4 * 4096));
}
