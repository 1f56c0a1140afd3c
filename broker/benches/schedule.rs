//! Schedule-service delivery rate against plain put rate, in one run on one store.
//!
//! 1. Plain: one task stores N messages with `put_message` (the same path the schedule
//!    service's re-puts take) — the reference rate.
//! 2. Delayed: N messages with DELAY=1 are parked in `SCHEDULE_TOPIC_XXXX` while the
//!    service is not running; once all are due the service starts and the time until
//!    level 1's offset reaches N is measured (one level, i.e. one delivery task: the
//!    slowest case; the levels run in parallel).
//!
//! ```sh
//! cargo bench -p rmq-broker --bench schedule            # N = 200000, 256-byte bodies
//! cargo bench -p rmq-broker --bench schedule -- 500000 1024
//! ```
//! Files go under `$STORE_BENCH_DIR`, default /dev/shm when present.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::config::Config;
use broker::metrics::Metrics;
use broker::services::Broker;
use broker::services::put_path::BrokerStore;
use broker::services::schedule;
use bytes::Bytes;
use protocol::message::{MessageSysFlag, PhysicalOffset, QueueOffset};
use store::PutMessageStatus;
use store::commitlog::BrokerMessage;

fn message(topic: &str, body: &Bytes, properties: String) -> BrokerMessage {
    let host: SocketAddr = "127.0.0.1:10911".parse().expect("literal address");
    BrokerMessage {
        topic: topic.to_owned(),
        queue_id: 0,
        flag: 0,
        body: body.clone(),
        properties,
        sys_flag: MessageSysFlag(0),
        born_timestamp: 0,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: false,
    }
}

fn props(n: usize, delay: bool) -> String {
    let delay = if delay { "\u{2}DELAY\u{1}1" } else { "" };
    format!("UNIQ_KEY\u{1}7F000001000000000000{n:012X}\u{2}TAGS\u{1}TagA{delay}")
}

fn main() {
    // `cargo bench` passes `--bench`; numbers are the optional positional arguments.
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(200_000);
    let body_len = args.get(1).copied().unwrap_or(256);
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
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog={}\nmessageDelayLevel=1s 5s\n",
        dir.path().display(),
        256 * 1024 * 1024
    );
    let config = Config::from_properties(&text).expect("config");
    let store = store::MessageStore::open(config.store.clone()).expect("store");
    let store: Arc<BrokerStore> = Arc::new(store);
    let broker = Broker::open(config, store, Arc::new(Metrics::new())).expect("broker");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let body = Bytes::from(vec![b'x'; body_len]);

    let plain = rt.block_on(async {
        let started = Instant::now();
        for i in 0..n {
            let r = broker
                .put(broker::services::put_path::Put::Message(message(
                    "BenchPlain",
                    &body,
                    props(i, false),
                )))
                .await;
            assert_eq!(r.status, PutMessageStatus::PutOk);
        }
        started.elapsed()
    });

    rt.block_on(async {
        for i in 0..n {
            let r = broker
                .put(broker::services::put_path::Put::Message(message(
                    "BenchDelayed",
                    &body,
                    props(i, true),
                )))
                .await;
            assert_eq!(r.status, PutMessageStatus::PutOk);
        }
    });
    // Every parked message due, everything dispatched.
    std::thread::sleep(Duration::from_millis(1_100));
    while broker.store.dispatch_behind_bytes() > 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let target = QueueOffset(n as i64);
    let started = Instant::now();
    let service = rt.spawn(schedule::run(Arc::clone(&broker)));
    while broker.schedule.offset(1) < target {
        std::thread::sleep(Duration::from_micros(200));
    }
    let delivered = started.elapsed();
    broker.shutdown.cancel();
    let _ = rt.block_on(service);
    // Both timings end when the records are appended; the ConsumeQueue follows.
    while broker.store.dispatch_behind_bytes() > 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(broker.store.max_offset_in_queue("BenchDelayed", 0), target);
    broker.store.shutdown().expect("store shutdown");

    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    println!("messages: {n}, body: {body_len} B");
    println!(
        "plain put:         {:>10.0} msg/s ({plain:.2?})",
        rate(plain)
    );
    println!(
        "schedule delivery: {:>10.0} msg/s ({delivered:.2?}), {:.0}% of plain put",
        rate(delivered),
        100.0 * rate(delivered) / rate(plain)
    );
}
