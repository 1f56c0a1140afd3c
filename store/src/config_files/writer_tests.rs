use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::*;
use crate::fs::{Fault, FaultFs, FaultOp};

/// A list of numbers; commits append one. Counts its renders (one per rewrite).
#[derive(Default)]
struct Numbers {
    live: Mutex<Vec<u32>>,
    renders: AtomicUsize,
}

impl ConfigState for Numbers {
    type Change = u32;

    fn render(&self, staged: &[u32]) -> Vec<u8> {
        self.renders.fetch_add(1, Ordering::SeqCst);
        let mut all = self.live.lock().clone();
        all.extend_from_slice(staged);
        serde_json::to_vec(&all).unwrap()
    }

    fn apply(&self, written: Vec<u32>) {
        self.live.lock().extend(written);
    }
}

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn on_disk(file: &ConfigFile) -> Vec<u32> {
    serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap()
}

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

struct Counter(AtomicU64);

impl ConfigState for Counter {
    type Change = Infallible;

    fn render(&self, _: &[Infallible]) -> Vec<u8> {
        self.0.load(Ordering::SeqCst).to_string().into_bytes()
    }

    fn apply(&self, _: Vec<Infallible>) {}
}

#[test]
fn deferred_changes_coalesce_and_flush_the_latest_state() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(dir.path().join("x.json"));
    let value = Arc::new(Counter(AtomicU64::new(0)));
    let writer = ConfigWriter::spawn(file.clone(), Arc::clone(&value)).unwrap();
    for i in 1..=500 {
        value.0.store(i, Ordering::SeqCst);
        writer.mark_dirty();
    }
    assert!(writer.flush(Duration::from_secs(10)));
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "500");
}

/// While one rewrite is held in its write, the commits arriving meanwhile wait, are not
/// in force, and then share one rewrite.
#[test]
fn commits_are_applied_after_their_write_and_share_one_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultFs::new());
    let file = ConfigFile::with_fs(dir.path().join("n.json"), fault.clone());
    let numbers = Arc::new(Numbers::default());
    let writer = ConfigWriter::spawn(file.clone(), Arc::clone(&numbers)).unwrap();

    fault.inject(
        FaultOp::WriteFile,
        dir.path(),
        Fault::Stall(Duration::from_secs(60)),
    );
    let first = writer.commit(0);
    wait_for("the first rewrite to block", || fault.fired() >= 1);
    let rest: Vec<Durable> = (1..=100).map(|n| writer.commit(n)).collect();
    assert!(
        numbers.live.lock().is_empty(),
        "nothing is in force before its write"
    );
    assert_eq!(numbers.renders.load(Ordering::SeqCst), 1);

    fault.heal();
    block_on(first).unwrap();
    for d in rest {
        block_on(d).unwrap();
    }
    assert_eq!(*numbers.live.lock(), (0..=100).collect::<Vec<_>>());
    assert_eq!(on_disk(&file), (0..=100).collect::<Vec<_>>());
    assert_eq!(
        numbers.renders.load(Ordering::SeqCst),
        2,
        "the 100 commits made during the first rewrite share the second"
    );
}

/// A failed rewrite refuses its commits and leaves the live state and the file as they
/// were; the next commit succeeds without the refused change.
#[test]
fn a_failed_rewrite_refuses_its_commits_without_applying_them() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultFs::new());
    let file = ConfigFile::with_fs(dir.path().join("n.json"), fault.clone());
    let numbers = Arc::new(Numbers::default());
    let writer = ConfigWriter::spawn(file.clone(), Arc::clone(&numbers)).unwrap();
    block_on(writer.commit(1)).unwrap();

    fault.inject(FaultOp::WriteFile, dir.path(), Fault::NoSpace);
    let err = block_on(writer.commit(2)).unwrap_err();
    assert!(
        matches!(&err, WriteError::Failed(e) if e.to_string().contains("n.json")),
        "{err}"
    );
    assert_eq!(*numbers.live.lock(), vec![1]);
    assert_eq!(on_disk(&file), vec![1]);

    fault.heal();
    block_on(writer.commit(3)).unwrap();
    assert_eq!(*numbers.live.lock(), vec![1, 3]);
    assert_eq!(on_disk(&file), vec![1, 3]);
}

/// Deferred changes survive a failed rewrite: they stay in force and reach the disk
/// once a retry succeeds. A `sync` waits for a rewrite of the live state.
#[test]
fn deferred_changes_are_retried_after_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultFs::new());
    let file = ConfigFile::with_fs(dir.path().join("x.json"), fault.clone());
    let value = Arc::new(Counter(AtomicU64::new(7)));
    let writer = ConfigWriter::spawn(file.clone(), Arc::clone(&value)).unwrap();

    fault.inject_times(FaultOp::WriteFile, dir.path(), Fault::Io, 1);
    writer.mark_dirty();
    assert!(
        writer.flush(Duration::from_secs(10)),
        "retried until written"
    );
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "7");

    value.0.store(8, Ordering::SeqCst);
    block_on(writer.sync()).unwrap();
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "8");
}

/// Dropping the writer writes what is pending; a waiter whose writer is gone is told so.
#[test]
fn drop_writes_pending_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(dir.path().join("x.json"));
    let value = Arc::new(Counter(AtomicU64::new(3)));
    let writer = ConfigWriter::spawn(file.clone(), Arc::clone(&value)).unwrap();
    writer.mark_dirty();
    let pending = writer.sync();
    drop(writer);
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "3");
    assert!(block_on(pending).is_ok());
}
