//! The store checks free space on every volume it writes to. With
//! the CommitLog on its own volume, a full root volume (ConsumeQueues, IndexFiles) must
//! refuse writes too: an acknowledged message could not get its ConsumeQueue unit.

use std::sync::Arc;

use crate::MessageStore;
use crate::commitlog::tests_support::{config, message};
use crate::fs::{Fault, FaultFs, FaultOp};
use crate::message_store::WriteRefusal;
use crate::put_result::PutMessageStatus;

fn split_volumes(full: &str) -> (MessageStore, Arc<FaultFs>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(&dir.path().join("root"), 64 * 1024);
    c.store_path_commit_log = Some(dir.path().join("cl"));
    let fs = Arc::new(FaultFs::new());
    fs.inject(FaultOp::Allocate, dir.path().join(full), Fault::NoSpace);
    let store = MessageStore::open_with_fs(c, Arc::clone(&fs) as _).unwrap();
    (store, fs, dir)
}

#[test]
fn a_full_root_volume_refuses_writes() {
    let (store, _fs, _dir) = split_volumes("root");
    assert_eq!(store.write_refusal(), Some(WriteRefusal::DiskFull));
    let r = store.put_message(&message("T", 0, b"x")).wait();
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
}

#[test]
fn a_full_commit_log_volume_refuses_writes() {
    let (store, _fs, _dir) = split_volumes("cl");
    assert_eq!(store.write_refusal(), Some(WriteRefusal::DiskFull));
}

#[test]
fn healthy_volumes_take_writes() {
    let (store, _fs, _dir) = split_volumes("elsewhere");
    assert_eq!(store.write_refusal(), None);
    let r = store.put_message(&message("T", 0, b"x")).wait();
    assert_eq!(r.status, PutMessageStatus::PutOk);
}
