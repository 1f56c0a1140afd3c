//! A failed CommitLog sync fences writes (waiters are never
//! told SEND_OK, later puts are refused until a restart), and a stalled sync answers
//! FLUSH_DISK_TIMEOUT after `syncFlushTimeout` through the watchdog.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use crate::MessageStore;
use crate::commitlog::tests_support::{config, message};
use crate::config::FlushDiskType;
use crate::fs::{Fault, FaultFs, FaultOp};
use crate::message_store::WriteRefusal;
use crate::put_result::{PutMessageResult, PutMessageStatus};

fn sync_store(dir: &std::path::Path, fs: Arc<FaultFs>, timeout_ms: u64) -> MessageStore {
    let mut c = config(dir, 64 * 1024);
    c.flush_disk_type = FlushDiskType::SyncFlush;
    c.sync_flush_timeout = timeout_ms;
    MessageStore::open_with_fs(c, fs).unwrap()
}

/// Puts one message on another thread and waits for its answer at most `bound` (a
/// liveness bound: a missing answer is the failure, not a slow one).
fn put_bounded(store: &Arc<MessageStore>, body: &[u8], bound: Duration) -> PutMessageResult {
    let (tx, rx) = mpsc::channel();
    let (store, body) = (Arc::clone(store), body.to_vec());
    std::thread::spawn(move || {
        let _ = tx.send(store.put_message(&message("T", 0, &body)).wait());
    });
    rx.recv_timeout(bound)
        .expect("the put was never answered (no watchdog / fence)")
}

#[test]
fn a_failed_sync_is_never_acknowledged_and_fences_until_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    // A timeout far beyond the bound below: the answer must come from the fence.
    let store = Arc::new(sync_store(dir.path(), Arc::clone(&fs), 600_000));
    let ok = put_bounded(&store, b"before", Duration::from_secs(30));
    assert_eq!(ok.status, PutMessageStatus::PutOk);

    // One failed msync, then the disk "works" again (as Linux reports after it dropped
    // the dirty pages): the waiting put must not be acknowledged.
    fs.inject_times(FaultOp::Sync, dir.path().join("commitlog"), Fault::Io, 1);
    let r = put_bounded(&store, b"lost?", Duration::from_secs(30));
    assert_eq!(r.status, PutMessageStatus::FlushDiskTimeout);
    assert_eq!(store.write_refusal(), Some(WriteRefusal::Fenced));
    assert!(store.fence_reason().is_some_and(|r| r.contains("flushing")));
    let r = put_bounded(&store, b"after", Duration::from_secs(30));
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    assert!(store.commit_log().flush(0).is_err(), "flushes stay failed");

    // A restart recovers from what is on disk and takes writes again.
    // Shutdown releases the lock even though its flush fails (and keeps `abort`).
    assert!(
        store.shutdown().is_err(),
        "a fenced store cannot flush at shutdown"
    );
    drop(store);
    let store = Arc::new(sync_store(dir.path(), Arc::new(FaultFs::new()), 600_000));
    assert!(!store.last_exit_ok(), "a fenced store leaves abort behind");
    assert_eq!(store.write_refusal(), None);
    let r = put_bounded(&store, b"again", Duration::from_secs(30));
    assert_eq!(r.status, PutMessageStatus::PutOk);
    assert!(
        store
            .read_by_offset(ok.append.unwrap().wrote_offset)
            .is_some()
    );
}

#[test]
fn a_stalled_sync_answers_flush_disk_timeout_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let store = Arc::new(sync_store(dir.path(), Arc::clone(&fs), 200));
    assert_eq!(
        put_bounded(&store, b"first", Duration::from_secs(30)).status,
        PutMessageStatus::PutOk
    );
    // The disk hangs (until healed) inside the next msync.
    fs.inject(
        FaultOp::Sync,
        dir.path().join("commitlog"),
        Fault::Stall(Duration::from_secs(3600)),
    );
    let r = put_bounded(&store, b"stalled", Duration::from_secs(30));
    assert_eq!(r.status, PutMessageStatus::FlushDiskTimeout);
    fs.heal();
    // Once the disk answers again, puts are acknowledged again (a stall is no error).
    let r = put_bounded(&store, b"healed", Duration::from_secs(30));
    assert_eq!(r.status, PutMessageStatus::PutOk);
    assert_eq!(store.write_refusal(), None);
}

/// Staged records reach the file by the group commit's `pwrite`: when it fails, the
/// waiting put is never acknowledged, the store fences, and a restart recovers without
/// the record.
#[test]
fn a_failed_commit_write_is_never_acknowledged_and_fences() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let store = Arc::new(sync_store(dir.path(), Arc::clone(&fs), 600_000));
    let ok = put_bounded(&store, b"before", Duration::from_secs(30));
    assert_eq!(ok.status, PutMessageStatus::PutOk);
    let durable_end = store.max_phy_offset();
    fs.inject_times(FaultOp::Write, dir.path().join("commitlog"), Fault::Io, 1);
    let r = put_bounded(&store, b"eio", Duration::from_secs(30));
    assert_eq!(r.status, PutMessageStatus::FlushDiskTimeout);
    assert_eq!(store.write_refusal(), Some(WriteRefusal::Fenced));
    let r = put_bounded(&store, b"next", Duration::from_secs(30));
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    assert_eq!(store.max_phy_offset(), durable_end, "nothing published");

    assert!(store.shutdown().is_err());
    drop(store);
    let store = Arc::new(sync_store(dir.path(), Arc::new(FaultFs::new()), 600_000));
    assert_eq!(store.max_phy_offset(), durable_end);
    let r = put_bounded(&store, b"again", Duration::from_secs(30));
    assert_eq!(r.status, PutMessageStatus::PutOk);
    assert_eq!(r.append.unwrap().wrote_offset, durable_end);
}
