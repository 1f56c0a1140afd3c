//! SYNC_FLUSH group commit under load: `<writers>` concurrent tasks each put 1 KiB
//! messages and await durability for `<seconds>`; prints throughput and ack latency
//! percentiles.
//!
//! `cargo run --release -p rmq-store --example sync_flush_bench -- [dir] [writers=64] [seconds=10]`
//! (dir defaults to a temporary directory under the current directory, i.e. a real disk).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use protocol::message::{MessageSysFlag, PhysicalOffset};
use store::commitlog::BrokerMessage;
use store::{FlushDiskType, MessageStore, MessageStoreConfig, PutMessageStatus};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = match args.first() {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir_in(".")?,
    };
    let writers: usize = args.get(1).map_or(Ok(64), |s| s.parse())?;
    let seconds: u64 = args.get(2).map_or(Ok(10), |s| s.parse())?;
    let mut config = MessageStoreConfig::with_root(dir.path());
    config.mapped_file_size_commit_log = 128 * 1024 * 1024;
    config.flush_disk_type = FlushDiskType::SyncFlush;
    config.warm_mapped_file_enable = true;
    config.max_hash_slot_num = 500_000;
    config.max_index_num = 2_000_000;
    let store = Arc::new(MessageStore::open(config)?);
    std::thread::sleep(Duration::from_millis(500));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let store = Arc::clone(&store);
            rt.spawn(async move {
                let msg = BrokerMessage {
                    topic: "BenchmarkTest".into(),
                    queue_id: (w % 8) as i32,
                    flag: 0,
                    body: Bytes::from(vec![b'x'; 1024]),
                    properties: "TAGS\u{1}TagA\u{2}".into(),
                    sys_flag: MessageSysFlag(0),
                    born_timestamp: 1_700_000_000_000,
                    born_host: "127.0.0.1:40000".parse::<SocketAddr>().expect("addr"),
                    store_host: "127.0.0.1:10911".parse::<SocketAddr>().expect("addr"),
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
                        other => panic!("put failed: {}", other.as_str()),
                    }
                }
                (latencies, timeouts)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut timeouts = 0;
    for t in tasks {
        let (l, to) = rt.block_on(t)?;
        all.extend(l);
        timeouts += to;
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "sync_flush writers={writers} acked={} timeouts={timeouts} throughput={:.0} msg/s p50={:?} p99={:?} p99.9={:?} max={:?}",
        all.len(),
        all.len() as f64 / elapsed,
        pct(0.50),
        pct(0.99),
        pct(0.999),
        all.last().copied().unwrap_or_default()
    );
    store.shutdown()?;
    Ok(())
}
