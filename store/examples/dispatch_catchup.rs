//! Dispatch throughput and memory benchmark (a bench binary, not a test).
//!
//! 1. Burst: writes `--bytes` (default 1 GiB) of 1 KiB-body messages through
//!    `MessageStore::put_message` while the reput thread dispatches concurrently, then
//!    measures how long `dispatch_behind_bytes` takes to reach 0 after the last put.
//! 2. Rebuild: shuts down, deletes `consumequeue/` and `index/`, opens the CommitLog and a
//!    fresh `Dispatcher` and times `start(0)`, which blocks until the reput has re-dispatched
//!    the whole CommitLog: the pure dispatch throughput.
//!
//! Anonymous RSS (`RssAnon`, i.e. heap, not page cache) is sampled before and after.
//!
//! Run: `cargo run --release -p rmq-store --example dispatch_catchup -- [--bytes N] [--dir PATH]`
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use protocol::message::{MessageSysFlag, PhysicalOffset};
use store::MessageStore;
use store::checkpoint::StoreCheckpoint;
use store::commitlog::{BrokerMessage, CommitLog};
use store::dispatch::{CommitLogReader, Dispatcher};
use store::fs::OsFs;

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of the whole process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live, writable rusage for the duration of the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn rss() -> String {
    format!(
        "RssAnon {} KiB, VmRSS {} KiB",
        status_kib("RssAnon:"),
        status_kib("VmRSS:")
    )
}

fn main() {
    let mut total: u64 = 1 << 30;
    let mut dir: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bytes" => total = args.next().and_then(|v| v.parse().ok()).expect("--bytes N"),
            "--dir" => dir = args.next().map(PathBuf::from),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    let temp = tempfile::tempdir_in(dir.unwrap_or_else(std::env::temp_dir)).expect("temp dir");
    let config = store::MessageStoreConfig::with_root(temp.path());

    let store = MessageStore::open(config.clone()).expect("open store");
    let anon_before = status_kib("RssAnon:");
    println!("after open:            {}", rss());

    let body = Bytes::from(vec![b'x'; 1024]);
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    let mut written = 0u64;
    let mut count = 0u64;
    let mut max_behind = 0u64;
    let start = Instant::now();
    while written < total {
        let msg = BrokerMessage {
            topic: "BenchTopic".into(),
            queue_id: (count % 8) as i32,
            flag: 0,
            body: body.clone(),
            properties: format!(
                "TAGS\u{1}TagA\u{2}KEYS\u{1}key{count}\u{2}UNIQ_KEY\u{1}7F000001{count:024X}"
            ),
            sys_flag: MessageSysFlag(0),
            born_timestamp: 1_700_000_000_000,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: PhysicalOffset(0),
            wait_store_msg_ok: false,
        };
        let result = store.put_message(&msg).wait();
        let append = result.append.expect("put failed");
        written += append.wrote_bytes as u64;
        count += 1;
        if count.is_multiple_of(4096) {
            max_behind = max_behind.max(store.dispatcher().dispatch_behind_bytes());
        }
    }
    let burst = start.elapsed();
    let caught_up_at = Instant::now();
    let behind_at_end = store.dispatcher().dispatch_behind_bytes();
    while store.dispatcher().dispatch_behind_bytes() > 0 {
        std::thread::sleep(Duration::from_micros(50));
    }
    let catch_up = caught_up_at.elapsed();
    let mib = written as f64 / (1024.0 * 1024.0);
    println!(
        "burst: {count} msgs, {mib:.0} MiB in {:.2} s ({:.0} MiB/s, {:.0} msgs/s)",
        burst.as_secs_f64(),
        mib / burst.as_secs_f64(),
        count as f64 / burst.as_secs_f64()
    );
    println!(
        "dispatch: max behind during burst {max_behind} B, behind at burst end {behind_at_end} B, \
         back to 0 after {:.3} ms",
        catch_up.as_secs_f64() * 1000.0
    );
    let anon_after = status_kib("RssAnon:");
    println!("after burst:           {}", rss());
    store.shutdown().expect("shutdown");
    drop(store);

    // Baseline: reopening with intact ConsumeQueues / index (nothing to re-dispatch).
    let reopen = Instant::now();
    let store = MessageStore::open(config.clone()).expect("reopen store");
    println!(
        "plain reopen (recovery, nothing to dispatch): {:.2} s",
        reopen.elapsed().as_secs_f64()
    );
    store.shutdown().expect("shutdown");
    drop(store);

    // Pure dispatch: fresh ConsumeQueues and index, reput of the whole CommitLog.
    std::fs::remove_dir_all(config.consume_queue_dir()).expect("remove consumequeue");
    std::fs::remove_dir_all(config.index_dir()).expect("remove index");
    let commit_log = Arc::new(CommitLog::open(&config, Arc::new(OsFs)).expect("open commitlog"));
    commit_log
        .recover_normally(false)
        .expect("recover commitlog");
    let checkpoint =
        Arc::new(StoreCheckpoint::open(&config.checkpoint_path()).expect("checkpoint"));
    let reader: Arc<dyn CommitLogReader> = commit_log.clone();
    let dispatcher = Dispatcher::open(&config, reader, checkpoint).expect("open dispatcher");
    dispatcher.recover(true).expect("recover dispatcher");
    let anon_before_rebuild = status_kib("RssAnon:");
    let rebuild = Instant::now();
    let cpu_before = cpu_seconds();
    dispatcher
        .start(PhysicalOffset(0))
        .expect("start dispatcher");
    let rebuild = rebuild.elapsed();
    let rebuild_cpu = cpu_seconds() - cpu_before;
    assert_eq!(dispatcher.dispatch_behind_bytes(), 0);
    println!(
        "rebuild (reput of the whole CommitLog into fresh CQ + index): {:.3} s, {:.0} MiB/s, {:.0} msgs/s",
        rebuild.as_secs_f64(),
        mib / rebuild.as_secs_f64(),
        count as f64 / rebuild.as_secs_f64()
    );
    println!(
        "rebuild CPU: {rebuild_cpu:.3} s user+sys (reput thread plus the waiting caller), \
         {:.0} msgs per CPU-second",
        count as f64 / rebuild_cpu.max(1e-9)
    );
    println!(
        "after rebuild:         {} (RssAnon {:+} KiB over the rebuild)",
        rss(),
        status_kib("RssAnon:") as i64 - anon_before_rebuild as i64
    );
    dispatcher.shutdown().expect("shutdown dispatcher");
    println!(
        "RssAnon growth over the burst: {} KiB for {count} messages ({:.2} B/msg)",
        anon_after as i64 - anon_before as i64,
        (anon_after as f64 - anon_before as f64) * 1024.0 / count as f64
    );
}
