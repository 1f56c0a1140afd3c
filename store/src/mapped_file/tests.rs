use std::sync::Arc;

use super::*;
use crate::config::OS_PAGE_SIZE;
use crate::fs::{OsFs, StoreFs};

fn fs() -> Arc<dyn StoreFs> {
    Arc::new(OsFs)
}

#[test]
fn file_names_round_trip() {
    assert_eq!(file_name(1_073_741_824), "00000000001073741824");
    assert_eq!(
        parse_file_name(Path::new("/x/00000000001073741824")),
        Some(1_073_741_824)
    );
    assert_eq!(parse_file_name(Path::new("/x/0000000000107374182")), None);
    assert_eq!(parse_file_name(Path::new("/x/0000000000107374182a")), None);
}

#[test]
fn append_read_flush_and_views_outlive_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let q = MappedFileQueue::open(
        dir.path(),
        4096,
        fs(),
        QueueOptions {
            preallocate: true,
            warm: true,
            prefault_ahead: true,
            write_ahead: false,
        },
    )
    .unwrap();
    let mut written = Vec::new();
    let mut offset = 0u64;
    for i in 0..100u32 {
        let data = vec![(i % 251) as u8 + 1; 100 + i as usize];
        let len = data.len() as u32;
        let file = q.last_or_create(0).unwrap();
        let file = if file.remaining() < len {
            offset = file.end_offset();
            file.append_with(file.remaining(), 0, AppendTo::Mapping, |d| {
                d.fill(0);
                Ok::<_, ()>(())
            })
            .unwrap()
            .unwrap();
            q.last_or_create(0).unwrap()
        } else {
            file
        };
        assert_eq!(
            file.from_offset() + u64::from(file.wrote_position()),
            offset
        );
        assert!(file.append(&data));
        written.push((offset, data));
        offset += u64::from(len);
    }
    assert_eq!(q.max_offset(), offset);
    assert!(q.file_count() > 3);
    for (off, data) in &written {
        let file = q.find(*off).unwrap();
        let view = file
            .read((off - file.from_offset()) as u32, data.len() as u32)
            .unwrap();
        assert_eq!(&view[..], &data[..]);
    }
    let out = q.flush(0).unwrap();
    assert_eq!(out.flushed, offset);
    // A view keeps the mapping alive after the file is deleted.
    let first = q.first().unwrap();
    let view = first.read(0, 100).unwrap();
    drop(first);
    let deleted = q.delete_oldest_while(1, |_| true);
    assert_eq!(deleted.len(), 1);
    assert!(!deleted[0].exists());
    assert_eq!(&view[..], &written[0].1[..]);
    assert_eq!(q.min_offset(), 4096);
    assert!(q.find(10).is_none());
    q.shutdown();
}

#[test]
fn reload_checks_sizes_and_truncate_zeroes_tail() {
    let dir = tempfile::tempdir().unwrap();
    {
        let q = MappedFileQueue::open(dir.path(), 8192, fs(), QueueOptions::default()).unwrap();
        let f = q.last_or_create(0).unwrap();
        assert!(f.append(&[7u8; 8192]));
        let f = q.last_or_create(0).unwrap();
        assert!(f.append(&[9u8; 1000]));
        q.flush(0).unwrap();
    }
    std::fs::write(dir.path().join("00000000000000016384.tmp"), b"partial").unwrap();
    let q = MappedFileQueue::open(dir.path(), 8192, fs(), QueueOptions::default()).unwrap();
    assert!(!dir.path().join("00000000000000016384.tmp").exists());
    assert_eq!(q.file_count(), 2);
    assert_eq!(q.max_offset(), 16384, "loaded files start full");
    q.truncate(8192 + 500).unwrap();
    assert_eq!(q.max_offset(), 8692);
    let last = q.last().unwrap();
    assert_eq!(last.bytes(499, 1).unwrap(), &[9]);
    drop(q);
    drop(last);
    let raw = std::fs::read(dir.path().join(file_name(8192))).unwrap();
    assert!(raw[500..].iter().all(|b| *b == 0));
    q_truncate_drops_later_files(dir.path());
    // A short newest file is repaired (its missing tail reads as zeros) ...
    std::fs::write(dir.path().join(file_name(8192)), b"short").unwrap();
    let q = MappedFileQueue::open(dir.path(), 8192, fs(), QueueOptions::default()).unwrap();
    assert_eq!(q.last().unwrap().bytes(0, 8192).unwrap()[..6], *b"short\0");
    drop(q);
    // ... and so is one followed only by never-written files, but a short file before
    // written data is refused.
    std::fs::write(dir.path().join(file_name(16384)), vec![0u8; 8192]).unwrap();
    std::fs::write(dir.path().join(file_name(8192)), b"short").unwrap();
    drop(MappedFileQueue::open(dir.path(), 8192, fs(), QueueOptions::default()).unwrap());
    std::fs::write(dir.path().join(file_name(16384)), vec![1u8; 8192]).unwrap();
    std::fs::write(dir.path().join(file_name(8192)), b"short").unwrap();
    let err = MappedFileQueue::open(dir.path(), 8192, fs(), QueueOptions::default()).unwrap_err();
    assert!(matches!(err, crate::StoreError::FileSize { .. }), "{err}");
}

fn q_truncate_drops_later_files(dir: &Path) {
    let q = MappedFileQueue::open(dir, 8192, fs(), QueueOptions::default()).unwrap();
    q.truncate(100).unwrap();
    assert_eq!(q.file_count(), 1);
    assert!(!dir.join(file_name(8192)).exists());
    assert_eq!(q.max_offset(), 100);
}

#[test]
fn flush_respects_least_pages() {
    let dir = tempfile::tempdir().unwrap();
    let q = MappedFileQueue::open(dir.path(), 65536, fs(), QueueOptions::default()).unwrap();
    let f = q.last_or_create(0).unwrap();
    assert!(f.append(&[1u8; 5000]));
    assert_eq!(q.flush(4).unwrap().flushed, 0);
    assert!(f.append(&[1u8; 12000]));
    assert_eq!(q.flush(4).unwrap().flushed, 17000);
    assert!(f.append(&[1u8; 10]));
    assert_eq!(q.flush(0).unwrap().flushed, 17010);
}

#[test]
fn prefault_ahead_maps_pages_without_changing_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let size = 64 * OS_PAGE_SIZE;
    let file =
        Arc::new(MappedFile::create_at(fs().as_ref(), COMMIT_LOG, dir.path(), 0, size).unwrap());
    let window = 8 * OS_PAGE_SIZE;
    assert!(file.prefault_due(window));
    assert!(file.append(&[7u8; 5000]));
    file.prefault_ahead(window);
    // Up to the page after write position + window, and no further.
    assert!(!file.prefault_due(window));
    assert!(file.append(&[9u8; 6 * 4096]));
    assert!(
        file.prefault_due(window),
        "less than half a window left ahead"
    );
    file.prefault_ahead(window);
    assert!(!file.prefault_due(window));
    let wrote = file.wrote_position();
    assert_eq!(file.bytes(0, 5000).unwrap(), &[7u8; 5000][..]);
    assert_eq!(file.bytes(5000, 6 * 4096).unwrap(), &[9u8; 6 * 4096][..]);
    // Pre-faulted space beyond the write position still reads as zeros on disk.
    file.flush(&crate::fs::OsFs).unwrap();
    let on_disk = std::fs::read(file.path()).unwrap();
    assert!(on_disk[wrote as usize..].iter().all(|b| *b == 0));
    // Near the end the window is cut at the file size; a full file is never due.
    let rest = file.remaining();
    assert!(file.append(&vec![1u8; rest as usize]));
    file.prefault_ahead(window);
    assert!(!file.prefault_due(window));
}

#[test]
fn appends_through_a_queue_get_their_pages_prefaulted() {
    let dir = tempfile::tempdir().unwrap();
    let q = MappedFileQueue::open(
        dir.path(),
        super::allocate::PREFAULT_WINDOW * 2,
        fs(),
        QueueOptions {
            preallocate: true,
            warm: false,
            prefault_ahead: true,
            write_ahead: false,
        },
    )
    .unwrap();
    let file = q.last_or_create(0).unwrap();
    assert!(file.append(&[3u8; 100]));
    // This call sees the window due and asks the allocator thread for it.
    let same = q.last_or_create(0).unwrap();
    assert!(Arc::ptr_eq(&file, &same));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while file.prefault_due(super::allocate::PREFAULT_WINDOW) {
        assert!(std::time::Instant::now() < deadline, "never pre-faulted");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(file.bytes(0, 100).unwrap(), &[3u8; 100][..]);
    q.shutdown();
}

/// Staged appends, committed (pwrite) every few records, racing the allocator thread's
/// zeros ahead: every appended byte survives, on disk as well as through the mapping,
/// and the blocks ahead of the write position end up written.
#[test]
fn zeros_written_ahead_never_overwrite_staged_appends() {
    let dir = tempfile::tempdir().unwrap();
    let window = super::allocate::WRITE_AHEAD_WINDOW;
    let q = MappedFileQueue::open(
        dir.path(),
        window * 4,
        fs(),
        QueueOptions {
            preallocate: true,
            warm: false,
            prefault_ahead: false,
            write_ahead: true,
        },
    )
    .unwrap();
    let os = OsFs;
    let mut expected = Vec::new();
    let file = q.last_or_create(0).unwrap();
    // Odd-sized records (never page-aligned) until the file is nearly full: appends cross
    // the pages the allocator thread is zeroing while it runs.
    let mut i = 0u32;
    loop {
        let file = q.last_or_create(0).unwrap();
        let record = vec![(i % 251) as u8 + 1; 1000 + (i % 97) as usize];
        let len = record.len() as u32;
        if file.append_position() + len > file.size() - window {
            break;
        }
        file.append_with(len, 0, AppendTo::Stage, |dst| {
            dst.copy_from_slice(&record);
            Ok::<(), ()>(())
        })
        .unwrap()
        .unwrap();
        expected.extend_from_slice(&record);
        if i % 7 == 6 {
            file.commit(&os).unwrap();
        }
        i += 1;
    }
    file.commit(&os).unwrap();
    let wrote = file.wrote_position();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while file.prefault_due(window) {
        assert!(std::time::Instant::now() < deadline, "never written ahead");
        std::thread::sleep(std::time::Duration::from_millis(5));
        q.last_or_create(0).unwrap();
    }
    assert_eq!(file.bytes(0, wrote).unwrap(), &expected[..]);
    let on_disk = std::fs::read(file.path()).unwrap();
    assert_eq!(&on_disk[..wrote as usize], &expected[..]);
    assert!(
        on_disk[wrote as usize..].iter().all(|b| *b == 0),
        "only zeros past the write position"
    );
    q.shutdown();
}
