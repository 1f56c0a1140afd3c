//! Append throughput of 1 KiB messages from one writer under ASYNC_FLUSH with pre-faulted
//! (warmed, preallocated) files: the CommitLog write path alone, and the whole
//! `MessageStore::put_message` (dispatch building ConsumeQueues in the background).
//!
//! `cargo bench -p rmq-store --bench append` (files go to `$STORE_BENCH_DIR`, default a
//! temporary directory under /dev/shm when it exists, else the system temp dir).
//! On a machine shared with other work, `STORE_BENCH_CPU_TIME=1` times the writer
//! thread's CPU time instead of wall time (background flush / allocation / dispatch
//! threads are then not charged to the writer).
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use protocol::message::{MessageSysFlag, PhysicalOffset};
use store::commitlog::{BrokerMessage, CommitLog};
use store::fs::OsFs;
use store::{FlushDiskType, MessageStore, MessageStoreConfig};

const BODY: usize = 1024;
const FILE_SIZE: u32 = 256 * 1024 * 1024;
/// A fresh store is made (outside the timing) after this many bytes, to bound disk use.
const ROTATE_BYTES: u64 = 3 * 1024 * 1024 * 1024;

fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var_os("STORE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            if shm.is_dir() {
                shm
            } else {
                std::env::temp_dir()
            }
        });
    tempfile::tempdir_in(base).expect("bench dir")
}

fn config(root: &std::path::Path) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::with_root(root);
    c.mapped_file_size_commit_log = FILE_SIZE;
    c.flush_disk_type = FlushDiskType::AsyncFlush;
    c.warm_mapped_file_enable = true;
    c.max_hash_slot_num = 500_000;
    c.max_index_num = 2_000_000;
    c
}

/// Wall clock, or the calling thread's CPU clock with `STORE_BENCH_CPU_TIME=1`.
#[derive(Clone, Copy)]
struct Clock(bool);

impl Clock {
    fn from_env() -> Self {
        Self(std::env::var_os("STORE_BENCH_CPU_TIME").is_some_and(|v| v == "1"))
    }

    fn now(self) -> Duration {
        if self.0 {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: clock_gettime writes into the timespec we own.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
        } else {
            static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            START.get_or_init(Instant::now).elapsed()
        }
    }
}

fn message() -> BrokerMessage {
    BrokerMessage {
        topic: "BenchmarkTest".into(),
        queue_id: 0,
        flag: 0,
        body: Bytes::from(vec![b'x'; BODY]),
        properties: "TAGS\u{1}TagA\u{2}".into(),
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse::<SocketAddr>().unwrap(),
        store_host: "127.0.0.1:10911".parse::<SocketAddr>().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: true,
    }
}

/// Keeps one open target and replaces it when it has taken `ROTATE_BYTES`.
struct Rotating<T> {
    open: fn(&std::path::Path) -> T,
    current: Option<(T, tempfile::TempDir)>,
    written: u64,
}

impl<T> Rotating<T> {
    fn get(&mut self, upcoming: u64) -> &T {
        if self.current.is_none() || self.written + upcoming > ROTATE_BYTES {
            self.current = None;
            let dir = bench_dir();
            let target = (self.open)(dir.path());
            // Let the allocator prepare and warm the next file before timing starts.
            std::thread::sleep(Duration::from_millis(500));
            self.current = Some((target, dir));
            self.written = 0;
        }
        self.written += upcoming;
        self.current.as_ref().map(|c| &c.0).expect("opened")
    }
}

fn append(c: &mut Criterion) {
    let msg = message();
    let clock = Clock::from_env();
    let record = 91 + BODY + msg.topic.len() + msg.properties.len();
    let mut group = c.benchmark_group("append_1k_async");
    group.throughput(Throughput::Elements(1));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(2));

    let mut log = Rotating {
        open: |root| {
            let c = config(root);
            let log = CommitLog::open(&c, Arc::new(OsFs)).expect("open");
            log.recover_normally(false).expect("recover");
            log
        },
        current: None,
        written: 0,
    };
    group.bench_function("commitlog_append", |b| {
        b.iter_custom(|iters| {
            let log = log.get(iters * record as u64);
            let start = clock.now();
            for _ in 0..iters {
                log.append(&msg).expect("append");
            }
            clock.now() - start
        })
    });
    drop(log);

    let mut store = Rotating {
        open: |root| MessageStore::open(config(root)).expect("open"),
        current: None,
        written: 0,
    };
    group.bench_function("store_put_message", |b| {
        b.iter_custom(|iters| {
            let store = store.get(iters * record as u64);
            let start = clock.now();
            for _ in 0..iters {
                let r = store.put_message(&msg).wait();
                debug_assert!(r.is_ok());
            }
            clock.now() - start
        })
    });
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
