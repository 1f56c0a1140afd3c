//! The randomized fault checker: a real nameserver and a SYNC_MASTER +
//! SYNC_FLUSH group of `rmq-broker` processes driven by the operator's own failover
//! machine (`e2e::failover_sim`), producers writing unique keys and recording each send's
//! outcome, and a seeded random schedule of faults: SIGKILL of the master or a slave,
//! SIGSTOP/SIGCONT of either (a long pause gets the master replaced while it is frozen),
//! switchovers under load, and network partitions: master from a slave (both ways),
//! master from the nameserver, and the master isolated while it keeps running (one way,
//! everything it sends dropped, or its link down), so the operator fails over and fences
//! it while it is alive. For partitions each member runs in a network namespace of its
//! own (`e2e::netns`; the nameserver, producers, consumer and the driver stay in the
//! root namespace); that needs root and iproute2. Without them the other faults still
//! run and the log says partitions were skipped, unless `RMQ_REQUIRE_NETNS=1` (set by
//! `.ci/run` as root), which makes that a failure. With namespaces every schedule holds
//! each partition fault at least once. After healing, a consumer reads every queue from
//! the master and the history is checked:
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
//! broker_fault_checker -- --nocapture`. `broker_partition.rs` walks one partition
//! step by step (what the isolated master answers while cut off).
#![allow(clippy::unwrap_used)]

#[path = "support/checker_faults.rs"]
mod faults;
#[path = "support/checker_history.rs"]
mod history;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::broker_harness::send_v2;
use e2e::failover_sim::{Driver, SimGroup, epochs};
use e2e::nameserver::Options;
use e2e::wait::runtime;
use e2e::{Client, NameServer};
use faults::{PARTITIONS, Rng, Target, drive_for, inject, schedule, settle};
use history::{Outcome, Report, Sent, check, key, physical_of, read_all};
use operator::crd::{AckMode, FailoverPolicy, FailoverSpec};
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

/// Producers sending unique keys to whichever member accepts writes; each key is sent
/// once, whatever the outcome. Members are (address, port); the port names them.
fn start_producers(
    members: Vec<(String, u16)>,
    stop: Arc<AtomicBool>,
    history: Arc<Mutex<HashMap<String, Sent>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..PRODUCERS)
        .map(|p| {
            let (members, stop, history) =
                (members.clone(), Arc::clone(&stop), Arc::clone(&history));
            tokio::spawn(async move {
                let mut clients: HashMap<u16, Client> = HashMap::new();
                let mut prefer = 0usize;
                for seq in 0.. {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let (addr, port) = &members[prefer % members.len()];
                    let port = *port;
                    if let std::collections::hash_map::Entry::Vacant(e) = clients.entry(port) {
                        match tokio::time::timeout(SEND_TIMEOUT, Client::connect_addr(addr)).await {
                            Ok(Ok(c)) => {
                                e.insert(c);
                            }
                            _ => {
                                prefer += 1;
                                // Backoff before the next member, so a dead group is not
                                // hammered in a tight loop.
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
                    // Pacing a steady load, and backing off after a refusal: how fast the
                    // producers send is the load's shape, not a wait for anything.
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
    let replicas = env_or("RMQ_CHECKER_REPLICAS", 2) as usize;
    let nets = faults::namespaces(replicas);
    let partitions = nets.is_some();
    // Each partition kind once plus as many of the others by default.
    let default_faults = if partitions { 2 * PARTITIONS.len() } else { 4 };
    let faults = env_or("RMQ_CHECKER_FAULTS", default_faults as u64) as usize;
    let mut rng = Rng(seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let plan = schedule(&mut rng, faults, partitions);
    let (ns, group) = match nets {
        // Members reach the nameserver through their veth, not over loopback.
        Some(nets) => {
            let ns = NameServer::start(Options::default().config("bindAddress", "0.0.0.0"));
            let group = SimGroup::start_in_namespaces("ck", nets, ns.port, BROKER_CONF, mode);
            (ns, group)
        }
        None => {
            let ns = NameServer::start(Options::default());
            let group = SimGroup::start_with_mode("ck", replicas, ns.port, BROKER_CONF, mode);
            (ns, group)
        }
    };
    let target = Target {
        group: &group,
        namesrv_port: ns.port,
        seed,
    };
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
    let members: Vec<(String, u16)> = group.members.iter().map(|m| (m.addr(), m.port)).collect();
    let history: Arc<Mutex<HashMap<String, Sent>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let (report, lineage) = runtime().block_on(async {
        settle(&mut driver, &group, seed).await;
        let c = Client::connect_addr(&group.member(&driver.state.master).addr())
            .await
            .unwrap();
        let r = c.request(send_v2(TOPIC, 0, b"hello", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        // Metadata sync brings the topic to the slaves.
        drive_for(&mut driver, &group, Duration::from_millis(700)).await;
        let producers = start_producers(members, Arc::clone(&stop), Arc::clone(&history));
        for &fault in &plan {
            drive_for(&mut driver, &group, rng.millis(300, 1500)).await;
            eprintln!(
                "seed {seed}: fault {fault:?} (master {})",
                driver.state.master
            );
            let at = Instant::now();
            inject(fault, &mut rng, &mut driver, &target).await;
            eprintln!(
                "seed {seed}: {fault:?} healed after {:.1} s",
                at.elapsed().as_secs_f64()
            );
        }
        settle(&mut driver, &group, seed).await;
        drive_for(&mut driver, &group, Duration::from_millis(500)).await;
        stop.store(true, Ordering::Release);
        for p in producers {
            let _ = p.await;
        }
        settle(&mut driver, &group, seed).await;
        let master = group.member(&driver.state.master);
        let (seen, order) = read_all(&master.addr()).await;
        let lineage = epochs(&group.admin, &master.addr())
            .await
            .map(|(entries, _)| entries)
            .unwrap_or_default();
        (check(&history.lock().unwrap(), &seen, &order), lineage)
    });
    // "promoting <pod> at epoch <e>[ (unclean: ...)]", as the machine announces it.
    let promotions: Vec<Promotion> = group
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
        "seed {seed} ({mode:?}): {} faults{} {:?} in {:.1} s; sent {}, acknowledged {}, \
         refused {}, unknown {}, read {}; lost {}, moved {}, duplicated {}, reordered {}, \
         phantom {}; {} promotions ({} reporting a loss)",
        plan.len(),
        if partitions {
            ""
        } else {
            " (partitions skipped)"
        },
        plan,
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
        report.phantom.len(),
        promotions.len(),
        promotions.iter().filter(|p| p.reported_loss).count()
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
/// acknowledged messages, but only ones the failover machine reported: each lost message was acknowledged by another broker than the one promoted at an
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

/// Every schedule with partitions holds each partition kind once it has room for them,
/// and one without namespaces holds none.
#[test]
fn schedules_hold_every_partition_kind() {
    for seed in 1..500u64 {
        for n in 3..10 {
            let with = schedule(&mut Rng(seed), n, true);
            assert_eq!(with.len(), n);
            for kind in PARTITIONS {
                assert!(with.contains(&kind), "seed {seed}, {n} faults: {with:?}");
            }
            let without = schedule(&mut Rng(seed), n, false);
            assert!(
                !without.iter().any(|f| PARTITIONS.contains(f)),
                "{without:?}"
            );
        }
    }
}
