//! Pull throughput with a SQL92 filter that matches 10% of a backlog against the
//! unfiltered pull, in messages *scanned* per second, in one run on one store (the
//! target: filtered at least 50% of unfiltered). Both read the whole queue through the
//! broker's store API with 32-message pulls following nextBeginOffset, as a consumer does.
//!
//! ```sh
//! cargo bench -p rmq-broker --bench sql92_pull            # N = 200000, 256-byte bodies
//! cargo bench -p rmq-broker --bench sql92_pull -- 500000 1024
//! ```
//! Files go under `$STORE_BENCH_DIR`, default /dev/shm when present.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::config::Config;
use broker::services::filter::MessageFilter;
use bytes::Bytes;
use protocol::message::{MessageSysFlag, PhysicalOffset, QueueOffset};
use store::commitlog::BrokerMessage;
use store::lookup::GetMessageStatus;
use store::{MessageStoreApi, PutMessageStatus};

const TOPIC: &str = "BenchSql";
const PULL: usize = 32;

/// The queue is filled through the store itself: the bench measures pull filtering, and
/// the broker's put path (fence, flush and replica rules) is not what is timed.
fn message(body: &Bytes, i: usize) -> BrokerMessage {
    let host: SocketAddr = "127.0.0.1:10911".parse().expect("literal address");
    BrokerMessage {
        topic: TOPIC.to_owned(),
        queue_id: 0,
        flag: 0,
        body: body.clone(),
        properties: format!(
            "UNIQ_KEY\u{1}7F000001000000000000{i:012X}\u{2}TAGS\u{1}TagA\u{2}KEYS\u{1}k{i}\u{2}\
             region\u{1}eu-{}\u{2}a\u{1}{}\u{2}CLUSTER\u{1}DefaultCluster",
            i % 3,
            i % 10
        ),
        sys_flag: MessageSysFlag(0),
        born_timestamp: 0,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: false,
    }
}

/// Reads the whole queue; returns (units scanned, messages delivered, time).
fn drain(store: &dyn MessageStoreApi, filter: &MessageFilter, n: i64) -> (i64, usize, Duration) {
    let started = Instant::now();
    let (mut offset, mut delivered) = (QueueOffset(0), 0);
    while offset.get() < n {
        let r = store.get_message(TOPIC, 0, offset, PULL, Some(filter));
        assert!(
            matches!(
                r.status,
                GetMessageStatus::Found | GetMessageStatus::NoMatchedMessage
            ),
            "{:?} at {offset:?}",
            r.status
        );
        delivered += r.messages.len();
        assert!(r.next_begin_offset > offset);
        offset = r.next_begin_offset;
    }
    (offset.get(), delivered, started.elapsed())
}

fn main() {
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
        "storePathRootDir={}\nmappedFileSizeCommitLog={}\n",
        dir.path().display(),
        512 * 1024 * 1024
    );
    let config = Config::from_properties(&text).expect("config");
    let store = store::MessageStore::open(config.store.clone()).expect("store");
    let store = Arc::new(store);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let body = Bytes::from(vec![b'x'; body_len]);
    rt.block_on(async {
        for i in 0..n {
            let r = store.put_message(&message(&body, i)).await;
            assert_eq!(r.status, PutMessageStatus::PutOk);
        }
    });
    let store: &dyn MessageStoreApi = &*store;
    while store.dispatch_behind_bytes() > 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let n = n as i64;
    let sql = MessageFilter::parse(
        Some("SQL92"),
        "a = 3 AND region IS NOT NULL",
        &Default::default(),
    )
    .expect("selector");
    // Warm the page cache and the code paths once, then measure each mode.
    drain(store, &MessageFilter::All, n);
    let (scanned_all, got_all, t_all) = drain(store, &MessageFilter::All, n);
    let (scanned_sql, got_sql, t_sql) = drain(store, &sql, n);
    assert_eq!(got_all as i64, n);
    assert_eq!(got_sql as i64, n / 10);
    store.shutdown().expect("store shutdown");

    let rate = |scanned: i64, d: Duration| scanned as f64 / d.as_secs_f64();
    println!("messages: {n}, body: {body_len} B, pulls of {PULL}");
    println!(
        "unfiltered: {:>10.0} scanned/s ({t_all:.2?}, {got_all} delivered)",
        rate(scanned_all, t_all)
    );
    println!(
        "SQL92 10%:  {:>10.0} scanned/s ({t_sql:.2?}, {got_sql} delivered), {:.0}% of unfiltered",
        rate(scanned_sql, t_sql),
        100.0 * rate(scanned_sql, t_sql) / rate(scanned_all, t_all)
    );
}
