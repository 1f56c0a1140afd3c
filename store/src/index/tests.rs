use std::fs;
use std::path::{Path, PathBuf};

use protocol::message::PhysicalOffset;

use super::*;

const SLOTS: usize = 7;
const ENTRIES: usize = 10;
const T0: i64 = 1_700_000_000_000;

fn config() -> IndexConfig {
    IndexConfig {
        slot_num: SLOTS,
        index_num: ENTRIES,
        max_msgs_num_batch: 64,
    }
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Java `String.hashCode` re-implemented here from the reference, independent of `hash.rs`.
fn ref_hash(s: &str) -> i32 {
    let h = s
        .encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32));
    if h == i32::MIN { 0 } else { h.abs() }
}

struct RawHeader {
    begin_ts: i64,
    end_ts: i64,
    begin_phy: i64,
    end_phy: i64,
    slot_count: i32,
    index_count: i32,
}

/// Decodes an IndexFile from its bytes with RocketMQ's layout (`IndexFile`, `IndexHeader`) and walks the
/// chain of `key` like `selectPhyOffset` (no time filter). Returns (header, [(phy, time diff)]).
fn raw_lookup(bytes: &[u8], key: &str) -> (RawHeader, Vec<(i64, i32)>) {
    let i64_at = |p: usize| i64::from_be_bytes(bytes[p..p + 8].try_into().unwrap());
    let i32_at = |p: usize| i32::from_be_bytes(bytes[p..p + 4].try_into().unwrap());
    assert_eq!(bytes.len(), 40 + SLOTS * 4 + ENTRIES * 20);
    let header = RawHeader {
        begin_ts: i64_at(0),
        end_ts: i64_at(8),
        begin_phy: i64_at(16),
        end_phy: i64_at(24),
        slot_count: i32_at(32),
        index_count: i32_at(36),
    };
    let hash = ref_hash(key);
    let mut n = i32_at(40 + (hash as usize % SLOTS) * 4);
    let mut found = Vec::new();
    while n > 0 && n < header.index_count {
        let e = 40 + SLOTS * 4 + n as usize * 20;
        if i32_at(e) == hash {
            found.push((i64_at(e + 4), i32_at(e + 12)));
        }
        n = i32_at(e + 16);
    }
    (header, found)
}

#[test]
fn entries_match_raw_layout() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), config(), true, 0).unwrap();
    for n in 0..4i64 {
        let key = format!("K{n}");
        svc.build_index(
            "T",
            PhysicalOffset(n * 100),
            T0 + n * 1500,
            Some("U"),
            Some(&key),
        )
        .unwrap();
    }
    // 4 records x 2 keys = 8 entries + the unused entry 0: one file, not yet full.
    assert_eq!(svc.file_count(), 1);
    svc.flush().unwrap();
    let bytes = fs::read(&files_in(dir.path())[0]).unwrap();
    let (h, found) = raw_lookup(&bytes, "T#K2");
    assert_eq!((h.begin_ts, h.end_ts), (T0, T0 + 4500));
    assert_eq!((h.begin_phy, h.end_phy), (0, 300));
    assert_eq!(h.index_count, 9);
    assert!(h.slot_count >= 1 && h.slot_count <= 5);
    assert_eq!(
        found,
        vec![(200, 3)],
        "time diff is in seconds from the file begin"
    );
    let (_, found) = raw_lookup(&bytes, "T#U");
    assert_eq!(
        found,
        vec![(300, 4), (200, 3), (100, 1), (0, 0)],
        "newest first"
    );
}

#[test]
fn many_files_query_by_key_and_time_range() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), config(), true, 0).unwrap();
    for n in 0..100i64 {
        let keys = format!("k{} shared  k{}x", n, n % 3);
        svc.build_index(
            "Topic",
            PhysicalOffset(n * 64),
            T0 + n * 1000,
            None,
            Some(&keys),
        )
        .unwrap();
    }
    // 300 entries, 9 per file.
    assert_eq!(svc.file_count(), 34);
    for n in [0i64, 1, 50, 99] {
        let r = svc.query("Topic", &format!("k{n}"), 32, 0, i64::MAX);
        assert_eq!(r.offsets, vec![PhysicalOffset(n * 64)], "key k{n}");
    }
    assert_eq!(r_len(&svc, "shared", 0, i64::MAX, 32), 32);
    assert_eq!(
        r_len(&svc, "shared", 0, i64::MAX, 1000),
        64,
        "capped by maxMsgsNumBatch"
    );
    let r = svc.query("Topic", "k1x", 64, T0 + 10_000, T0 + 20_000);
    let mut got: Vec<i64> = r.offsets.iter().map(|o| o.0 / 64).collect();
    got.sort();
    assert_eq!(got, vec![10, 13, 16, 19]);
    assert_eq!(r.index_last_update_phy_offset, PhysicalOffset(99 * 64));
    assert_eq!(r.index_last_update_timestamp, T0 + 99_000);
    assert!(svc.query("Other", "k1", 32, 0, i64::MAX).offsets.is_empty());

    // Re-dispatch of an already indexed record adds nothing.
    svc.build_index("Topic", PhysicalOffset(50 * 64), T0, None, Some("k50"))
        .unwrap();
    assert_eq!(svc.query("Topic", "k50", 32, 0, i64::MAX).offsets.len(), 1);

    // Every file on disk is well-formed and chained: begin of file i+1 >= end of file i.
    svc.flush().unwrap();
    let mut prev_end = 0;
    for path in files_in(dir.path()) {
        assert_eq!(path.file_name().unwrap().len(), 17);
        let (h, _) = raw_lookup(&fs::read(&path).unwrap(), "x");
        assert!(h.begin_phy >= prev_end);
        prev_end = h.end_phy;
    }
}

fn r_len(svc: &IndexService, key: &str, begin: i64, end: i64, max: usize) -> usize {
    svc.query("Topic", key, max, begin, end).offsets.len()
}

#[test]
fn abnormal_load_deletes_files_newer_than_checkpoint_and_rebuild_works() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), config(), true, 0).unwrap();
    for n in 0..40i64 {
        svc.build_index(
            "T",
            PhysicalOffset(n * 10),
            T0 + n,
            None,
            Some(&format!("k{n}")),
        )
        .unwrap();
    }
    assert_eq!(svc.file_count(), 5);
    // Wait for the background flushes of the 4 full files.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while svc.flushed_full_timestamp() < T0 + 35 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let checkpoint = T0 + 17; // end timestamp of the second full file (entries 9..17)
    drop(svc);

    let svc = IndexService::load(dir.path(), config(), true, checkpoint).unwrap();
    assert_eq!(svc.file_count(), 5, "clean exit keeps everything");
    drop(svc);
    let svc = IndexService::load(dir.path(), config(), false, checkpoint).unwrap();
    assert_eq!(svc.file_count(), 2);
    assert_eq!(files_in(dir.path()).len(), 2);
    assert!(svc.query("T", "k30", 8, 0, i64::MAX).offsets.is_empty());
    // Re-dispatch from the start re-indexes only what is missing.
    for n in 0..40i64 {
        svc.build_index(
            "T",
            PhysicalOffset(n * 10),
            T0 + n,
            None,
            Some(&format!("k{n}")),
        )
        .unwrap();
    }
    for n in 0..40i64 {
        let mut r = svc.query("T", &format!("k{n}"), 8, 0, i64::MAX);
        // The newest record kept (n = 17) is indexed again, as RocketMQ does.
        assert_eq!(r.offsets.len(), if n == 17 { 2 } else { 1 }, "k{n}");
        r.offsets.dedup();
        assert_eq!(r.offsets, vec![PhysicalOffset(n * 10)], "k{n}");
    }
}

#[test]
fn delete_below_commitlog_min_keeps_newest() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), config(), true, 0).unwrap();
    for n in 0..30i64 {
        svc.build_index("T", PhysicalOffset(n * 10), T0 + n, None, Some("k"))
            .unwrap();
    }
    assert_eq!(svc.file_count(), 4);
    assert_eq!(svc.delete_below(PhysicalOffset(200)).unwrap(), 2);
    assert_eq!(files_in(dir.path()).len(), 2);
    assert_eq!(svc.delete_below(PhysicalOffset(i64::MAX)).unwrap(), 1);
    assert_eq!(svc.file_count(), 1);
}

#[test]
fn file_name_is_local_time() {
    let name = local_time_file_name(T0 + 123);
    assert_eq!(name.len(), 17);
    assert!(name.starts_with("2023111"), "{name}");
    assert!(name.ends_with("123"));
}

/// A crash while an index file was being created: its `.tmp` is removed and a 0-byte
/// newest file (from versions that created files in place) is dropped; older files load.
#[test]
fn load_repairs_interrupted_file_creation() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), config(), true, 0).unwrap();
    svc.build_index("T", PhysicalOffset(0), T0, None, Some("k0"))
        .unwrap();
    drop(svc);
    fs::write(dir.path().join("29991231235959999"), b"").unwrap();
    fs::write(dir.path().join("29991231235959998.tmp"), b"").unwrap();

    let svc = IndexService::load(dir.path(), config(), false, i64::MAX).unwrap();
    assert_eq!(svc.file_count(), 1);
    assert_eq!(files_in(dir.path()).len(), 1);
    assert_eq!(
        svc.query("T", "k0", 8, 0, i64::MAX).offsets,
        vec![PhysicalOffset(0)]
    );
}
