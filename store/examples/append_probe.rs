//! Single-writer append loop for profiling (`perf record`): appends `<n>` 1 KiB messages
//! into one pre-faulted CommitLog file under `<dir>` and prints wall and CPU time per append.
//!
//! `cargo run --release -p rmq-store --example append_probe -- /dev/shm 500000`

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use protocol::message::{MessageSysFlag, PhysicalOffset};
use store::commitlog::{BrokerMessage, CommitLog};
use store::fs::OsFs;
use store::{FlushDiskType, MessageStoreConfig};

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn minor_faults() -> i64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_minflt
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = tempfile::tempdir_in(args.first().map_or("/dev/shm", String::as_str))?;
    let n: u64 = args.get(1).map_or(Ok(500_000), |s| s.parse())?;
    let mut config = MessageStoreConfig::with_root(dir.path());
    config.mapped_file_size_commit_log = 1 << 30;
    config.flush_disk_type = FlushDiskType::AsyncFlush;
    config.warm_mapped_file_enable = true;
    let log = CommitLog::open(&config, Arc::new(OsFs))?;
    log.recover_normally(false)?;
    let msg = BrokerMessage {
        topic: "BenchmarkTest".into(),
        queue_id: 0,
        flag: 0,
        body: Bytes::from(vec![b'x'; 1024]),
        properties: "TAGS\u{1}TagA\u{2}".into(),
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse::<SocketAddr>()?,
        store_host: "127.0.0.1:10911".parse::<SocketAddr>()?,
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: false,
    };
    log.append(&msg).map_err(|s| s.as_str())?;
    let faults = minor_faults();
    let (wall, cpu) = (Instant::now(), thread_cpu());
    for _ in 0..n {
        log.append(&msg).map_err(|s| s.as_str())?;
    }
    let (wall, cpu) = (wall.elapsed(), thread_cpu() - cpu);
    let faults = minor_faults() - faults;
    println!(
        "appends={n} page_faults={faults} wall={:.0} ns/op ({:.2} M msg/s) cpu={:.0} ns/op ({:.2} M msg/s)",
        wall.as_nanos() as f64 / n as f64,
        n as f64 / wall.as_secs_f64() / 1e6,
        cpu.as_nanos() as f64 / n as f64,
        n as f64 / cpu.as_secs_f64() / 1e6
    );
    Ok(())
}
