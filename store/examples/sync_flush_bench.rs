//! SYNC_FLUSH group commit under load, judged against the disk it runs on.
//!
//! In one run, on the same filesystem:
//! 1. baseline: the latency of one 4 KiB write + fdatasync (pwrite into a preallocated
//!    file, as the CommitLog's files are preallocated) and of one 4 KiB mmap store + msync
//!    (what the group commit actually issues);
//! 2. `<writers>` concurrent tasks each put 1 KiB messages and await durability for
//!    `<seconds>`: throughput, ack latency percentiles, group commits and their mean size;
//! 3. the ratio of the achieved throughput to the bound `writers / fdatasync latency`
//!    (each writer has one put in flight, so at best every fdatasync acknowledges all of
//!    them), and to a *reference group commit* measured right before and right after the
//!    store run for as long: one thread writes `<writers>` 1 KiB records to a
//!    preallocated file with one pwrite and fdatasyncs them, over and over, as if every
//!    group held every writer. It is not a ceiling (the store overlaps the next group's
//!    writes with the current sync, this loop does not), but shared disks drift by
//!    several times within minutes, and it is measured next to the run;
//! 4. the process's OS thread count sampled during the run next to the count before the
//!    writers started: waiters are futures on two runtime threads, no thread is parked
//!    per request.
//!
//! `cargo run --release -p rmq-store --example sync_flush_bench -- [dir] [writers=64] [seconds=10]`
//! (dir defaults to a temporary directory under the current directory, i.e. a real disk).

use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use protocol::message::{MessageSysFlag, PhysicalOffset};
use store::commitlog::BrokerMessage;
use store::{FlushDiskType, MessageStore, MessageStoreConfig, PutMessageStatus};

const PAGE: usize = 4096;
/// Syncs per baseline measurement (about 1 s on a disk with ~4 ms syncs).
const BASELINE_SYNCS: usize = 250;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = match args.first() {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir_in(".")?,
    };
    let writers: usize = args.get(1).map_or(Ok(64), |s| s.parse())?;
    let seconds: u64 = args.get(2).map_or(Ok(10), |s| s.parse())?;

    let fdatasync = Latencies::new(baseline_fdatasync(dir.path())?);
    let msync = Latencies::new(baseline_msync(dir.path())?);
    println!(
        "baseline dir={} 4KiB-write+fdatasync: p50={:?} mean={:?} p99={:?} | 4KiB-mmap+msync: p50={:?} mean={:?} p99={:?}",
        dir.path().display(),
        fdatasync.pct(0.50),
        fdatasync.mean(),
        fdatasync.pct(0.99),
        msync.pct(0.50),
        msync.mean(),
        msync.pct(0.99),
    );

    let reference_before =
        reference_group_commit(dir.path(), "reference-before", writers, seconds)?;
    let run = group_commit_run(dir.path(), writers, seconds)?;
    let reference_after = reference_group_commit(dir.path(), "reference-after", writers, seconds)?;
    let acks = Latencies::new(run.latencies);
    let throughput = acks.len() as f64 / run.elapsed.as_secs_f64();
    let bound = writers as f64 / fdatasync.mean().as_secs_f64();
    println!(
        "sync_flush writers={writers} acked={} timeouts={} throughput={throughput:.0} msg/s p50={:?} p99={:?} p99.9={:?} max={:?}",
        acks.len(),
        run.timeouts,
        acks.pct(0.50),
        acks.pct(0.99),
        acks.pct(0.999),
        acks.max(),
    );
    println!(
        "group commits={} mean group={:.1} msgs mean interval={:?}",
        run.groups,
        acks.len() as f64 / run.groups.max(1) as f64,
        run.elapsed / u32::try_from(run.groups.max(1)).unwrap_or(u32::MAX),
    );
    println!(
        "bound writers/fdatasync={bound:.0} msg/s achieved/bound={:.2}",
        throughput / bound
    );
    let reference = (reference_before + reference_after) / 2.0;
    println!(
        "reference group commit (one thread: pwrite {writers} msgs + fdatasync, repeated) before/after: {reference_before:.0}/{reference_after:.0} msg/s achieved/reference={:.2}",
        throughput / reference
    );
    println!(
        "os threads: before writers={} max during run={} ({writers} writers as tasks on 2 runtime threads) -> {}",
        run.threads_before,
        run.threads_max,
        if run.threads_max <= run.threads_before {
            "no thread parked per request"
        } else {
            "THREADS GREW DURING THE RUN"
        }
    );
    Ok(())
}

struct Run {
    latencies: Vec<Duration>,
    timeouts: u64,
    elapsed: Duration,
    groups: u64,
    threads_before: usize,
    threads_max: usize,
}

fn group_commit_run(dir: &Path, writers: usize, seconds: u64) -> BenchResult<Run> {
    let mut config = MessageStoreConfig::with_root(dir.join("store"));
    config.mapped_file_size_commit_log = 128 * 1024 * 1024;
    config.flush_disk_type = FlushDiskType::SyncFlush;
    // RocketMQ's default (off). Warming writes each new file's zeros back while puts
    // wait for their syncs: measured here, the same throughput with a worst ack of
    // ~0.5 s instead of ~0.07 s. `WARM=1` turns it on.
    config.warm_mapped_file_enable = std::env::var_os("WARM").is_some();
    config.max_hash_slot_num = 500_000;
    config.max_index_num = 2_000_000;
    let store = Arc::new(MessageStore::open(config)?);
    std::thread::sleep(Duration::from_millis(500));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Let the runtime start its workers before counting.
    rt.block_on(tokio::task::yield_now());
    let threads_before = os_threads()?;
    let threads_max = Arc::new(AtomicUsize::new(threads_before));
    let groups_before = store.group_commits();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let sampler = {
        let threads_max = Arc::clone(&threads_max);
        rt.spawn(async move {
            while Instant::now() < deadline {
                if let Ok(n) = os_threads() {
                    threads_max.fetch_max(n, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let store = Arc::clone(&store);
            rt.spawn(async move { writer(&store, w, deadline).await })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut timeouts = 0;
    for t in tasks {
        let (l, to) = rt.block_on(t)??;
        latencies.extend(l);
        timeouts += to;
    }
    let elapsed = started.elapsed();
    rt.block_on(sampler)?;
    let groups = store.group_commits() - groups_before;
    store.shutdown()?;
    Ok(Run {
        latencies,
        timeouts,
        elapsed,
        groups,
        threads_before,
        threads_max: threads_max.load(Ordering::Relaxed),
    })
}

/// One writer: put, await durability, repeat until `deadline`.
async fn writer(
    store: &MessageStore,
    w: usize,
    deadline: Instant,
) -> Result<(Vec<Duration>, u64), String> {
    let addr = |s: &str| s.parse::<SocketAddr>().map_err(|e| e.to_string());
    let msg = BrokerMessage {
        topic: "BenchmarkTest".into(),
        queue_id: (w % 8) as i32,
        flag: 0,
        body: Bytes::from(vec![b'x'; 1024]),
        properties: "TAGS\u{1}TagA\u{2}".into(),
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_000,
        born_host: addr("127.0.0.1:40000")?,
        store_host: addr("127.0.0.1:10911")?,
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: true,
    };
    let mut latencies = Vec::new();
    let mut timeouts = 0u64;
    while Instant::now() < deadline {
        let t = Instant::now();
        let r = store.put_message(&msg).await;
        match r.status {
            PutMessageStatus::PutOk => latencies.push(t.elapsed()),
            PutMessageStatus::FlushDiskTimeout => timeouts += 1,
            other => return Err(format!("put failed: {}", other.as_str())),
        }
    }
    Ok((latencies, timeouts))
}

/// Msgs/s of the reference group commit: `writers` 1 KiB records written to a preallocated
/// file with one pwrite and synced together, back to back for `seconds` (the store's
/// SYNC_FLUSH write path, minus everything else).
fn reference_group_commit(
    dir: &Path,
    name: &str,
    writers: usize,
    seconds: u64,
) -> BenchResult<f64> {
    const FILE: usize = 64 * 1024 * 1024;
    let file = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(dir.join(name))?;
    for chunk in 0..FILE / (1024 * 1024) {
        file.write_all_at(&vec![0u8; 1024 * 1024], (chunk * 1024 * 1024) as u64)?;
    }
    file.sync_all()?;
    let group = vec![b'x'; writers * 1024];
    let (mut at, mut syncs) = (0usize, 0u64);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        if at + group.len() > FILE {
            at = 0;
        }
        file.write_all_at(&group, at as u64)?;
        file.sync_data()?;
        at += group.len();
        syncs += 1;
    }
    std::fs::remove_file(dir.join(name))?;
    Ok((syncs * writers as u64) as f64 / started.elapsed().as_secs_f64())
}

/// A file of `BASELINE_SYNCS` pages, written and synced once so the measured syncs
/// only carry data, like the store's preallocated files.
fn preallocated(dir: &Path, name: &str) -> BenchResult<File> {
    let file = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(dir.join(name))?;
    file.write_all_at(&vec![0u8; PAGE * BASELINE_SYNCS], 0)?;
    file.sync_all()?;
    Ok(file)
}

/// `BASELINE_SYNCS` × (4 KiB pwrite at the next page + fdatasync).
fn baseline_fdatasync(dir: &Path) -> BenchResult<Vec<Duration>> {
    let file = preallocated(dir, "baseline-fdatasync")?;
    let page = [b'x'; PAGE];
    let mut out = Vec::with_capacity(BASELINE_SYNCS);
    for i in 0..BASELINE_SYNCS {
        let t = Instant::now();
        file.write_all_at(&page, (i * PAGE) as u64)?;
        file.sync_data()?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// `BASELINE_SYNCS` × (4 KiB store into the next mapped page + msync of that page).
fn baseline_msync(dir: &Path) -> BenchResult<Vec<Duration>> {
    let file = preallocated(dir, "baseline-msync")?;
    // SAFETY: the file is private to this function and not resized while mapped.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&file)? };
    let mut out = Vec::with_capacity(BASELINE_SYNCS);
    for i in 0..BASELINE_SYNCS {
        let t = Instant::now();
        map[i * PAGE..(i + 1) * PAGE].fill(b'x');
        map.flush_range(i * PAGE, PAGE)?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// Threads of this process, from `/proc/self/status`.
fn os_threads() -> BenchResult<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .ok_or("no Threads line in /proc/self/status")?
        .trim()
        .parse()
        .map_err(Into::into)
}

/// Sorted latencies.
struct Latencies(Vec<Duration>);

impl Latencies {
    fn new(mut all: Vec<Duration>) -> Self {
        all.sort_unstable();
        Self(all)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn pct(&self, p: f64) -> Duration {
        let i = ((self.0.len() as f64 * p) as usize).min(self.0.len().saturating_sub(1));
        self.0.get(i).copied().unwrap_or_default()
    }

    fn mean(&self) -> Duration {
        let total: Duration = self.0.iter().sum();
        total / u32::try_from(self.0.len().max(1)).unwrap_or(u32::MAX)
    }

    fn max(&self) -> Duration {
        self.0.last().copied().unwrap_or_default()
    }
}
