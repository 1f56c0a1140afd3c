//! The randomized fault checker (issue 15): a real nameserver and a SYNC_MASTER +
//! SYNC_FLUSH group of `rmq-broker` processes driven by the operator's own failover
//! machine (`e2e::failover_sim`), producers writing unique keys and recording each send's
//! outcome, and a seeded random schedule of faults: SIGKILL of the master or a slave,
//! SIGSTOP/SIGCONT of either (a long pause gets the master replaced while it is frozen),
//! and switchovers under load. After healing, a consumer reads every queue from the
//! master and the history is checked:
//!
//! * **lost**: acknowledged SEND_OK but not readable;
//! * **moved**: acknowledged, but read at another queue offset than its SEND_OK named;
//! * **duplicated**: read at more than one queue position;
//! * **reordered**: two acknowledged sends of one producer (one queue, one at a time)
//!   read in the opposite order;
//! * **phantom**: read but never sent.
//!
//! SYNC mode must show zero of each. ASYNC_MASTER may lose acknowledged messages in a
//! failover, but only the ones its promotion reported (`bytesLost`): each lost message
//! must lie in the tail the promoted replica lacked. CI runs a short fixed-seed schedule
//! of each; a long one runs by hand, replaying a failure by its seed:
//! `RMQ_CHECKER_FAULTS=60 RMQ_CHECKER_SEED=7 cargo test -p rmq-e2e-tests --test
//! broker_fault_checker -- --nocapture`. Network partitions are covered by
//! `broker_partition.rs` (netns, root only).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::broker_harness::{decode_records, pull, send_v2};
use e2e::failover_sim::{Driver, SimGroup, epochs};
use e2e::nameserver::Options;
use e2e::wait::runtime;
use e2e::{Client, NameServer};
use operator::admin::Admin;
use operator::crd::{AckMode, FailoverPolicy, FailoverSpec, FailoverTrigger};
use operator::failover::{BlockedReason, Phase, Request};
use protocol::code::response;

const TOPIC: &str = "CheckT";
const QUEUES: i32 = 4;
/// One producer per queue, so a producer's sends are ordered within its queue.
const PRODUCERS: usize = 4;
const SEND_TIMEOUT: Duration = Duration::from_secs(3);

const BROKER_CONF: &[(&str, &str)] = &[
    ("haSecret", "checker-secret"),
    ("flushDiskType", "SYNC_FLUSH"),
    ("syncFlushTimeout", "1500"),
    ("slaveSyncInterval", "300"),
    ("haSendHeartbeatInterval", "200"),
    ("haHousekeepingInterval", "2000"),
    ("registerNameServerPeriod", "2000"),
];

/// xorshift64*: the schedule is a pure function of the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// SEND_OK at this queue offset.
    Acked(i64),
    /// Any other answer (not acknowledged; may or may not be stored).
    Refused(i32),
    /// No answer in time (may or may not be stored).
    Unknown,
}

#[derive(Debug, Clone)]
struct Sent {
    producer: usize,
    outcome: Outcome,
    /// For an acknowledged send: the port of the broker that acknowledged it and the
    /// physical offset its message id names.
    at: Option<(u16, i64)>,
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillMaster,
    KillSlave,
    PauseMaster,
    PauseSlave,
    Switchover,
}

const FAULTS: [Fault; 5] = [
    Fault::KillMaster,
    Fault::KillSlave,
    Fault::PauseMaster,
    Fault::PauseSlave,
    Fault::Switchover,
];

fn key(producer: usize, seq: u64) -> String {
    format!("k-p{producer}-{seq}")
}

/// The CommitLog offset in a message id (its last 16 hex digits).
fn physical_of(msg_id: &str) -> Option<i64> {
    i64::from_str_radix(msg_id.get(msg_id.len().checked_sub(16)?..)?, 16).ok()
}

fn parse_key(body: &[u8]) -> Option<(usize, u64)> {
    let s = std::str::from_utf8(body).ok()?.strip_prefix("k-p")?;
    let (p, seq) = s.split_once('-')?;
    Some((p.parse().ok()?, seq.parse().ok()?))
}

/// Producers sending unique keys to whichever member accepts writes; each key is sent
/// once, whatever the outcome.
fn start_producers(
    ports: Vec<u16>,
    stop: Arc<AtomicBool>,
    history: Arc<Mutex<HashMap<String, Sent>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..PRODUCERS)
        .map(|p| {
            let (ports, stop, history) = (ports.clone(), Arc::clone(&stop), Arc::clone(&history));
            tokio::spawn(async move {
                let mut clients: HashMap<u16, Client> = HashMap::new();
                let mut prefer = 0usize;
                for seq in 0.. {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let port = ports[prefer % ports.len()];
                    if let std::collections::hash_map::Entry::Vacant(e) = clients.entry(port) {
                        match tokio::time::timeout(SEND_TIMEOUT, Client::connect(port)).await {
                            Ok(Ok(c)) => {
                                e.insert(c);
                            }
                            _ => {
                                prefer += 1;
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                continue;
                            }
                        }
                    }
                    let k = key(p, seq);
                    let send = send_v2(TOPIC, p as i32 % QUEUES, k.as_bytes(), "");
                    let answer = match clients.get(&port) {
                        Some(c) => tokio::time::timeout(SEND_TIMEOUT, c.request(send)).await,
                        None => continue,
                    };
                    let mut at = None;
                    let outcome = match answer {
                        Ok(Ok(r)) if r.code == response::SUCCESS => {
                            at = r
                                .ext_fields
                                .get("msgId")
                                .and_then(physical_of)
                                .map(|physical| (port, physical));
                            Outcome::Acked(
                                r.ext_fields
                                    .get("queueOffset")
                                    .and_then(|q| q.parse().ok())
                                    .expect("SEND_OK names its queue offset"),
                            )
                        }
                        Ok(Ok(r)) => Outcome::Refused(r.code),
                        Ok(Err(_)) | Err(_) => {
                            clients.remove(&port);
                            Outcome::Unknown
                        }
                    };
                    history.lock().unwrap().insert(
                        k,
                        Sent {
                            producer: p,
                            outcome,
                            at,
                        },
                    );
                    match outcome {
                        Outcome::Acked(_) => tokio::time::sleep(Duration::from_millis(2)).await,
                        // Stored but not replicated: stay on this master.
                        Outcome::Refused(c)
                            if c == response::SLAVE_NOT_AVAILABLE
                                || c == response::FLUSH_SLAVE_TIMEOUT =>
                        {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        _ => {
                            prefer += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            })
        })
        .collect()
}

/// Ticks the failover machine for `d`.
async fn drive_for(driver: &mut Driver, group: &SimGroup, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if let Err(e) = driver.tick(group).await {
            eprintln!("failover step failed: {e}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts a member's process again if it is not running (what the kubelet does for a
/// crashed container), from its current configuration.
async fn restart(m: &e2e::failover_sim::SimMember) {
    let p = m.process.clone();
    tokio::task::spawn_blocking(move || {
        let mut p = p.lock().unwrap_or_else(|p| p.into_inner());
        if !p.running() {
            p.kill9();
            p.restart();
        }
    })
    .await
    .unwrap();
}

/// Heals: resumes everyone, restarts dead members, and drives until the machine is at
/// rest with every member running and the master reporting all slaves in sync.
async fn settle(driver: &mut Driver, group: &SimGroup, seed: u64) {
    for m in &group.members {
        m.resume();
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        for m in &group.members {
            if !m.running() {
                restart(m).await;
            }
        }
        if let Err(e) = driver.tick(group).await {
            eprintln!("failover step failed: {e}");
        }
        let master = group.member(&driver.state.master);
        let in_sync =
            group.admin.ha_status(&master.addr()).await.is_ok_and(|h| {
                h.master && h.in_sync_slave_nums as usize == group.members.len() - 1
            });
        if driver.state.phase.at_rest() && in_sync {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the group did not heal: {:?}\n{:#?}",
            driver.state,
            driver.trace
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn inject(fault: Fault, rng: &mut Rng, driver: &mut Driver, group: &SimGroup, seed: u64) {
    let master = driver.state.master.clone();
    let slaves: Vec<String> = group
        .members
        .iter()
        .map(|m| m.pod.clone())
        .filter(|p| *p != master)
        .collect();
    let slave = slaves[rng.below(slaves.len() as u64) as usize].clone();
    match fault {
        // The machine replaces the dead master, or, with no eligible replica (the slave
        // itself is down or behind), blocks until the kubelet restarts the old one, which
        // is then elected back.
        Fault::KillMaster => {
            group.member(&master).kill9();
            driver
                .drive_until(
                    group,
                    Duration::from_secs(60),
                    Duration::from_millis(100),
                    |s| {
                        (s.phase == Phase::Completed && s.master != master)
                            || s.phase == Phase::Blocked(BlockedReason::NoEligibleReplica)
                    },
                )
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            if matches!(driver.state.phase, Phase::Blocked(_)) {
                restart(group.member(&master)).await;
                driver
                    .drive_until(
                        group,
                        Duration::from_secs(60),
                        Duration::from_millis(100),
                        |s| s.phase == Phase::Completed,
                    )
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            }
        }
        // A crashed container is restarted by the kubelet.
        Fault::KillSlave => {
            group.member(&slave).kill9();
            drive_for(driver, group, rng.millis(200, 1500)).await;
            restart(group.member(&slave)).await;
        }
        // Short: a stall the group rides out; long: the machine replaces the frozen master
        // (deleting its pod kills it) and it comes back as a slave.
        Fault::PauseMaster => {
            group.member(&master).pause();
            drive_for(driver, group, rng.millis(300, 4000)).await;
            group.member(&master).resume();
        }
        Fault::PauseSlave => {
            group.member(&slave).pause();
            drive_for(driver, group, rng.millis(300, 3000)).await;
            group.member(&slave).resume();
        }
        Fault::Switchover => {
            driver.request = Some(Request {
                trigger: FailoverTrigger::Switchover,
                target: Some(slave.clone()),
            });
            driver
                .drive_until(
                    group,
                    Duration::from_secs(60),
                    Duration::from_millis(100),
                    |s| s.phase.at_rest() && driver_request_done(s),
                )
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            // The machine clears the request when it is done (or refused it).
            drive_for(driver, group, Duration::from_millis(300)).await;
        }
    }
}

fn driver_request_done(s: &operator::failover::State) -> bool {
    s.phase == Phase::Completed || s.phase == Phase::Idle
}

/// Every record of every queue of the topic on the broker at `port`:
/// key → [(queue, queue offset)], and each queue's keys in queue order.
async fn read_all(port: u16) -> (HashMap<Vec<u8>, Vec<(i32, i64)>>, Vec<Vec<Vec<u8>>>) {
    let c = Client::connect(port).await.unwrap();
    let mut seen: HashMap<Vec<u8>, Vec<(i32, i64)>> = HashMap::new();
    let mut order = Vec::new();
    for q in 0..QUEUES {
        let mut in_queue = Vec::new();
        let mut next = 0i64;
        loop {
            let r = c
                .request(pull("Checker", TOPIC, q, next, 32, None, "*"))
                .await
                .unwrap();
            if r.code != response::SUCCESS {
                break;
            }
            let records = decode_records(&r.body);
            let Some(last) = records.last() else { break };
            next = last.queue_offset + 1;
            for rec in records {
                seen.entry(rec.body.clone())
                    .or_default()
                    .push((q, rec.queue_offset));
                in_queue.push(rec.body);
            }
        }
        order.push(in_queue);
    }
    (seen, order)
}

#[derive(Debug, Default)]
struct Report {
    sent: usize,
    acked: usize,
    refused: usize,
    unknown: usize,
    read: usize,
    lost: Vec<String>,
    moved: Vec<String>,
    duplicated: Vec<String>,
    reordered: Vec<String>,
    phantom: Vec<String>,
}

fn check(
    history: &HashMap<String, Sent>,
    seen: &HashMap<Vec<u8>, Vec<(i32, i64)>>,
    order: &[Vec<Vec<u8>>],
) -> Report {
    let mut r = Report {
        sent: history.len(),
        ..Report::default()
    };
    for (k, s) in history {
        match s.outcome {
            Outcome::Acked(offset) => {
                r.acked += 1;
                match seen.get(k.as_bytes()).map(Vec::as_slice) {
                    None | Some([]) => r.lost.push(k.clone()),
                    Some([(_, at)]) if *at != offset => {
                        r.moved
                            .push(format!("{k}: acked at {offset}, read at {at}"));
                    }
                    _ => {}
                }
            }
            Outcome::Refused(_) => r.refused += 1,
            Outcome::Unknown => r.unknown += 1,
        }
    }
    for (body, at) in seen {
        r.read += at.len();
        let name = String::from_utf8_lossy(body).into_owned();
        if at.len() > 1 {
            r.duplicated.push(format!("{name} at {at:?}"));
        }
        let known = parse_key(body).is_some() && history.contains_key(name.as_str());
        if !known && body.as_slice() != b"hello" {
            r.phantom.push(name);
        }
    }
    // Within a queue, a producer's acknowledged keys appear in the order it sent them.
    for keys in order {
        let mut last: BTreeMap<usize, u64> = BTreeMap::new();
        for body in keys {
            let Some((p, seq)) = parse_key(body) else {
                continue;
            };
            let acked = history
                .get(&key(p, seq))
                .is_some_and(|s| matches!(s.outcome, Outcome::Acked(_)) && s.producer == p);
            if !acked {
                continue;
            }
            if let Some(prev) = last.insert(p, seq)
                && prev > seq
            {
                r.reordered.push(format!("p{p}: {seq} read after {prev}"));
            }
        }
    }
    r
}

fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One checker run: what was sent, what was read, and what the failover machine did.
struct Run {
    seed: u64,
    faults: usize,
    report: Report,
    history: HashMap<String, Sent>,
    /// Every promotion: (pod promoted, its port, epoch, the start offset of that epoch
    /// in the final master's history, whether the machine reported a loss).
    promotions: Vec<Promotion>,
    trace: Vec<String>,
}

#[derive(Debug)]
struct Promotion {
    pod: String,
    port: u16,
    epoch: i64,
    start: Option<i64>,
    reported_loss: bool,
}

fn run(mode: AckMode, default_seed: u64) -> Run {
    let seed = env_or("RMQ_CHECKER_SEED", default_seed);
    let faults = env_or("RMQ_CHECKER_FAULTS", 4) as usize;
    let replicas = env_or("RMQ_CHECKER_REPLICAS", 2) as usize;
    let mut rng = Rng(seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let ns = NameServer::start(Options::default());
    let group = SimGroup::start_with_mode("ck", replicas, ns.port, BROKER_CONF, mode);
    let spec = FailoverSpec {
        policy: FailoverPolicy::Automatic,
        unavailable_for: "2s".to_owned(),
        // ASYNC: a slave some records behind is still a clean candidate.
        max_lag_bytes: match mode {
            AckMode::Async => 1 << 20,
            AckMode::Sync => FailoverSpec::default().max_lag_bytes,
        },
        ..FailoverSpec::default()
    };
    let mut driver = Driver::new(&group.members[0].pod, spec);
    driver.ack_mode = mode;
    let ports: Vec<u16> = group.members.iter().map(|m| m.port).collect();
    let history: Arc<Mutex<HashMap<String, Sent>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut schedule = Vec::new();
    let (report, lineage) = runtime().block_on(async {
        settle(&mut driver, &group, seed).await;
        let c = Client::connect(group.member(&driver.state.master).port)
            .await
            .unwrap();
        let r = c.request(send_v2(TOPIC, 0, b"hello", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        // Metadata sync brings the topic to the slaves.
        drive_for(&mut driver, &group, Duration::from_millis(700)).await;
        let producers = start_producers(ports, Arc::clone(&stop), Arc::clone(&history));
        for _ in 0..faults {
            drive_for(&mut driver, &group, rng.millis(300, 1500)).await;
            let fault = FAULTS[rng.below(FAULTS.len() as u64) as usize];
            schedule.push(format!("{fault:?}"));
            eprintln!(
                "seed {seed}: fault {fault:?} (master {})",
                driver.state.master
            );
            inject(fault, &mut rng, &mut driver, &group, seed).await;
        }
        settle(&mut driver, &group, seed).await;
        drive_for(&mut driver, &group, Duration::from_millis(500)).await;
        stop.store(true, Ordering::Release);
        for p in producers {
            let _ = p.await;
        }
        settle(&mut driver, &group, seed).await;
        let master = group.member(&driver.state.master);
        let (seen, order) = read_all(master.port).await;
        let lineage = epochs(&group.admin, &master.addr())
            .await
            .map(|(entries, _)| entries)
            .unwrap_or_default();
        (check(&history.lock().unwrap(), &seen, &order), lineage)
    });
    // "promoting <pod> at epoch <e>[ (unclean: ...)]", as the machine announces it.
    let promotions = group
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| {
            let rest = e.split_once("FailoverPromoting: promoting ")?.1;
            let (pod, rest) = rest.split_once(" at epoch ")?;
            let epoch: i64 = rest.split(' ').next()?.parse().ok()?;
            Some(Promotion {
                pod: pod.to_owned(),
                port: group.member(pod).port,
                epoch,
                start: lineage.iter().find(|(e, _)| *e == epoch).map(|(_, s)| *s),
                reported_loss: rest.contains("unclean"),
            })
        })
        .collect();
    eprintln!(
        "seed {seed} ({mode:?}): {} faults {:?} in {:.1} s; sent {}, acknowledged {}, refused {}, \
         unknown {}, read {}; lost {}, moved {}, duplicated {}, reordered {}, phantom {}",
        schedule.len(),
        schedule,
        started.elapsed().as_secs_f64(),
        report.sent,
        report.acked,
        report.refused,
        report.unknown,
        report.read,
        report.lost.len(),
        report.moved.len(),
        report.duplicated.len(),
        report.reordered.len(),
        report.phantom.len()
    );
    let history = history.lock().unwrap().clone();
    Run {
        seed,
        faults,
        report,
        history,
        promotions,
        trace: driver.trace.clone(),
    }
}

fn show(v: &[String]) -> Vec<String> {
    v.iter().take(10).cloned().collect()
}

#[test]
fn random_faults_lose_no_acknowledged_message_under_sync_replication() {
    let Run {
        seed,
        faults,
        report,
        trace,
        ..
    } = run(AckMode::Sync, 15);
    assert!(
        report.lost.is_empty()
            && report.moved.is_empty()
            && report.duplicated.is_empty()
            && report.reordered.is_empty()
            && report.phantom.is_empty(),
        "seed {seed} (replay: RMQ_CHECKER_SEED={seed} RMQ_CHECKER_FAULTS={faults}): lost {:?}, \
         moved {:?}, duplicated {:?}, reordered {:?}, phantom {:?}; failover trace {:#?}",
        show(&report.lost),
        show(&report.moved),
        show(&report.duplicated),
        show(&report.reordered),
        show(&report.phantom),
        trace
    );
    assert!(report.acked > 0, "seed {seed}: nothing was acknowledged");
}

/// ASYNC_MASTER acknowledges before a slave has the message, so a failover may lose
/// acknowledged messages, but only ones the failover machine reported (issue 15 defect
/// 6): each lost message was acknowledged by another broker than the one promoted at an
/// epoch whose promotion announced a loss, at or beyond (within one record of) the point
/// where that epoch starts, the bytes the promoted replica did not have. Nothing else may
/// be lost, and nothing may be moved, duplicated, reordered or invented.
#[test]
fn random_faults_under_async_replication_lose_only_what_failovers_report() {
    /// More than any record of this suite (topic, key, properties and header).
    const RECORD_MAX: i64 = 512;
    let Run {
        seed,
        faults,
        report,
        history,
        promotions,
        trace,
    } = run(AckMode::Async, 21);
    let unexplained: Vec<String> = report
        .lost
        .iter()
        .filter(|k| {
            let Some((port, physical)) = history.get(*k).and_then(|s| s.at) else {
                return true;
            };
            !promotions.iter().any(|p| {
                p.reported_loss
                    && p.port != port
                    && p.start.is_some_and(|start| physical + RECORD_MAX > start)
            })
        })
        .cloned()
        .collect();
    let reported = promotions.iter().filter(|p| p.reported_loss).count();
    let named: Vec<String> = promotions
        .iter()
        .map(|p| format!("{} at epoch {}", p.pod, p.epoch))
        .collect();
    eprintln!(
        "seed {seed} (ASYNC): promotions {named:?}, {reported} reporting a loss; lost {} \
         acknowledged messages, {} of them unexplained",
        report.lost.len(),
        unexplained.len()
    );
    assert!(
        unexplained.is_empty()
            && report.moved.is_empty()
            && report.duplicated.is_empty()
            && report.reordered.is_empty()
            && report.phantom.is_empty(),
        "seed {seed} (replay: RMQ_CHECKER_SEED={seed} RMQ_CHECKER_FAULTS={faults}): unexplained \
         losses {:?} (promotions {promotions:?}), moved {:?}, duplicated {:?}, reordered {:?}, \
         phantom {:?}; failover trace {:#?}",
        show(&unexplained),
        show(&report.moved),
        show(&report.duplicated),
        show(&report.reordered),
        show(&report.phantom),
        trace
    );
    assert!(report.acked > 0, "seed {seed}: nothing was acknowledged");
}

#[test]
fn the_checker_finds_each_kind_of_anomaly() {
    let mut history = HashMap::new();
    for (seq, outcome) in [
        (0, Outcome::Acked(0)),
        (1, Outcome::Acked(1)),
        (2, Outcome::Acked(2)),
        (3, Outcome::Unknown),
        (4, Outcome::Acked(4)),
    ] {
        history.insert(
            key(0, seq),
            Sent {
                producer: 0,
                outcome,
                at: None,
            },
        );
    }
    let k = |s: u64| key(0, s).into_bytes();
    // 1 is missing, 2 is read twice, 4 before 0 and at another offset, plus a phantom.
    let order = vec![vec![k(4), k(0), k(2), k(2), k(3), b"k-p9-9".to_vec()]];
    let mut seen: HashMap<Vec<u8>, Vec<(i32, i64)>> = HashMap::new();
    for (i, body) in order[0].iter().enumerate() {
        seen.entry(body.clone()).or_default().push((0, i as i64));
    }
    let r = check(&history, &seen, &order);
    assert_eq!(r.lost, vec![key(0, 1)]);
    assert_eq!(r.duplicated.len(), 1);
    assert_eq!(r.phantom, vec!["k-p9-9".to_owned()]);
    assert_eq!(r.moved.len(), 2, "{:?}", r.moved);
    assert_eq!(r.reordered.len(), 1, "{:?}", r.reordered);
    assert_eq!((r.acked, r.unknown), (4, 1));
}
