//! Fault injection through `StoreFs`: after every fault, either the put was
//! refused or its data is there after recovery, and no ConsumeQueue unit points past the
//! CommitLog's valid end. EIO and ENOSPC on msync / pwrite go through
//! `store/src/flush/tests_faults.rs` and `store/src/tests_volumes.rs`; crashes at every
//! file-system step through `crash_model.rs`; this file covers allocation failures per
//! file type and volume, and a torn write at every record boundary.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{message_for, small_config, verify_store};
use protocol::message::QueueOffset;
use store::fs::{Fault, FaultFs, FaultOp, StoreFs};
use store::{FlushDiskType, MessageStore, MessageStoreConfig, PutMessageStatus, WriteRefusal};

const FILE_SIZE: u32 = 16 * 1024;

fn config(root: &Path) -> MessageStoreConfig {
    let mut c = small_config(root, FILE_SIZE, FlushDiskType::SyncFlush);
    c.mapped_file_size_consume_queue = 20 * 64;
    c
}

/// No unit of any queue points past the CommitLog's end.
fn check_queues(store: &MessageStore) {
    let end = store.max_phy_offset();
    for queue in store.dispatcher().consume_queues().all() {
        let mut at = queue.min_offset();
        while let Some(window) = queue.window_from(at) {
            for (_, unit) in window.iter() {
                assert!(
                    unit.is_pre_blank() || unit.end_offset() <= end,
                    "{unit:?} past {end}"
                );
            }
            at = QueueOffset(at.0 + window.len() as i64);
        }
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn reopen_and_check(root: &Path, acked: &[(u64, i64)]) {
    let store = MessageStore::open(config(root)).unwrap();
    verify_store(&store, acked);
    assert!(store.dispatcher().wait_caught_up(Duration::from_secs(20)));
    check_queues(&store);
    let r = store.put_message(&message_for(1_000_000)).wait();
    assert_eq!(r.status, PutMessageStatus::PutOk, "writes resume");
}

/// EIO while allocating the next CommitLog segment (and its preallocation): the put
/// that needs it is refused, nothing earlier is harmed, and writes resume once the
/// allocation works again.
#[test]
fn eio_on_commit_log_allocation_refuses_the_put() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fs = Arc::new(FaultFs::new());
    let store =
        MessageStore::open_with_fs(config(root), Arc::clone(&fs) as Arc<dyn StoreFs>).unwrap();
    let mut acked = Vec::new();
    let mut id = 0;
    let mut refused = None;
    fs.inject(FaultOp::Allocate, root.join("commitlog"), Fault::Io);
    for _ in 0..2_000 {
        let r = store.put_message(&message_for(id)).wait();
        if r.status != PutMessageStatus::PutOk {
            assert!(r.append.is_none(), "a refused put wrote nothing");
            refused = Some(r.status);
            break;
        }
        acked.push((id, r.append.unwrap().wrote_offset.0));
        id += 1;
    }
    assert_eq!(refused, Some(PutMessageStatus::CreateMapedFileFailed));
    fs.heal();
    let r = store.put_message(&message_for(id)).wait();
    assert_eq!(r.status, PutMessageStatus::PutOk);
    acked.push((id, r.append.unwrap().wrote_offset.0));
    drop(store);
    reopen_and_check(root, &acked);
}

/// ENOSPC allocating a ConsumeQueue file (the root volume is full): dispatch holds on
/// that record and puts are refused, so nothing is acknowledged that consumers could not
/// see; once space is back every message is in its queue.
#[test]
fn enospc_on_consume_queue_allocation_refuses_puts_until_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fs = Arc::new(FaultFs::new());
    let store =
        MessageStore::open_with_fs(config(root), Arc::clone(&fs) as Arc<dyn StoreFs>).unwrap();
    // Only file creation fails (usage is not reported full), as when the last blocks go.
    fs.inject(FaultOp::Allocate, root.join("consumequeue"), Fault::Io);
    let first = store.put_message(&message_for(0)).wait();
    assert_eq!(first.status, PutMessageStatus::PutOk);
    let mut acked = vec![(0, first.append.unwrap().wrote_offset.0)];
    wait_until("puts to be refused", || {
        store.write_refusal() == Some(WriteRefusal::IndexFailed)
    });
    let r = store.put_message(&message_for(1)).wait();
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    fs.heal();
    wait_until("puts to be taken again", || store.write_refusal().is_none());
    let r = store.put_message(&message_for(2)).wait();
    assert_eq!(r.status, PutMessageStatus::PutOk);
    acked.push((2, r.append.unwrap().wrote_offset.0));
    assert!(store.dispatcher().wait_caught_up(Duration::from_secs(20)));
    for (id, _) in &acked {
        let m = message_for(*id);
        let cq = store
            .dispatcher()
            .consume_queues()
            .find(&m.topic, m.queue_id)
            .expect("queue exists");
        assert_eq!(cq.max_offset(), QueueOffset(1), "{} in its queue", id);
    }
    drop(store);
    reopen_and_check(root, &acked);
}

/// ENOSPC allocating an IndexFile: the same policy as a ConsumeQueue (an index entry
/// that cannot be written holds dispatch and refuses puts).
#[test]
fn enospc_on_index_allocation_refuses_puts_until_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fs = Arc::new(FaultFs::new());
    let store =
        MessageStore::open_with_fs(config(root), Arc::clone(&fs) as Arc<dyn StoreFs>).unwrap();
    fs.inject(FaultOp::Allocate, root.join("index"), Fault::NoSpace);
    let first = store.put_message(&message_for(0)).wait();
    assert_eq!(first.status, PutMessageStatus::PutOk);
    wait_until("puts to be refused", || store.write_refusal().is_some());
    fs.heal();
    wait_until("puts to be taken again", || store.write_refusal().is_none());
    let acked = vec![(0, first.append.unwrap().wrote_offset.0)];
    drop(store);
    reopen_and_check(root, &acked);
}

/// A torn write at every record boundary: the store is written, then for each record the
/// on-disk bytes are cut in the middle of it (its first half kept, the rest of the log
/// zeroed, as a crash during that write leaves them). Recovery keeps exactly the records
/// before it, in normal and abnormal mode, with no unit past the end.
#[test]
fn a_torn_write_at_every_record_boundary_recovers_the_prefix() {
    let template = tempfile::tempdir().unwrap();
    let mut records = Vec::new();
    {
        let store = MessageStore::open(config(template.path())).unwrap();
        for id in 0..60u64 {
            let r = store.put_message(&message_for(id)).wait();
            let a = r.append.unwrap();
            records.push((id, a.wrote_offset.0, i64::from(a.wrote_bytes)));
        }
        store.shutdown().unwrap();
    }
    for (k, &(_, offset, len)) in records.iter().enumerate() {
        for abnormal in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            copy_tree(template.path(), dir.path());
            let tear_at = offset + len / 2;
            zero_from(dir.path(), tear_at);
            if abnormal {
                std::fs::write(dir.path().join("abort"), b"").unwrap();
            }
            let store = MessageStore::open(config(dir.path())).unwrap();
            assert_eq!(
                store.max_phy_offset().0,
                offset,
                "torn record {k} ({abnormal})"
            );
            let acked: Vec<_> = records[..k].iter().map(|(id, o, _)| (*id, *o)).collect();
            verify_store(&store, &acked);
            assert!(store.dispatcher().wait_caught_up(Duration::from_secs(20)));
            check_queues(&store);
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else if entry.file_name() != "lock" {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Zeroes every CommitLog byte from `offset` on.
fn zero_from(root: &Path, offset: i64) {
    let dir = root.join("commitlog");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let start: i64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let end = start + i64::from(FILE_SIZE);
        if end <= offset {
            continue;
        }
        let from = (offset - start).max(0) as u64;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&vec![0; (FILE_SIZE as u64 - from) as usize], from)
            .unwrap();
    }
}
