//! Disk-full and allocation-failure paths, injected through the store's file-system
//! trait: writes are refused with a clear status, nothing stored is lost or corrupted,
//! and writes resume once space is back.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::SystemTime;

use common::{message_for, small_config, verify_store};
use store::fs::QuotaFs;
use store::{FlushDiskType, MessageStore, PutMessageStatus, WriteRefusal};

const FILE_SIZE: u32 = 64 * 1024;

fn put_until_refused(
    store: &MessageStore,
    next_id: &mut u64,
    acked: &mut Vec<(u64, i64)>,
) -> PutMessageStatus {
    for _ in 0..10_000 {
        let r = store.put_message(&message_for(*next_id)).wait();
        if !r.is_ok() {
            assert!(r.append.is_none(), "a refused put wrote nothing");
            return r.status;
        }
        acked.push((*next_id, r.append.unwrap().wrote_offset.0));
        *next_id += 1;
    }
    panic!("the quota never ran out");
}

#[test]
fn full_disk_refuses_writes_without_corruption_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let config = small_config(&root, FILE_SIZE, FlushDiskType::SyncFlush);
    let fs = Arc::new(QuotaFs::new(&root, 64 * 1024 * 1024));
    let store = MessageStore::open_with_fs(config.clone(), fs.clone()).unwrap();
    let (mut next_id, mut acked) = (0u64, Vec::new());
    for _ in 0..200 {
        let r = store.put_message(&message_for(next_id)).wait();
        acked.push((next_id, r.append.unwrap().wrote_offset.0));
        next_id += 1;
    }
    // Leave room for less than one more segment: usage is then above the 90 % warning level.
    fs.set_quota(fs.used().unwrap() + FILE_SIZE as u64 / 16);
    let first_refusal = put_until_refused(&store, &mut next_id, &mut acked);
    assert_eq!(first_refusal, PutMessageStatus::CreateMapedFileFailed);
    assert_eq!(store.write_refusal(), Some(WriteRefusal::DiskFull));
    for _ in 0..5 {
        let r = store.put_message(&message_for(next_id)).wait();
        assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    }
    verify_store(&store, &acked);
    store.shutdown().unwrap();
    drop(store);

    // Still full after a restart: the data is intact and writes stay refused.
    let store = MessageStore::open_with_fs(config.clone(), fs.clone()).unwrap();
    verify_store(&store, &acked);
    assert_eq!(
        store.put_message(&message_for(next_id)).wait().status,
        PutMessageStatus::ServiceNotAvailable
    );

    // Space comes back: the next space check lifts the refusal.
    fs.set_quota(64 * 1024 * 1024);
    let pass = store.run_retention(SystemTime::now(), 12);
    assert!(!pass.disk_full);
    assert_eq!(store.write_refusal(), None);
    let before = acked.len();
    for _ in 0..50 {
        let r = store.put_message(&message_for(next_id)).wait();
        assert!(r.is_ok(), "{:?}", r.status);
        acked.push((next_id, r.append.unwrap().wrote_offset.0));
        next_id += 1;
    }
    assert!(acked.len() > before);
    verify_store(&store, &acked);
}

#[test]
fn failed_preallocation_reports_create_mapedfile_failed_and_heals() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let fs = Arc::new(QuotaFs::new(&root, u64::MAX));
    let store = MessageStore::open_with_fs(
        small_config(&root, FILE_SIZE, FlushDiskType::AsyncFlush),
        fs.clone(),
    )
    .unwrap();
    let (mut next_id, mut acked) = (0u64, Vec::new());
    fs.fail_allocations(true);
    let status = put_until_refused(&store, &mut next_id, &mut acked);
    assert_eq!(status, PutMessageStatus::CreateMapedFileFailed);
    assert_eq!(
        store.write_refusal(),
        None,
        "not a full disk, just failing allocations"
    );
    assert_eq!(
        store.put_message(&message_for(next_id)).wait().status,
        PutMessageStatus::CreateMapedFileFailed
    );
    fs.fail_allocations(false);
    for _ in 0..300 {
        let r = store.put_message(&message_for(next_id)).wait();
        assert!(r.is_ok(), "{:?}", r.status);
        acked.push((next_id, r.append.unwrap().wrote_offset.0));
        next_id += 1;
    }
    verify_store(&store, &acked);
    assert!(store.commit_log().mapped_files().file_count() >= 2);
}

/// The bytes under the store once the background file allocation has settled: the same
/// figure twice in a row, 20 ms apart.
fn settled_usage(fs: &QuotaFs) -> u64 {
    let mut last = fs.used().unwrap();
    for _ in 0..250 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = fs.used().unwrap();
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the store's usage kept changing");
}

#[test]
fn space_pressure_deletes_outside_the_delete_hour() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let mut config = small_config(&root, FILE_SIZE, FlushDiskType::AsyncFlush);
    config.file_reserved_time = 1;
    config.delete_when = "04".into();
    let fs = Arc::new(QuotaFs::new(&root, u64::MAX));
    let store = MessageStore::open_with_fs(config, fs.clone()).unwrap();
    let mut acked = Vec::new();
    for id in 0..900 {
        acked.push((
            id,
            store
                .put_message(&message_for(id))
                .wait()
                .append
                .unwrap()
                .wrote_offset
                .0,
        ));
    }
    let files = store.commit_log().mapped_files().files();
    assert!(files.len() >= 6);
    let now = SystemTime::now();
    let old = now - std::time::Duration::from_secs(3 * 3600);
    for f in &files[..2] {
        std::fs::File::options()
            .write(true)
            .open(f.path())
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    // The next CommitLog file may still be being made in the background; measured before
    // it lands, the usage set below would be exceeded once it does.
    let used = settled_usage(&fs) as f64;
    // 80 % used (> diskMaxUsedSpaceRatio 75 %): only expired files go, at any hour.
    fs.set_quota((used / 0.80) as u64);
    let pass = store.run_retention(now, 12);
    assert_eq!(pass.deleted.len(), 2);
    assert!(!pass.disk_full);
    // 88 % used (> diskSpaceCleanForciblyRatio 85 %): files go even though not expired,
    // oldest first, until usage is acceptable or only the written file is left.
    // Usage is measured again before each try: a file the first pass deleted may still be
    // unmapped by a reader that held it, and the quota is set from what is on disk.
    let forced = (0..50).find_map(|_| {
        let used = fs.used().unwrap() as f64;
        fs.set_quota((used / 0.88) as u64);
        let pass = store.run_retention(now, 12);
        if pass.deleted.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(20));
            return None;
        }
        Some(pass)
    });
    assert!(forced.is_some(), "no file deleted at 88 % used");
    assert!(store.commit_log().mapped_files().file_count() >= 1);
    let min = store.min_phy_offset().0;
    let kept: Vec<_> = acked.iter().filter(|(_, o)| *o >= min).copied().collect();
    verify_store(&store, &kept);
    assert!(store.put_message(&message_for(5_000)).wait().is_ok());
}
