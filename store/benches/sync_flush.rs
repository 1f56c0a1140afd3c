//! SYNC_FLUSH put throughput: 16 writer threads each waiting for its put to be durable,
//! so group commit shares one msync among the waiters that queued meanwhile (the broker's
//! situation with many producers). The CommitLog write-through path and the flush
//! service's leader/follower barrier are what is timed.
//!
//! `cargo bench -p rmq-store --bench sync_flush` (files go to `$STORE_BENCH_DIR`, default
//! the system temp dir: on tmpfs an msync costs nothing and the bench would measure
//! nothing of the disk).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use protocol::message::{MessageSysFlag, PhysicalOffset};
use store::commitlog::BrokerMessage;
use store::{FlushDiskType, MessageStore, MessageStoreConfig};

const BODY: usize = 1024;
const WRITERS: u64 = 16;

fn message() -> BrokerMessage {
    BrokerMessage {
        topic: "BenchmarkSync".into(),
        queue_id: 0,
        flag: 0,
        body: Bytes::from(vec![b'x'; BODY]),
        properties: "TAGS\u{1}TagA\u{2}".into(),
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse::<SocketAddr>().expect("literal"),
        store_host: "127.0.0.1:10911".parse::<SocketAddr>().expect("literal"),
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: true,
    }
}

fn sync_flush(c: &mut Criterion) {
    let base = std::env::var_os("STORE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).expect("bench dir");
    let mut config = MessageStoreConfig::with_root(dir.path());
    config.mapped_file_size_commit_log = 256 * 1024 * 1024;
    config.flush_disk_type = FlushDiskType::SyncFlush;
    config.warm_mapped_file_enable = true;
    let store = MessageStore::open(config).expect("open");
    std::thread::sleep(Duration::from_millis(500));
    let msg = message();

    let mut group = c.benchmark_group("put_1k_sync_flush");
    group.throughput(Throughput::Elements(1));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(2));
    group.bench_function("store_put_message_16_writers", |b| {
        b.iter_custom(|iters| {
            let per_writer = iters.div_ceil(WRITERS);
            let start = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..WRITERS {
                    s.spawn(|| {
                        for _ in 0..per_writer {
                            let r = store.put_message(&msg).wait();
                            assert!(r.is_ok(), "{:?}", r.status);
                        }
                    });
                }
            });
            // Normalised to `iters` puts (the writers did up to WRITERS - 1 more).
            start
                .elapsed()
                .mul_f64(iters as f64 / (per_writer * WRITERS) as f64)
        })
    });
    group.finish();
    store.shutdown().expect("shutdown");
}

criterion_group!(benches, sync_flush);
criterion_main!(benches);
