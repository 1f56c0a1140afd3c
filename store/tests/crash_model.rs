//! Crash model: a file system that keeps, next to the real files, the image a
//! disk would hold — only bytes that were synced (`msync`/`fsync` through `StoreFs`) or
//! allocated reach it. A crash kills the file system (every later operation fails, as
//! for a dead machine), drops the store, and writes the disk images back over the files:
//! everything that sat only in the page cache is gone. Checked after every recovery:
//!
//! * every put acknowledged PUT_OK under SYNC_FLUSH is readable with its content;
//! * the CommitLog is a valid prefix and no ConsumeQueue unit points past its end;
//! * every acknowledged message is in its queue, in order.
//!
//! Two drivers: a property test over random puts / flushes / crashes / clean restarts,
//! and a sweep that crashes after each single file-system step of a scenario that
//! creates, fills, rolls and checkpoints files (so a crash lands at every step of file
//! creation, truncation and checkpointing).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{message_for, small_config, verify_store};
use memmap2::MmapRaw;
use parking_lot::Mutex;
use proptest::prelude::*;
use protocol::message::properties::find as property;
use protocol::message::{QueueOffset, decode};
use store::fs::{OsFs, StoreFs};
use store::{FlushDiskType, MessageStore, MessageStoreConfig, PutMessageStatus};

/// Directories whose files the model tracks (the checkpoint, abort, lock and config
/// files sync themselves and are left as they are).
const MODELED: [&str; 3] = ["commitlog", "consumequeue", "index"];

#[derive(Debug)]
struct CrashFs {
    root: PathBuf,
    /// What the disk holds, per modeled file.
    disk: Mutex<HashMap<PathBuf, Vec<u8>>>,
    dead: AtomicBool,
    /// Mutating operations left before the machine dies (`u64::MAX`: never).
    die_after: AtomicU64,
    ops: AtomicU64,
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl CrashFs {
    /// Starts a life: the files under `root` are what the disk holds.
    fn new(root: &Path, die_after: u64) -> Self {
        let mut disk = HashMap::new();
        for dir in MODELED {
            walk(&root.join(dir), &mut |p| {
                disk.insert(p.to_owned(), std::fs::read(p).unwrap());
            });
        }
        Self {
            root: root.to_owned(),
            disk: Mutex::new(disk),
            dead: AtomicBool::new(false),
            die_after: AtomicU64::new(die_after),
            ops: AtomicU64::new(0),
        }
    }

    fn modeled(&self, path: &Path) -> bool {
        MODELED.iter().any(|d| path.starts_with(self.root.join(d)))
    }

    /// One mutating step: fails once the machine is dead.
    fn step(&self) -> io::Result<()> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(eio());
        }
        let n = self.ops.fetch_add(1, Ordering::SeqCst);
        if n >= self.die_after.load(Ordering::SeqCst) {
            self.dead.store(true, Ordering::SeqCst);
            return Err(eio());
        }
        Ok(())
    }

    fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
    }

    /// After the store is gone: the files become what the disk held.
    fn restore(&self) {
        let disk = self.disk.lock();
        for dir in MODELED {
            walk(&self.root.join(dir), &mut |p| {
                if !disk.contains_key(p) {
                    // Created but never made durable under this name.
                    std::fs::remove_file(p).unwrap();
                }
            });
        }
        for (path, image) in disk.iter() {
            std::fs::write(path, image).unwrap();
        }
    }
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, f);
        } else {
            f(&path);
        }
    }
}

impl StoreFs for CrashFs {
    fn create_allocated(&self, path: &Path, len: u64) -> io::Result<File> {
        self.step()?;
        let file = OsFs.create_allocated(path, len)?;
        if self.modeled(path) {
            self.disk
                .lock()
                .insert(path.to_owned(), vec![0; len as usize]);
        }
        Ok(file)
    }

    fn extend_allocated(&self, file: &File, len: u64) -> io::Result<()> {
        self.step()?;
        OsFs.extend_allocated(file, len)
    }

    fn open_rw(&self, path: &Path) -> io::Result<File> {
        OsFs.open_rw(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        OsFs.remove_file(path)?;
        self.disk.lock().remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.step()?;
        OsFs.rename(from, to)?;
        let mut disk = self.disk.lock();
        if let Some(image) = disk.remove(from) {
            disk.insert(to.to_owned(), image);
        }
        Ok(())
    }

    fn used_ratio(&self, path: &Path) -> io::Result<f64> {
        OsFs.used_ratio(path)
    }

    fn sync_range(&self, path: &Path, map: &MmapRaw, offset: usize, len: usize) -> io::Result<()> {
        self.step()?;
        OsFs.sync_range(path, map, offset, len)?;
        if self.modeled(path) {
            let mut disk = self.disk.lock();
            let image = disk.entry(path.to_owned()).or_default();
            if image.len() < map.len() {
                image.resize(map.len(), 0);
            }
            // SAFETY: [offset, offset + len) is inside the mapping (the caller syncs it).
            let synced = unsafe { std::slice::from_raw_parts(map.as_ptr().add(offset), len) };
            image[offset..offset + len].copy_from_slice(synced);
        }
        Ok(())
    }

    fn write_at(&self, path: &Path, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
        // Page cache only: reaches the disk image when synced.
        self.step()?;
        OsFs.write_at(path, file, buf, pos)
    }
}

fn config(root: &Path) -> MessageStoreConfig {
    let mut c = small_config(root, 16 * 1024, FlushDiskType::SyncFlush);
    c.mapped_file_size_consume_queue = 20 * 32;
    c.max_hash_slot_num = 16;
    c.max_index_num = 64;
    c.sync_flush_timeout = 2_000;
    c
}

#[derive(Default)]
struct Model {
    /// Acknowledged (id, physical offset).
    acked: Vec<(u64, i64)>,
    /// Acknowledged ids per queue, in order.
    queues: HashMap<i32, Vec<u64>>,
    next_id: u64,
}

/// The invariants of the module comment, on a freshly recovered store.
fn check(store: &MessageStore, model: &Model) {
    verify_store(store, &model.acked);
    assert!(store.dispatcher().wait_caught_up(Duration::from_secs(20)));
    let end = store.max_phy_offset();
    for queue in store.dispatcher().consume_queues().all() {
        let mut at = queue.min_offset();
        while let Some(window) = queue.window_from(at) {
            for (_, unit) in window.iter() {
                if !unit.is_pre_blank() {
                    assert!(unit.end_offset() <= end, "unit {unit:?} past the end {end}");
                }
            }
            at = QueueOffset(at.0 + window.len() as i64);
        }
    }
    for (queue_id, ids) in &model.queues {
        // A read stops at the end of a ConsumeQueue file: read on from where it stopped.
        let mut stored: Vec<u64> = Vec::new();
        let mut from = QueueOffset(0);
        loop {
            let got = store
                .dispatcher()
                .get_message("g", "T", *queue_id, from, 10_000, None);
            stored.extend(got.messages.iter().map(|b| {
                let v = decode(b, true).unwrap();
                property(v.properties(), "ID")
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            }));
            if got.next_begin_offset <= from || got.next_begin_offset >= got.max_offset {
                break;
            }
            from = got.next_begin_offset;
        }
        // Acknowledged ids appear in order (unacknowledged survivors may sit between).
        let mut it = stored.iter();
        for id in ids {
            assert!(
                it.any(|s| s == id),
                "acknowledged {id} missing from queue {queue_id}: {stored:?}"
            );
        }
    }
}

fn put(store: &MessageStore, model: &mut Model, queue_id: i32) {
    let id = model.next_id;
    model.next_id += 1;
    let mut msg = message_for(id);
    msg.topic = "T".into();
    msg.queue_id = queue_id;
    let r = store.put_message(&msg).wait();
    if r.status == PutMessageStatus::PutOk {
        let a = r.append.unwrap();
        model.acked.push((id, a.wrote_offset.0));
        model.queues.entry(queue_id).or_default().push(id);
    }
}

/// Kills the file system, drops the store, restores the disk images, reopens.
fn crash(root: &Path, store: MessageStore, fs: &CrashFs) -> (MessageStore, Arc<CrashFs>) {
    fs.kill();
    drop(store);
    fs.restore();
    reopen(root)
}

fn reopen(root: &Path) -> (MessageStore, Arc<CrashFs>) {
    let fs = Arc::new(CrashFs::new(root, u64::MAX));
    let store = MessageStore::open_with_fs(config(root), Arc::clone(&fs) as Arc<dyn StoreFs>)
        .expect("recovery after a crash must succeed");
    (store, fs)
}

#[derive(Debug, Clone)]
enum Op {
    Put { queue: u8, count: u8 },
    Crash,
    CleanRestart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..3u8, 1..12u8).prop_map(|(queue, count)| Op::Put { queue, count }),
        2 => Just(Op::Crash),
        1 => Just(Op::CleanRestart),
    ]
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (mut store, mut fs) = reopen(root);
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Put { queue, count } => {
                for _ in 0..count {
                    put(&store, &mut model, i32::from(queue));
                }
            }
            Op::Crash => {
                (store, fs) = crash(root, store, &fs);
                check(&store, &model);
            }
            Op::CleanRestart => {
                store.shutdown().unwrap();
                drop(store);
                (store, fs) = reopen(root);
                assert!(store.last_exit_ok());
                check(&store, &model);
            }
        }
    }
    (store, _) = crash(root, store, &fs);
    check(&store, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn acknowledged_puts_survive_crashes(ops in proptest::collection::vec(op(), 1..12)) {
        run(ops);
    }
}

/// Crashes after each single file-system step of: open, puts that roll several
/// CommitLog, ConsumeQueue and index files, and a clean shutdown (checkpoint). Every
/// crash point must recover with every acknowledged put.
#[test]
fn a_crash_at_every_step_recovers() {
    let scenario = |root: &Path, die_after: u64| -> Model {
        let mut model = Model::default();
        let fs = Arc::new(CrashFs::new(root, die_after));
        let Ok(store) = MessageStore::open_with_fs(config(root), Arc::clone(&fs) as _) else {
            fs.restore();
            return model;
        };
        for i in 0..60 {
            put(&store, &mut model, i % 2);
        }
        let _ = store.shutdown();
        drop(store);
        fs.restore();
        model
    };
    // How many steps the whole scenario takes.
    let probe = tempfile::tempdir().unwrap();
    let steps = {
        let fs = Arc::new(CrashFs::new(probe.path(), u64::MAX));
        let store = MessageStore::open_with_fs(config(probe.path()), Arc::clone(&fs) as _).unwrap();
        let mut model = Model::default();
        for i in 0..60 {
            put(&store, &mut model, i % 2);
        }
        store.shutdown().unwrap();
        drop(store);
        fs.ops.load(Ordering::SeqCst)
    };
    assert!(steps > 20, "the scenario takes {steps} steps");
    // Every step early on (file creation, first rolls); then a stride to bound the time.
    let points: Vec<u64> = (0..steps.min(40)).chain((40..steps).step_by(7)).collect();
    for die_after in points {
        let dir = tempfile::tempdir().unwrap();
        let model = scenario(dir.path(), die_after);
        let (store, _fs) = reopen(dir.path());
        check(&store, &model);
    }
}
