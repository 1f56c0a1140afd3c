//! CommitLog segments, ConsumeQueue files and IndexFiles share one base: a fault
//! injected through `StoreFs` reaches each the same way and has the same consequence.

use std::path::Path;
use std::sync::Arc;

use protocol::message::PhysicalOffset;

use super::{COMMIT_LOG, CONSUME_QUEUE, INDEX, MappedFile};
use crate::consume_queue::{ConsumeQueue, CqFile, CqUnit};
use crate::fs::{Fault, FaultFs, FaultOp, StoreFs};
use crate::index::IndexFile;

const T0: i64 = 1_700_000_000_000;

fn unit(n: i64) -> CqUnit {
    CqUnit {
        physical_offset: PhysicalOffset(n * 100),
        size: 100,
        tags_code: 0,
    }
}

/// One write and one flush through the type's own API, and its base.
struct Case<'a> {
    sub: &'static str,
    base: &'a MappedFile,
    write: Box<dyn Fn() + 'a>,
    flush: Box<dyn Fn() -> bool + 'a>,
}

fn check_fenced_by_one_failed_sync(root: &Path, fs: &FaultFs, case: &Case<'_>) {
    (case.write)();
    assert!((case.flush)(), "{}: a healthy flush succeeds", case.sub);
    assert!(!case.base.is_fenced());
    (case.write)();
    let fired = fs.fired();
    fs.inject_times(FaultOp::Sync, root.join(case.sub), Fault::Io, 1);
    assert!(
        !(case.flush)(),
        "{}: the failed msync is reported",
        case.sub
    );
    assert_eq!(
        fs.fired(),
        fired + 1,
        "{}: the msync went through StoreFs",
        case.sub
    );
    assert!(case.base.is_fenced(), "{}", case.sub);
    // The disk "works" again (the one-shot fault is used up), as Linux reports after it
    // dropped the dirty pages: the file must still refuse, written to or not.
    assert!(!(case.flush)(), "{}: fenced until restart", case.sub);
    (case.write)();
    assert!(!(case.flush)(), "{}: fenced until restart", case.sub);
    assert_eq!(
        fs.fired(),
        fired + 1,
        "{}: no msync is even tried",
        case.sub
    );
}

#[test]
fn a_failed_msync_fences_every_file_kind_alike() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fault = Arc::new(FaultFs::new());
    let fs: &dyn StoreFs = fault.as_ref();

    let segment =
        MappedFile::create_at(fs, COMMIT_LOG, &root.join("commitlog"), 0, 1 << 16).unwrap();
    let cq = CqFile::create(fs, &root.join("consumequeue"), 0, 20 * 64).unwrap();
    let index = IndexFile::create(
        fs,
        &root.join("index").join("20240101000000000"),
        4,
        16,
        PhysicalOffset(0),
        T0,
    )
    .unwrap();
    assert_eq!(segment.kind(), COMMIT_LOG);
    assert_eq!(cq.mapped().kind(), CONSUME_QUEUE);
    assert_eq!(index.mapped().kind(), INDEX);

    let cq_next = std::cell::Cell::new(0);
    let puts = std::cell::Cell::new(1);
    let cases = [
        Case {
            sub: "commitlog",
            base: &segment,
            write: Box::new(|| assert!(segment.append(&[7u8; 100]))),
            flush: Box::new(|| segment.flush(fs).is_ok()),
        },
        Case {
            sub: "consumequeue",
            base: cq.mapped(),
            write: Box::new(|| {
                cq_next.set(cq_next.get() + 1);
                assert!(cq.append(&unit(cq_next.get())));
            }),
            flush: Box::new(|| cq.flush(fs).is_ok()),
        },
        Case {
            sub: "index",
            base: index.mapped(),
            write: Box::new(|| {
                puts.set(puts.get() + 1);
                assert!(index.put(5, PhysicalOffset(puts.get()), T0 + puts.get()));
            }),
            flush: Box::new(|| index.flush(fs).is_ok()),
        },
    ];
    for case in &cases {
        check_fenced_by_one_failed_sync(root, &fault, case);
    }
}

/// The queue-level flush the checkpoint waits for fails while one file is fenced, even
/// when that file has nothing new to flush.
#[test]
fn a_fenced_consume_queue_file_fails_every_queue_flush() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultFs::new());
    let queue_dir = dir.path().join("T").join("0");
    let cq = ConsumeQueue::load_with_fs("T", 0, queue_dir.clone(), 20 * 64, fault.clone()).unwrap();
    cq.put(unit(0), protocol::message::QueueOffset(0)).unwrap();
    fault.inject_times(FaultOp::Sync, &queue_dir, Fault::Io, 1);
    assert!(cq.flush(0).is_err());
    assert!(cq.flush(0).is_err(), "nothing dirty, still fenced");
    cq.put(unit(1), protocol::message::QueueOffset(1)).unwrap();
    assert!(cq.flush(0).is_err());
    // A restart maps the files afresh: the fence is per process, like the CommitLog's.
    drop(cq);
    let cq = ConsumeQueue::load_with_fs("T", 0, queue_dir, 20 * 64, fault).unwrap();
    cq.recover().unwrap();
    assert!(cq.flush(0).is_ok());
}
