use std::sync::Arc;

use protocol::message::PhysicalOffset;

use super::{ReplicaError, ReplicaWriter};
use crate::commitlog::CommitLog;
use crate::commitlog::tests_support::{config, message};
use crate::fs::OsFs;

const FILE: u32 = 16 * 1024;

fn open(dir: &std::path::Path) -> Arc<CommitLog> {
    Arc::new(CommitLog::open(&config(dir, FILE), Arc::new(OsFs)).unwrap())
}

/// A master log of several files (with BLANK fillers) and its raw bytes from `from`.
fn master_with_data(dir: &std::path::Path, count: usize) -> Arc<CommitLog> {
    let log = open(dir);
    for i in 0..count {
        let body = vec![(i % 251) as u8; 20 + (i * 53) % 1500];
        log.append(&message("T", (i % 4) as i32, &body)).unwrap();
    }
    log
}

/// The master's bytes from `from` to its end, as `batch`-sized frames that stop at file
/// ends (as the HA transfer does).
fn frames(
    master: &CommitLog,
    from: PhysicalOffset,
    batch: usize,
) -> Vec<(PhysicalOffset, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = from;
    while at < master.max_offset() {
        let window = master.read_to_file_end(at).unwrap();
        let n = window.len().min(batch);
        out.push((at, window[..n].to_vec()));
        at = PhysicalOffset(at.0 + n as i64);
    }
    out
}

fn assert_same(master: &CommitLog, slave: &CommitLog, from: PhysicalOffset) {
    assert_eq!(slave.max_offset(), master.max_offset());
    let mut at = from;
    while at < master.max_offset() {
        let m = master.read_to_file_end(at).unwrap();
        let s = slave.read_to_file_end(at).unwrap();
        assert_eq!(&m[..], &s[..], "file at {at}");
        at = PhysicalOffset(at.0 + m.len() as i64);
    }
}

#[test]
fn batches_cut_anywhere_rebuild_an_identical_log() {
    for batch in [7usize, 100, 4096, 32 * 1024] {
        let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let master = master_with_data(md.path(), 120);
        assert!(master.mapped_files().file_count() >= 4);
        let slave = open(sd.path());
        let mut w = ReplicaWriter::new(Arc::clone(&slave), true, 4 * 1024 * 1024);
        for (at, data) in frames(&master, PhysicalOffset(0), batch) {
            assert_eq!(w.expected_offset(), at);
            w.accept(at, &data).unwrap();
        }
        assert_same(&master, &slave, PhysicalOffset(0));
        assert_eq!(w.written_offset(), master.max_offset());
    }
}

/// A SYNC_FLUSH slave stages the bytes and commits each frame with one pwrite.
#[test]
fn a_sync_flush_replica_writes_through_and_matches() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_with_data(md.path(), 120);
    let mut c = config(sd.path(), FILE);
    c.flush_disk_type = crate::FlushDiskType::SyncFlush;
    let slave = Arc::new(CommitLog::open(&c, Arc::new(OsFs)).unwrap());
    let mut w = ReplicaWriter::new(Arc::clone(&slave), true, 4 * 1024 * 1024);
    for (at, data) in frames(&master, PhysicalOffset(0), 1000) {
        w.accept(at, &data).unwrap();
    }
    assert_same(&master, &slave, PhysicalOffset(0));
}

#[test]
fn an_empty_replica_starts_at_the_file_the_master_names() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_with_data(md.path(), 120);
    let last_file = PhysicalOffset(master.mapped_files().last().unwrap().from_offset() as i64);
    let slave = open(sd.path());
    let mut w = ReplicaWriter::new(Arc::clone(&slave), true, 4 * 1024 * 1024);
    assert_eq!(
        w.accept(PhysicalOffset(last_file.0 + 5), b"x"),
        Err(ReplicaError::UnalignedStart(PhysicalOffset(
            last_file.0 + 5
        )))
    );
    w.reset();
    for (at, data) in frames(&master, last_file, 1000) {
        w.accept(at, &data).unwrap();
    }
    assert_same(&master, &slave, last_file);
    assert_eq!(slave.min_offset(), last_file);
}

#[test]
fn corrupt_or_misplaced_data_is_refused_and_the_valid_prefix_kept() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_with_data(md.path(), 10);
    let slave = open(sd.path());
    let mut w = ReplicaWriter::new(Arc::clone(&slave), true, 4 * 1024 * 1024);
    let mut data = master.read_to_file_end(PhysicalOffset(0)).unwrap().to_vec();
    let first_len = i32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    // Flip a body byte of the second record: the CRC check catches it.
    let second_len =
        i32::from_be_bytes(data[first_len..first_len + 4].try_into().unwrap()) as usize;
    data[first_len + second_len - 1] ^= 0xff;
    let err = w.accept(PhysicalOffset(0), &data).unwrap_err();
    assert!(
        matches!(err, ReplicaError::BadRecord { offset, .. } if offset.0 == first_len as i64),
        "{err}"
    );
    assert_eq!(slave.max_offset(), PhysicalOffset(first_len as i64));
    w.reset();
    // A batch that does not continue where the replica ends.
    assert!(matches!(
        w.accept(PhysicalOffset(first_len as i64 + 1), &data[first_len + 1..]),
        Err(ReplicaError::OffsetMismatch { .. })
    ));
    // Bytes of the right length at the wrong position (record names another offset).
    let mut shifted = master.read_to_file_end(PhysicalOffset(0)).unwrap()[..first_len].to_vec();
    shifted[..4].copy_from_slice(&(first_len as i32).to_be_bytes());
    let err = w
        .accept(PhysicalOffset(first_len as i64), &shifted)
        .unwrap_err();
    assert!(matches!(err, ReplicaError::BadRecord { .. }), "{err}");
    assert_eq!(slave.max_offset(), PhysicalOffset(first_len as i64));
}
