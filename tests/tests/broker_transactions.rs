//! Transactional messages end to end: `rocketmq-client-rust`'s `TransactionMQProducer`
//! against real `rmq-nameserver` + `rmq-broker` processes whose checker runs every
//! second. What consumers can read is checked with raw pulls of every queue, so a
//! message stored twice by the broker would show up twice.

#![recursion_limit = "256"]

#[path = "support/raw_tx.rs"]
mod raw_tx;
#[path = "support/rust_client.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use e2e::broker_harness;
use e2e::client::Client;
use e2e::metrics::{wait_check_rounds, wait_dispatched};
use e2e::wait::{Lazy, eventually, eventually_ok};
use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::message::record::records;
use protocol::message::{MessageSysFlag, TransactionType, parse_offset_msg_id};
use rocketmq_client_rust::{LocalTransactionState, TransactionListener, TransactionMQProducer};
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::common::message::message_ext::MessageExt;
use support::{Cluster, client_config, client_runtime, msg, runtime, within};

/// Checker every second, half messages older than a second are checked.
const CHECKER_CONF: &[(&str, &str)] = &[
    ("transactionCheckInterval", "1000"),
    ("transactionTimeOut", "1000"),
    ("transactionCheckMax", "15"),
];

fn start_cluster() -> Cluster {
    Cluster::start(CHECKER_CONF)
}

fn db(cluster: &Cluster) -> FileDb {
    FileDb(cluster.dir().join("local-transactions.db"))
}

/// The producer application's "database": one `body decision` line per transaction,
/// in a file, so another producer instance can read what an earlier one decided.
#[derive(Clone)]
struct FileDb(PathBuf);

impl FileDb {
    fn put(&self, key: &str, decision: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.0)
            .expect("open db");
        writeln!(f, "{key} {decision}").expect("write db");
        f.sync_all().expect("sync db");
    }

    fn get(&self, key: &str) -> Option<String> {
        let text = std::fs::read_to_string(&self.0).ok()?;
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(k, _)| *k == key)
            .map(|(_, d)| d.to_owned())
            .next_back()
    }
}

fn state_of(decision: &str) -> LocalTransactionState {
    match decision {
        "commit" => LocalTransactionState::CommitMessage,
        "rollback" => LocalTransactionState::RollbackMessage,
        _ => LocalTransactionState::Unknown,
    }
}

/// What the local transaction does when the half message is stored. The decision is
/// the body's prefix (`commit-…` / `rollback-…`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Execute {
    /// Records the decision and reports it.
    Report,
    /// Records the decision but reports unknown (the report is "lost").
    RecordOnly,
}

struct Listener {
    db: FileDb,
    execute: Execute,
    /// Whether check-backs consult the database (else they answer unknown).
    answer_checks: bool,
    checks: Arc<AtomicUsize>,
}

fn body_text(bytes: Option<&[u8]>) -> String {
    String::from_utf8_lossy(bytes.unwrap_or_default()).into_owned()
}

impl TransactionListener for Listener {
    fn execute_local_transaction(
        &self,
        msg: &dyn MessageTrait,
        _arg: Option<&(dyn std::any::Any + Send + Sync)>,
    ) -> LocalTransactionState {
        let body = body_text(msg.get_body().map(|b| b.as_ref()));
        let decision = body.split('-').next().unwrap_or("").to_owned();
        self.db.put(&body, &decision);
        match self.execute {
            Execute::Report => state_of(&decision),
            Execute::RecordOnly => LocalTransactionState::Unknown,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checks.fetch_add(1, Ordering::SeqCst);
        if !self.answer_checks {
            return LocalTransactionState::Unknown;
        }
        let body = body_text(msg.get_body().map(|b| b.as_ref()));
        self.db
            .get(&body)
            .map_or(LocalTransactionState::Unknown, |d| state_of(&d))
    }
}

/// A transactional producer whose listener uses the cluster's database file; the counter
/// counts the check-backs it answered.
async fn tx_producer(
    cluster: &Cluster,
    group: &str,
    instance: &'static str,
    execute: Execute,
    answer_checks: bool,
) -> (TransactionMQProducer, Arc<AtomicUsize>) {
    let namesrv = &cluster.namesrv();
    let checks = Arc::new(AtomicUsize::new(0));
    let listener = Listener {
        db: db(cluster),
        execute,
        answer_checks,
        checks: Arc::clone(&checks),
    };
    let mut p = TransactionMQProducer::builder(client_runtime(instance))
        .client_config(client_config(namesrv, instance))
        .producer_group(group.to_owned())
        .name_server_addr(namesrv.to_owned())
        .send_msg_timeout(5_000)
        .transaction_listener(listener)
        .build();
    within("producer start", Duration::from_secs(30), p.start())
        .await
        .expect("producer start");
    (p, checks)
}

async fn send(p: &TransactionMQProducer, topic: &str, body: &str) {
    let r = within(
        "transactional send",
        Duration::from_secs(15),
        p.send_message_in_transaction::<(), _>(msg(topic, "TagTx", body.as_bytes()), None),
    )
    .await
    .expect("transactional send");
    assert!(r.send_result.is_some(), "no send result for {body}");
}

/// A stored message of the real topic as a consumer would pull it.
#[derive(Debug, Clone)]
struct Delivered {
    body: String,
    sys_flag: MessageSysFlag,
    prepared_offset: i64,
    properties: String,
}

/// Every message of `topic` (queues 0..8), pulled from offset 0.
async fn delivered(port: u16, topic: &str) -> Vec<Delivered> {
    let client = Client::connect(port).await.expect("connect");
    let mut out = Vec::new();
    for queue_id in 0..8 {
        let mut offset = 0;
        loop {
            let pull = broker_harness::pull("CG_TX_CHECK", topic, queue_id, offset, 32, None, "*");
            let r = client.request(pull).await.expect("pull");
            if r.code != response::SUCCESS {
                break;
            }
            let mut n = 0;
            for v in records(&r.body, true) {
                let v = v.expect("well-formed record");
                out.push(Delivered {
                    body: String::from_utf8_lossy(v.body()).into_owned(),
                    sys_flag: v.sys_flag(),
                    prepared_offset: v.prepared_transaction_offset().get(),
                    properties: v.properties().to_owned(),
                });
                offset = v.queue_offset().get() + 1;
                n += 1;
            }
            if n == 0 {
                break;
            }
        }
    }
    client.close().await;
    out
}

fn counts(messages: &[Delivered]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for d in messages {
        *m.entry(d.body.clone()).or_insert(0) += 1;
    }
    m
}

/// Polls until `topic` holds every body of `want` (each once), or panics.
async fn wait_delivered(
    port: u16,
    topic: &str,
    want: &[&str],
    limit: Duration,
    log: impl Fn() -> String,
) {
    let what = format!("{want:?} delivered to {topic}");
    let log = &log;
    eventually_ok(limit, &what, || async {
        let c = counts(&delivered(port, topic).await);
        if want.iter().all(|w| c.contains_key(*w)) {
            Ok(())
        } else {
            Err(Lazy(move || format!("{c:?}\n{}", log())))
        }
    })
    .await;
}

/// Waits until the checker has run two more rounds (one entirely after this call) and
/// the broker has dispatched everything it stored: a half message the checker wrongly
/// checked again, or a decision stored twice, would be pullable by then.
async fn settled(http_port: u16) {
    wait_check_rounds(http_port, 2, Duration::from_secs(20)).await;
    wait_dispatched(http_port, Duration::from_secs(10)).await;
}

fn assert_exactly(messages: &[Delivered], want: &[&str]) {
    let c = counts(messages);
    let expected: BTreeMap<String, usize> = want.iter().map(|w| ((*w).to_owned(), 1)).collect();
    assert_eq!(c, expected, "delivered messages (body -> times)");
}

async fn metric(port: u16, name: &str) -> f64 {
    let (status, text) = e2e::http::get(port, "/metrics").await.expect("metrics");
    assert_eq!(status, 200);
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Commit: delivered once, as a COMMIT record pointing at its half message, without the
/// transaction routing properties. Rollback: never. A repeated commit of the same half
/// message stores nothing more; a commit naming the wrong group is refused.
#[test]
fn commit_delivers_once_and_rollback_never() {
    let cluster = start_cluster();
    let port = cluster.broker.port;
    let log = || cluster.broker.log();
    runtime().block_on(async {
        let (mut p, _) =
            tx_producer(&cluster, "PG_TX_COMMIT", "tx-commit", Execute::Report, true).await;
        for i in 0..3 {
            send(&p, "TxCommit", &format!("commit-{i}")).await;
            send(&p, "TxCommit", &format!("rollback-{i}")).await;
        }
        let want = ["commit-0", "commit-1", "commit-2"];
        wait_delivered(port, "TxCommit", &want, Duration::from_secs(10), log).await;
        // Two more checker rounds: nothing else may appear.
        settled(cluster.broker.http_port).await;
        let got = delivered(port, "TxCommit").await;
        assert_exactly(&got, &want);
        // Each committed copy points at its own half message (the first may sit at 0).
        let halves: std::collections::HashSet<_> = got.iter().map(|d| d.prepared_offset).collect();
        assert_eq!(halves.len(), got.len(), "{got:?}");
        for d in &got {
            assert_eq!(
                d.sys_flag.transaction_type(),
                TransactionType::Commit,
                "{d:?}"
            );
            for gone in ["TRAN_MSG", "REAL_TOPIC", "REAL_QID"] {
                assert!(
                    broker_harness::property(&d.properties, gone).is_none(),
                    "{gone} in {d:?}"
                );
            }
            assert_eq!(
                broker_harness::property(&d.properties, "PGROUP"),
                Some("PG_TX_COMMIT")
            );
        }
        assert_eq!(
            metric(cluster.broker.http_port, "rocketmq_transaction_commits").await,
            3.0
        );
        assert_eq!(
            metric(cluster.broker.http_port, "rocketmq_transaction_rollbacks").await,
            3.0
        );
        p.shutdown().await;

        // Raw protocol: a half message committed twice, and with a wrong group.
        let client = Client::connect(port).await.expect("connect");
        let props = broker_harness::properties(&[
            ("TRAN_MSG", "true"),
            ("PGROUP", "PG_E2E"),
            ("UNIQ_KEY", "7F0000010000000000000000000A0001"),
            ("TAGS", "raw"),
        ]);
        let mut half = broker_harness::send_v2("TxCommit", 0, b"raw-twice", &props);
        half.ext_fields
            .insert("f", MessageSysFlag::TRANSACTION_PREPARED_TYPE.to_string());
        let sent = client.request(half).await.expect("send half");
        assert_eq!(sent.code, response::SUCCESS, "{:?}", sent.remark);
        let offset_msg_id = sent.ext_fields.get("msgId").expect("msgId").to_owned();
        let queue_offset = sent
            .ext_fields
            .get("queueOffset")
            .expect("queueOffset")
            .to_owned();
        let (_, commit_log_offset) = parse_offset_msg_id(&offset_msg_id).expect("offset msg id");
        let end = |group: &str| {
            broker_harness::with_fields(
                request::END_TRANSACTION,
                &[
                    ("producerGroup", group.to_owned()),
                    ("tranStateTableOffset", queue_offset.clone()),
                    ("commitLogOffset", commit_log_offset.get().to_string()),
                    ("commitOrRollback", "8".to_owned()),
                    ("fromTransactionCheck", "false".to_owned()),
                    ("msgId", "7F0000010000000000000000000A0001".to_owned()),
                ],
            )
        };
        let wrong: RemotingCommand = client.request(end("PG_OTHER")).await.expect("end");
        assert_eq!(wrong.code, response::SYSTEM_ERROR);
        assert_eq!(wrong.remark.as_deref(), Some("The producer group wrong"));
        for _ in 0..2 {
            let r = client.request(end("PG_E2E")).await.expect("end");
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        client.close().await;
        let mut want_all = want.to_vec();
        want_all.push("raw-twice");
        wait_delivered(port, "TxCommit", &want_all, Duration::from_secs(10), log).await;
        settled(cluster.broker.http_port).await;
        assert_exactly(&delivered(port, "TxCommit").await, &want_all);
    });
}

/// The local transaction's answer is lost (unknown): nothing is visible until the
/// broker's check-back asks the producer, which answers commit.
#[test]
fn unknown_then_check_back_commit_is_delivered_once() {
    let cluster = start_cluster();
    let port = cluster.broker.port;
    let log = || cluster.broker.log();
    runtime().block_on(async {
        let (mut p, checks) = tx_producer(
            &cluster,
            "PG_TX_UNKNOWN",
            "tx-unknown",
            Execute::RecordOnly,
            true,
        )
        .await;
        send(&p, "TxUnknown", "commit-u").await;
        send(&p, "TxUnknown", "rollback-u").await;
        assert!(
            delivered(port, "TxUnknown").await.is_empty(),
            "visible before any decision"
        );
        wait_delivered(
            port,
            "TxUnknown",
            &["commit-u"],
            Duration::from_secs(15),
            log,
        )
        .await;
        assert!(checks.load(Ordering::SeqCst) >= 1);
        settled(cluster.broker.http_port).await;
        assert_exactly(&delivered(port, "TxUnknown").await, &["commit-u"]);
        assert!(metric(cluster.broker.http_port, "rocketmq_transaction_check_backs").await >= 2.0);
        p.shutdown().await;
    });
}

/// The producer that sent the half messages goes away without reporting; a new
/// producer instance of the group answers the check-backs from the database file.
#[test]
fn restarted_producer_decides_from_its_database() {
    let cluster = start_cluster();
    let port = cluster.broker.port;
    let log = || cluster.broker.log();
    runtime().block_on(async {
        let (mut first, _) = tx_producer(
            &cluster,
            "PG_TX_RESTART",
            "tx-restart-1",
            Execute::RecordOnly,
            false,
        )
        .await;
        send(&first, "TxRestart", "commit-r").await;
        send(&first, "TxRestart", "rollback-r").await;
        first.shutdown().await;

        let (mut second, checks) = tx_producer(
            &cluster,
            "PG_TX_RESTART",
            "tx-restart-2",
            Execute::Report,
            true,
        )
        .await;
        // Its own transaction gives the new instance a route to (and heartbeats with)
        // the broker.
        send(&second, "TxRestart", "commit-warmup").await;
        wait_delivered(
            port,
            "TxRestart",
            &["commit-warmup", "commit-r"],
            Duration::from_secs(20),
            log,
        )
        .await;
        assert!(
            checks.load(Ordering::SeqCst) >= 1,
            "the new instance was not asked"
        );
        settled(cluster.broker.http_port).await;
        assert_exactly(
            &delivered(port, "TxRestart").await,
            &["commit-r", "commit-warmup"],
        );
        second.shutdown().await;
    });
}

/// The broker is SIGKILLed after storing half messages and before any decision reached
/// it (the producer's checks answered unknown meanwhile); after the restart its checker
/// resumes and the producer's database decides. Stale checker progress after the kill
/// re-checks copies, so the producer answers commit more than once: still one message.
#[test]
fn broker_killed_between_half_and_commit_check_decides_after_restart() {
    let mut cluster = start_cluster();
    let port = cluster.broker.port;
    runtime().block_on(async {
        let (mut first, first_checks) = tx_producer(
            &cluster,
            "PG_TX_KILL",
            "tx-kill-1",
            Execute::RecordOnly,
            false,
        )
        .await;
        send(&first, "TxKill", "commit-k").await;
        send(&first, "TxKill", "rollback-k").await;
        // Let the checker copy the half messages at least once before the kill.
        eventually(
            Duration::from_secs(10),
            "a check-back of both halves before the kill",
            || async { first_checks.load(Ordering::SeqCst) >= 2 },
        )
        .await;
        cluster.broker.kill9();
        first.shutdown().await;
        assert!(delivered_after_restart_is_empty(&mut cluster).await);

        let (mut second, _) =
            tx_producer(&cluster, "PG_TX_KILL", "tx-kill-2", Execute::Report, true).await;
        send(&second, "TxKill", "commit-warmup").await;
        let log = || cluster.broker.log();
        wait_delivered(
            port,
            "TxKill",
            &["commit-k", "commit-warmup"],
            Duration::from_secs(20),
            log,
        )
        .await;
        settled(cluster.broker.http_port).await;
        assert_exactly(
            &delivered(port, "TxKill").await,
            &["commit-k", "commit-warmup"],
        );
        second.shutdown().await;
    });
}

/// Restarts the killed broker and reports whether the real topic is still empty.
async fn delivered_after_restart_is_empty(cluster: &mut Cluster) -> bool {
    // The harness waits for readiness on a runtime of its own.
    tokio::task::block_in_place(|| cluster.broker.restart());
    delivered(cluster.broker.port, "TxKill").await.is_empty()
}

// --- Transactions identified by what the broker stored, not by UNIQ_KEY ---------------

/// Answers every check-back from `decisions` (body -> decision) until `topic` holds
/// every body of `want`.
async fn resolve_until(
    p: &mut raw_tx::RawTx,
    decisions: &BTreeMap<String, i32>,
    port: u16,
    topic: &str,
    want: &[String],
    limit: Duration,
) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let c = counts(&delivered(port, topic).await);
        if want.iter().all(|w| c.contains_key(w)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not all of {want:?} delivered to {topic}: {c:?}"
        );
        if let Some(check) = p
            .check_back(Duration::from_millis(500))
            .await
            .expect("check-back")
        {
            let decision = *decisions.get(&check.body).expect("a body this test sent");
            let r = p.end(check.half, decision, true).await.expect("answer");
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
    }
}

fn assert_exactly_owned(messages: &[Delivered], want: &[String]) {
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    assert_exactly(messages, &want);
}

async fn raw_producer(port: u16, group: &str) -> raw_tx::RawTx {
    raw_tx::RawTx::connect(port, [127, 0, 0, 1].into(), group, None)
        .await
        .expect("producer connects")
}

/// One `UNIQ_KEY` for four transactions (a Java producer re-sending one `Message`
/// object): commit, commit, rollback, commit. Every commit is delivered once; the
/// rollback never, and it drops no other transaction's commit.
#[test]
fn reused_keys_across_commits_and_rollbacks_deliver_every_commit_once() {
    let cluster = start_cluster();
    let port = cluster.broker.port;
    runtime().block_on(async {
        let mut p = raw_producer(port, "PG_TX_REUSE").await;
        let plan = [
            ("reuse-a", raw_tx::COMMIT),
            ("reuse-b", raw_tx::COMMIT),
            ("reuse-c", raw_tx::ROLLBACK),
            ("reuse-d", raw_tx::COMMIT),
        ];
        for (body, decision) in plan {
            let half = p.send_half("TxReuse", body, "SAMEKEY").await.expect("half");
            let r = p.end(half, decision, false).await.expect("end");
            assert_eq!(r.code, response::SUCCESS, "{body}: {:?}", r.remark);
        }
        let want = ["reuse-a", "reuse-b", "reuse-d"];
        wait_delivered(port, "TxReuse", &want, Duration::from_secs(10), || {
            cluster.broker.log()
        })
        .await;
        settled(cluster.broker.http_port).await;
        assert_exactly(&delivered(port, "TxReuse").await, &want);
    });
}

/// A transaction whose END_TRANSACTION was lost is asked about by check-back, though
/// another transaction with its `UNIQ_KEY` was decided: its producer's answer decides it.
#[test]
fn a_lost_end_transaction_is_resolved_by_check_back() {
    let cluster = start_cluster();
    let port = cluster.broker.port;
    runtime().block_on(async {
        let mut p = raw_producer(port, "PG_TX_LOST").await;
        let decided = p.send_half("TxLost", "lost-a", "KEY").await.expect("half");
        let r = p.end(decided, raw_tx::COMMIT, false).await.expect("end");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        // Two more with the same key whose END_TRANSACTION never arrives.
        p.send_half("TxLost", "lost-b", "KEY").await.expect("half");
        p.send_half("TxLost", "lost-c", "KEY").await.expect("half");
        let decisions: BTreeMap<String, i32> = [
            ("lost-a".to_owned(), raw_tx::COMMIT),
            ("lost-b".to_owned(), raw_tx::COMMIT),
            ("lost-c".to_owned(), raw_tx::ROLLBACK),
        ]
        .into();
        let want = vec!["lost-a".to_owned(), "lost-b".to_owned()];
        resolve_until(
            &mut p,
            &decisions,
            port,
            "TxLost",
            &want,
            Duration::from_secs(20),
        )
        .await;
        settled(cluster.broker.http_port).await;
        assert_exactly_owned(&delivered(port, "TxLost").await, &want);
    });
}

/// xorshift64*: the randomized test's generator (seeded, reproducible).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Sends, commits, rollbacks and lost END_TRANSACTIONs, with keys reused across
/// transactions or unique, interleaved with kill -9 of the broker: every committed
/// message is delivered exactly once and no rolled-back one ever is. The seed is printed;
/// `RMQ_TX_SEED=<n>` replays a run.
#[test]
fn randomized_transactions_with_reused_keys_and_kill9() {
    let seed = std::env::var("RMQ_TX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("randomized transactions: seed={seed} (RMQ_TX_SEED={seed} replays it)");
    let mut rng = Rng(seed);
    let mut cluster = start_cluster();
    let port = cluster.broker.port;
    const OPS: usize = 40;
    runtime().block_on(async {
        let mut p = raw_producer(port, "PG_TX_RANDOM").await;
        let mut decisions = BTreeMap::new();
        for i in 0..OPS {
            if i == OPS / 3 || i == 2 * OPS / 3 {
                cluster.broker.kill9();
                tokio::task::block_in_place(|| cluster.broker.restart());
                p = raw_producer(port, "PG_TX_RANDOM").await;
            }
            let commit = rng.chance(50);
            let decision = if commit {
                raw_tx::COMMIT
            } else {
                raw_tx::ROLLBACK
            };
            let body = format!("{}-{i}", if commit { "commit" } else { "rollback" });
            let key = if rng.chance(60) {
                format!("REUSED{}", rng.next() % 3)
            } else {
                format!("UNIQUE{i}")
            };
            let half = p.send_half("TxRandom", &body, &key).await.expect("half");
            decisions.insert(body.clone(), decision);
            if rng.chance(30) {
                continue; // END_TRANSACTION lost: the check-back decides.
            }
            let r = p.end(half, decision, false).await.expect("end");
            assert_eq!(r.code, response::SUCCESS, "{body}: {:?}", r.remark);
        }
        let want: Vec<String> = decisions
            .iter()
            .filter(|(_, d)| **d == raw_tx::COMMIT)
            .map(|(b, _)| b.clone())
            .collect();
        resolve_until(
            &mut p,
            &decisions,
            port,
            "TxRandom",
            &want,
            Duration::from_secs(40),
        )
        .await;
        settled(cluster.broker.http_port).await;
        assert_exactly_owned(&delivered(port, "TxRandom").await, &want);
    });
}
