//! A corrupt IndexFile whose hash chain loops must not hang a query.

use std::os::unix::fs::FileExt;

use protocol::message::PhysicalOffset;

use super::file::{HEADER_SIZE, IndexFile, SLOT_SIZE};

const T0: i64 = 1_700_000_000_000;

#[test]
fn a_cyclic_hash_chain_ends_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("20240101000000000");
    let (slots, entries) = (4usize, 16usize);
    {
        let f = IndexFile::create(
            &crate::fs::OsFs,
            &path,
            slots,
            entries,
            PhysicalOffset(0),
            T0,
        )
        .unwrap();
        for n in 1..=3 {
            assert!(f.put(5, PhysicalOffset(n * 100), T0 + n));
        }
        f.flush(&crate::fs::OsFs).unwrap();
    }
    // Entry 1 (the oldest of the chain 3 -> 2 -> 1) now points forward to entry 3.
    let entry1 = HEADER_SIZE + slots * SLOT_SIZE + 20;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .write_all_at(&3i32.to_be_bytes(), (entry1 + 16) as u64)
        .unwrap();
    let f = IndexFile::open(&crate::fs::OsFs, &path, slots, entries).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        f.select(5, 1_000_000, 0, i64::MAX, &mut out);
        let _ = tx.send(out);
    });
    let out = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("select never returned on a cyclic chain");
    assert_eq!(
        out,
        vec![
            PhysicalOffset(300),
            PhysicalOffset(200),
            PhysicalOffset(100)
        ]
    );
}
