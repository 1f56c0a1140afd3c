use std::fs;
use std::path::Path;

use protocol::message::{PhysicalOffset, QueueOffset};

use super::*;

const FILE_UNITS: usize = 5;
const FILE_SIZE: usize = FILE_UNITS * 20;

/// Reads a queue directory straight from disk with RocketMQ's layout (`ConsumeQueue.CQ_STORE_UNIT_SIZE`):
/// 20-digit file names, 20-byte big-endian units (i64 offset, i32 size, i64 tags code),
/// stopping at the first unit with offset < 0 or size <= 0. Returns (logical offset, unit).
fn raw_units(dir: &Path) -> Vec<(i64, (i64, i32, i64))> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        assert_eq!(name.len(), 20, "file name {name}");
        let from: i64 = name.parse().unwrap();
        let bytes = fs::read(dir.join(&name)).unwrap();
        assert_eq!(bytes.len(), FILE_SIZE);
        for (n, unit) in bytes.chunks_exact(20).enumerate() {
            let offset = i64::from_be_bytes(unit[0..8].try_into().unwrap());
            let size = i32::from_be_bytes(unit[8..12].try_into().unwrap());
            let tags = i64::from_be_bytes(unit[12..20].try_into().unwrap());
            if offset < 0 || size <= 0 {
                return out;
            }
            out.push(((from + n as i64 * 20) / 20, (offset, size, tags)));
        }
    }
    out
}

fn unit(n: i64) -> CqUnit {
    CqUnit {
        physical_offset: PhysicalOffset(n * 100),
        size: 100,
        tags_code: n - 3,
    }
}

#[test]
fn units_span_file_boundaries_and_match_raw_layout() {
    let dir = tempfile::tempdir().unwrap();
    let qdir = dir.path().join("T").join("3");
    let q = ConsumeQueue::load("T", 3, qdir.clone(), FILE_SIZE).unwrap();
    for n in 0..23 {
        assert_eq!(
            q.put(unit(n), QueueOffset(n)).unwrap(),
            PutOutcome::Appended
        );
    }
    assert_eq!(q.file_count(), 5);
    assert_eq!(
        (q.min_offset(), q.max_offset()),
        (QueueOffset(0), QueueOffset(23))
    );
    assert_eq!(q.max_physic_offset(), Some(PhysicalOffset(2300)));
    q.flush(0).unwrap();
    let raw = raw_units(&qdir);
    assert_eq!(raw.len(), 23);
    for (n, (logical, (offset, size, tags))) in raw.into_iter().enumerate() {
        assert_eq!(
            (logical, offset, size, tags),
            (n as i64, n as i64 * 100, 100, n as i64 - 3)
        );
    }
    assert!(qdir.join("00000000000000000400").exists());

    let window = q.window_from(QueueOffset(7)).unwrap();
    assert_eq!(window.start_offset(), QueueOffset(7));
    assert_eq!(window.len(), 3, "window stops at the file end");
    assert_eq!(window.next_file_offset(), QueueOffset(10));
    assert_eq!(q.get(QueueOffset(22)), Some(unit(22)));
    assert_eq!(q.get(QueueOffset(23)), None);
}

#[test]
fn redispatch_is_skipped_and_duplicates_detected() {
    let dir = tempfile::tempdir().unwrap();
    let q = ConsumeQueue::load("T", 0, dir.path().join("q"), FILE_SIZE).unwrap();
    for n in 0..4 {
        q.put(unit(n), QueueOffset(n)).unwrap();
    }
    assert_eq!(
        q.put(unit(2), QueueOffset(2)).unwrap(),
        PutOutcome::AlreadyIndexed
    );
    let moved = CqUnit {
        physical_offset: PhysicalOffset(10_000),
        ..unit(1)
    };
    assert_eq!(q.put(moved, QueueOffset(1)).unwrap(), PutOutcome::Duplicate);
    assert_eq!(q.max_offset(), QueueOffset(4));
}

#[test]
fn queue_starting_late_is_pre_blank_filled() {
    let dir = tempfile::tempdir().unwrap();
    let qdir = dir.path().join("q");
    let q = ConsumeQueue::load("T", 0, qdir.clone(), FILE_SIZE).unwrap();
    q.put(unit(7), QueueOffset(7)).unwrap();
    q.put(unit(8), QueueOffset(8)).unwrap();
    assert_eq!(
        (q.min_offset(), q.max_offset()),
        (QueueOffset(7), QueueOffset(9))
    );
    let raw = raw_units(&qdir);
    assert_eq!(raw[0], (5, (0, i32::MAX, 0)), "pre-blank unit");
    assert_eq!(raw[2], (7, (700, 100, 4)));
    assert_eq!(q.get(QueueOffset(6)), None, "below min offset");

    drop(q);
    let q = ConsumeQueue::load("T", 0, qdir, FILE_SIZE).unwrap();
    q.recover().unwrap();
    q.correct_min_offset(PhysicalOffset(0));
    assert_eq!(
        (q.min_offset(), q.max_offset()),
        (QueueOffset(7), QueueOffset(9))
    );
    assert_eq!(q.max_physic_offset(), Some(PhysicalOffset(900)));
}

#[test]
fn recover_stops_at_first_unwritten_unit() {
    let dir = tempfile::tempdir().unwrap();
    let qdir = dir.path().join("q");
    let q = ConsumeQueue::load("T", 0, qdir.clone(), FILE_SIZE).unwrap();
    for n in 0..13 {
        q.put(unit(n), QueueOffset(n)).unwrap();
    }
    drop(q);
    // Tear unit 11 (size 0): units 11 and 12 must not survive recovery.
    let path = qdir.join(file_name(200));
    let mut bytes = fs::read(&path).unwrap();
    bytes[20 + 8..20 + 12].copy_from_slice(&0i32.to_be_bytes());
    fs::write(&path, bytes).unwrap();

    let q = ConsumeQueue::load("T", 0, qdir.clone(), FILE_SIZE).unwrap();
    assert_eq!(
        q.max_offset(),
        QueueOffset(15),
        "loaded files count as full"
    );
    q.recover().unwrap();
    assert_eq!(q.max_offset(), QueueOffset(11));
    assert_eq!(q.max_physic_offset(), Some(PhysicalOffset(1100)));
    q.flush(0).unwrap();
    assert_eq!(raw_units(&qdir).len(), 11);
    q.put(unit(11), QueueOffset(11)).unwrap();
    assert_eq!(q.get(QueueOffset(11)), Some(unit(11)));
}

/// A crash while a segment was being created: a stale `.tmp` and (from versions that
/// created files in place) a 0-byte newest file. Both are repaired at load; the queue
/// keeps every unit of the older files and appends continue.
#[test]
fn load_repairs_interrupted_file_creation() {
    let dir = tempfile::tempdir().unwrap();
    let qdir = dir.path().join("q");
    let q = ConsumeQueue::load("T", 0, qdir.clone(), FILE_SIZE).unwrap();
    for n in 0..5 {
        q.put(unit(n), QueueOffset(n)).unwrap();
    }
    q.flush(0).unwrap();
    drop(q);
    fs::write(qdir.join(file_name(100)), b"").unwrap();
    fs::write(qdir.join(format!("{}.tmp", file_name(200))), b"").unwrap();

    let q = ConsumeQueue::load("T", 0, qdir.clone(), FILE_SIZE).unwrap();
    q.recover().unwrap();
    assert_eq!(q.max_offset(), QueueOffset(5));
    assert_eq!(
        fs::metadata(qdir.join(file_name(100))).unwrap().len(),
        FILE_SIZE as u64
    );
    assert!(!qdir.join(format!("{}.tmp", file_name(200))).exists());
    q.put(unit(5), QueueOffset(5)).unwrap();
    assert_eq!(q.get(QueueOffset(5)), Some(unit(5)));

    // Only the newest file may be short: an older short file is refused, as RocketMQ does.
    drop(q);
    fs::write(qdir.join(file_name(0)), b"").unwrap();
    assert!(matches!(
        ConsumeQueue::load("T", 0, qdir, FILE_SIZE),
        Err(CqError::FileSize { .. })
    ));
}

#[test]
fn truncate_dirty_leaves_no_unit_past_commitlog_end() {
    let dir = tempfile::tempdir().unwrap();
    let qdir = dir.path().join("q");
    let q = ConsumeQueue::load("T", 0, qdir.clone(), FILE_SIZE).unwrap();
    for n in 0..18 {
        q.put(unit(n), QueueOffset(n)).unwrap();
    }
    q.truncate_dirty(PhysicalOffset(1250)).unwrap();
    assert_eq!(q.max_offset(), QueueOffset(12));
    assert_eq!(q.max_physic_offset(), Some(PhysicalOffset(1200)));
    q.flush(0).unwrap();
    let raw = raw_units(&qdir);
    assert_eq!(raw.len(), 12);
    assert!(raw.iter().all(|(_, (o, s, _))| o + i64::from(*s) <= 1250));
    assert_eq!(fs::read_dir(&qdir).unwrap().count(), 3);

    // Reloading must not resurrect the dropped units.
    drop(q);
    let q = ConsumeQueue::load("T", 0, qdir, FILE_SIZE).unwrap();
    q.recover().unwrap();
    assert_eq!(q.max_offset(), QueueOffset(12));

    q.truncate_dirty(PhysicalOffset(0)).unwrap();
    assert_eq!(q.max_offset(), QueueOffset(0));
    assert_eq!(q.max_physic_offset(), None);
}

#[test]
fn delete_below_commitlog_min_and_correct_min_offset() {
    let dir = tempfile::tempdir().unwrap();
    let qdir = dir.path().join("q");
    let q = ConsumeQueue::load("T", 0, qdir.clone(), FILE_SIZE).unwrap();
    for n in 0..17 {
        q.put(unit(n), QueueOffset(n)).unwrap();
    }
    assert_eq!(q.delete_below(PhysicalOffset(1200)).unwrap(), 2);
    assert_eq!(q.file_count(), 2);
    assert!(!qdir.join(file_name(0)).exists());
    assert_eq!(q.min_offset(), QueueOffset(12));
    assert_eq!(q.get(QueueOffset(11)), None);
    assert_eq!(q.get(QueueOffset(12)), Some(unit(12)));
    assert_eq!(q.max_offset(), QueueOffset(17));
}

#[test]
fn table_loads_recovers_and_reports_max_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let table = ConsumeQueueTable::load(dir.path(), FILE_SIZE).unwrap();
    for n in 0..7 {
        table
            .find_or_create("A", 0)
            .unwrap()
            .put(unit(n * 2), QueueOffset(n))
            .unwrap();
        table
            .find_or_create("B", 1)
            .unwrap()
            .put(unit(n * 2 + 1), QueueOffset(n))
            .unwrap();
    }
    assert!(table.find_or_create("../x", 0).is_err());
    drop(table);

    let table = ConsumeQueueTable::load(dir.path(), FILE_SIZE).unwrap();
    assert_eq!(table.recover().unwrap(), Some(PhysicalOffset(1400)));
    let mut max = table.max_offsets();
    max.sort();
    assert_eq!(
        max,
        vec![
            ("A".to_string(), 0, QueueOffset(7)),
            ("B".to_string(), 1, QueueOffset(7))
        ]
    );
    table.destroy().unwrap();
    assert!(table.all().is_empty());
    assert_eq!(
        fs::read_dir(dir.path().join("A").join("0"))
            .unwrap()
            .count(),
        0
    );
}
