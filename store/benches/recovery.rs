//! Abnormal CommitLog recovery with CRC checks: scan speed over ~1 GiB of 1 KiB messages
//! (page cache warm, as right after a process crash).
//!
//! `cargo bench -p rmq-store --bench recovery` (`$STORE_BENCH_DIR` as in the append bench;
//! `STORE_BENCH_CPU_TIME=1` times the recovering thread's CPU time instead of wall time).
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use protocol::message::{MessageSysFlag, PhysicalOffset};
use store::checkpoint::StoreCheckpoint;
use store::commitlog::{BrokerMessage, CommitLog};
use store::fs::OsFs;
use store::{FlushDiskType, MessageStoreConfig};

const FILE_SIZE: u32 = 128 * 1024 * 1024;
const DATA: u64 = 1024 * 1024 * 1024;

/// Monotonic wall time, or this thread's CPU time with `STORE_BENCH_CPU_TIME=1`.
fn clock() -> Duration {
    let cpu = std::env::var_os("STORE_BENCH_CPU_TIME").is_some_and(|v| v == "1");
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let id = if cpu {
        libc::CLOCK_THREAD_CPUTIME_ID
    } else {
        libc::CLOCK_MONOTONIC
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(id, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn recovery(c: &mut Criterion) {
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
    let dir = tempfile::tempdir_in(base).expect("bench dir");
    let mut config = MessageStoreConfig::with_root(dir.path());
    config.mapped_file_size_commit_log = FILE_SIZE;
    config.flush_disk_type = FlushDiskType::AsyncFlush;
    let msg = BrokerMessage {
        topic: "BenchmarkTest".into(),
        queue_id: 0,
        flag: 0,
        body: Bytes::from((0..1024u32).map(|i| (i * 7) as u8).collect::<Vec<_>>()),
        properties: "TAGS\u{1}TagA\u{2}".into(),
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse::<SocketAddr>().unwrap(),
        store_host: "127.0.0.1:10911".parse::<SocketAddr>().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: false,
    };
    let end = {
        let log = CommitLog::open(&config, Arc::new(OsFs)).expect("open");
        log.recover_normally(false).expect("recover");
        while (log.max_offset().0 as u64) < DATA {
            log.append(&msg).expect("append");
        }
        log.flush(0).expect("flush");
        log.max_offset().0 as u64
    };
    let checkpoint = StoreCheckpoint::open(&config.checkpoint_path()).expect("checkpoint");
    let mut group = c.benchmark_group("recovery");
    group.throughput(Throughput::Bytes(end));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("abnormal_crc_1GiB", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let log = CommitLog::open(&config, Arc::new(OsFs)).expect("open");
                let start = clock();
                // A zero checkpoint makes recovery start at the first file: a full scan.
                let r = log
                    .recover_abnormally(&checkpoint, false, true)
                    .expect("recover");
                total += clock() - start;
                assert_eq!(r.end.0 as u64, end);
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, recovery);
criterion_main!(benches);
