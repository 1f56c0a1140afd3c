//! Staged appends (`stage.rs`): positions are taken at once, the bytes reach the file and
//! readers only when committed, with one `pwrite` per commit however many records.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{AppendTo, COMMIT_LOG, MappedFile};
use crate::fs::{Fault, FaultFs, FaultOp, OsFs, StoreFs};

/// The real file system, counting `pwrite`s.
#[derive(Debug, Default)]
struct CountingFs {
    writes: AtomicUsize,
}

impl StoreFs for CountingFs {
    fn create_allocated(&self, path: &Path, len: u64) -> io::Result<File> {
        OsFs.create_allocated(path, len)
    }
    fn extend_allocated(&self, file: &File, len: u64) -> io::Result<()> {
        OsFs.extend_allocated(file, len)
    }
    fn open_rw(&self, path: &Path) -> io::Result<File> {
        OsFs.open_rw(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        OsFs.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFs.rename(from, to)
    }
    fn used_ratio(&self, path: &Path) -> io::Result<f64> {
        OsFs.used_ratio(path)
    }
    fn write_at(&self, path: &Path, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        OsFs.write_at(path, file, buf, pos)
    }
}

fn stage(file: &MappedFile, byte: u8, len: u32, store_timestamp: i64) -> u32 {
    let at = file.append_position();
    file.append_with(len, store_timestamp, AppendTo::Stage, |dst| {
        dst.fill(byte);
        Ok::<(), ()>(())
    })
    .unwrap()
    .unwrap();
    at
}

#[test]
fn staged_records_take_positions_at_once_and_reach_file_and_readers_in_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let fs = CountingFs::default();
    let file = MappedFile::create_at(&fs, COMMIT_LOG, dir.path(), 0, 64 * 1024).unwrap();
    let positions: Vec<u32> = (0..50u32)
        .map(|i| stage(&file, i as u8 + 1, 100 + i, 1_000 + i64::from(i)))
        .collect();
    let staged: u32 = (0..50u32).map(|i| 100 + i).sum();
    assert_eq!(positions[1], 100);
    assert_eq!(file.append_position(), staged);
    assert_eq!(file.remaining(), 64 * 1024 - staged);
    // Nothing is readable or in the file yet.
    assert_eq!(file.wrote_position(), 0);
    assert!(file.bytes(0, 1).is_none());
    assert_eq!(fs.writes.load(Ordering::Relaxed), 0);
    assert_eq!(file.store_timestamp(), 0);

    assert_eq!(file.commit(&fs).unwrap(), staged);
    assert_eq!(
        fs.writes.load(Ordering::Relaxed),
        1,
        "one pwrite for 50 records"
    );
    assert_eq!(file.wrote_position(), staged);
    assert_eq!(file.store_timestamp(), 1_049);
    for (i, at) in positions.iter().enumerate() {
        let len = 100 + i as u32;
        assert!(
            file.bytes(*at, len)
                .unwrap()
                .iter()
                .all(|b| *b == i as u8 + 1)
        );
    }
    let on_disk = std::fs::read(file.path()).unwrap();
    assert_eq!(&on_disk[..staged as usize], file.bytes(0, staged).unwrap());
    // Nothing staged: a commit writes nothing.
    assert_eq!(file.commit(&fs).unwrap(), staged);
    assert_eq!(fs.writes.load(Ordering::Relaxed), 1);
}

#[test]
fn a_flush_commits_what_is_staged_and_syncs_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = MappedFile::create_at(&OsFs, COMMIT_LOG, dir.path(), 0, 64 * 1024).unwrap();
    stage(&file, 7, 5000, 42);
    assert_eq!(file.flush(&OsFs).unwrap(), 5000);
    assert_eq!(file.flushed_position(), 5000);
    assert_eq!(file.wrote_position(), 5000);
    // Appends after a commit go on from its end.
    assert_eq!(stage(&file, 8, 10, 43), 5000);
    assert_eq!(file.flush(&OsFs).unwrap(), 5010);
    assert_eq!(file.bytes(5000, 10).unwrap(), &[8u8; 10][..]);
}

#[test]
fn an_append_through_the_mapping_is_refused_while_bytes_are_staged() {
    let dir = tempfile::tempdir().unwrap();
    let file = MappedFile::create_at(&OsFs, COMMIT_LOG, dir.path(), 0, 64 * 1024).unwrap();
    stage(&file, 1, 10, 0);
    assert!(!file.append(b"mapped"));
    file.commit(&OsFs).unwrap();
    assert!(file.append(b"mapped"));
    assert_eq!(file.bytes(10, 6).unwrap(), b"mapped");
}

#[test]
fn a_failed_append_fill_stages_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = MappedFile::create_at(&OsFs, COMMIT_LOG, dir.path(), 0, 64 * 1024).unwrap();
    stage(&file, 1, 10, 0);
    let failed = file
        .append_with(20, 0, AppendTo::Stage, |_| Err::<(), _>("no"))
        .unwrap();
    assert_eq!(failed, Err("no"));
    assert_eq!(file.append_position(), 10);
    assert_eq!(file.commit(&OsFs).unwrap(), 10);
    // No room: refused before filling.
    assert!(
        file.append_with(64 * 1024, 0, AppendTo::Stage, |_| Ok::<(), ()>(()))
            .is_none()
    );
}

/// A failed commit write publishes nothing and fences the file: its flushes fail from
/// then on, so no staged record can be acknowledged as durable.
#[test]
fn a_failed_commit_fences_the_file_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let file = MappedFile::create_at(&fs, COMMIT_LOG, dir.path(), 0, 64 * 1024).unwrap();
    stage(&file, 1, 100, 5);
    file.flush(&fs).unwrap();
    stage(&file, 2, 100, 6);
    fs.inject_times(FaultOp::Write, dir.path(), Fault::Io, 1);
    assert!(file.flush(&fs).is_err());
    assert!(file.is_fenced());
    assert_eq!(file.wrote_position(), 100);
    assert_eq!(file.flushed_position(), 100);
    assert!(file.bytes(100, 1).is_none());
    // The next write would succeed, but the file stays fenced.
    stage(&file, 3, 100, 7);
    assert!(file.flush(&fs).is_err());
    assert!(file.commit(&fs).is_err());
    assert_eq!(file.wrote_position(), 100);
}

/// Recovery truncation drops staged bytes: they lie past the new end.
#[test]
fn truncation_discards_staged_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = MappedFile::create_at(&OsFs, COMMIT_LOG, dir.path(), 0, 64 * 1024).unwrap();
    stage(&file, 1, 100, 0);
    file.commit(&OsFs).unwrap();
    stage(&file, 2, 100, 0);
    file.truncate_to(&OsFs, 50).unwrap();
    assert_eq!(file.append_position(), 50);
    assert_eq!(file.commit(&OsFs).unwrap(), 50);
    let on_disk = std::fs::read(file.path()).unwrap();
    assert!(on_disk[50..].iter().all(|b| *b == 0));
}
