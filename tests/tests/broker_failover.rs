//! Failover end to end: a real nameserver and a real SYNC_MASTER + SLAVE group,
//! driven by the operator's own failover logic (`e2e::failover_sim`). Per round:
//! concurrent producers send under SYNC_MASTER, the master is SIGKILLed, the machine
//! detects, fences (deletes the dead pod), elects, promotes and repoints; the deleted pod
//! is recreated as a slave of the new master. Then every acknowledged message must be on
//! the new master at its offsets with its body (no loss, no duplicate elsewhere in its
//! queue), and the recreated old master must have cut its divergent tail and converged
//! (same max offset, same epoch history). The next round fails over the other way.
//!
//! Soak: `RMQ_FAILOVER_ROUNDS` rounds (default 2); `RMQ_FAILOVER_UNAVAILABLE_FOR` is the
//! policy's `unavailableFor` (default `5s`). Each round prints the time from the SIGKILL
//! to the first SEND_OK on the new master, and the run prints min/median/max:
//! `RMQ_FAILOVER_ROUNDS=20 <test binary> --nocapture`.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::broker_harness::{decode_records, pull_queue, send_v2, with_fields};
use e2e::failover_sim::{Driver, SimGroup, epochs};
use e2e::nameserver::Options;
use e2e::wait::{Lazy, eventually, eventually_ok, runtime};
use e2e::{Client, NameServer};
use operator::admin::Admin;
use operator::crd::{FailoverPolicy, FailoverSpec, FailoverTrigger};
use operator::failover::{Action, Phase, Request};
use protocol::code::{request, response};

const TOPIC: &str = "FailoverT";
const QUEUES: i32 = 4;
const PRODUCERS: usize = 4;

/// One SEND_OK.
#[derive(Debug, Clone)]
struct Ack {
    body: String,
    queue: i32,
    queue_offset: i64,
    physical: i64,
    port: u16,
    at: Instant,
}

struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// (port, response code or -1 for a transport error) -> count of refused sends, for
    /// the failure message when the group does not become writable.
    refusals: Arc<Mutex<HashMap<(u16, i32), usize>>>,
}

fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn offset_of(msg_id: &str) -> Option<i64> {
    i64::from_str_radix(msg_id.get(msg_id.len().checked_sub(16)?..)?, 16).ok()
}

/// `PRODUCERS` tasks sending to whichever member accepts writes (the last one that did
/// first), recording every SEND_OK. A failed or unacknowledged send is never retried
/// with the same body, so each body is acknowledged at most once.
fn start_load(ports: Vec<u16>, round: usize, acks: Arc<Mutex<Vec<Ack>>>) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let refusals: Arc<Mutex<HashMap<(u16, i32), usize>>> = Arc::default();
    let tasks = (0..PRODUCERS)
        .map(|p| {
            let (stop, acks, ports) = (Arc::clone(&stop), Arc::clone(&acks), ports.clone());
            let refusals = Arc::clone(&refusals);
            let refused = move |port: u16, code: i32| {
                *refusals.lock().unwrap().entry((port, code)).or_default() += 1;
            };
            tokio::spawn(async move {
                let mut clients: HashMap<u16, Client> = HashMap::new();
                let mut prefer = 0usize;
                let queue = p as i32 % QUEUES;
                for seq in 0.. {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let port = ports[prefer % ports.len()];
                    let client = match clients.entry(port) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => match Client::connect(port).await {
                            Ok(c) => e.insert(c),
                            Err(_) => {
                                prefer += 1;
                                // Backoff before the next member, so a dead group is not
                                // hammered in a tight loop.
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                continue;
                            }
                        },
                    };
                    let body = format!("r{round}-p{p}-{seq}");
                    let sent = client
                        .request(send_v2(TOPIC, queue, body.as_bytes(), ""))
                        .await;
                    match sent {
                        Ok(r) if r.code == response::SUCCESS => {
                            let field = |k: &str| r.ext_fields.get(k).map(str::to_owned);
                            let ack = Ack {
                                physical: field("msgId")
                                    .and_then(|m| offset_of(&m))
                                    .expect("msgId"),
                                queue: field("queueId")
                                    .and_then(|q| q.parse().ok())
                                    .expect("queueId"),
                                queue_offset: field("queueOffset")
                                    .and_then(|q| q.parse().ok())
                                    .expect("queueOffset"),
                                body,
                                port,
                                at: Instant::now(),
                            };
                            acks.lock().unwrap().push(ack);
                            // Pacing: a steady load, not a flood of the two cores.
                            tokio::time::sleep(Duration::from_millis(2)).await;
                        }
                        // Stored but not replicated: not acknowledged; stay on this master.
                        Ok(r)
                            if r.code == response::SLAVE_NOT_AVAILABLE
                                || r.code == response::FLUSH_SLAVE_TIMEOUT =>
                        {
                            refused(port, r.code);
                            // Backoff before sending again to the same master.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        // A slave (or fenced master) refusing writes.
                        Ok(r) => {
                            refused(port, r.code);
                            prefer += 1;
                            // Backoff before trying the next member.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Err(_) => {
                            refused(port, -1);
                            clients.remove(&port);
                            prefer += 1;
                            // Backoff before trying the next member.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            })
        })
        .collect();
    Load {
        stop,
        tasks,
        refusals,
    }
}

impl Load {
    async fn finish(self) {
        self.stop.store(true, Ordering::Release);
        for t in self.tasks {
            t.await.expect("producer task");
        }
    }
}

/// Every acknowledged message read by its physical offset on the broker at `port`.
async fn assert_readable_by_offset(port: u16, acks: &[Ack], who: &str) {
    let c = Client::connect(port).await.unwrap();
    for chunk in acks.chunks(64) {
        let requests = chunk
            .iter()
            .map(|a| {
                with_fields(
                    request::VIEW_MESSAGE_BY_ID,
                    &[("offset", a.physical.to_string())],
                )
            })
            .collect();
        let answers = c.pipeline(requests).await.unwrap();
        for (a, r) in chunk.iter().zip(answers) {
            assert_eq!(
                r.code,
                response::SUCCESS,
                "{who}: acknowledged {} at {} is gone: {:?}",
                a.body,
                a.physical,
                r.remark
            );
            let rec = decode_records(&r.body).remove(0);
            assert_eq!(
                rec.body,
                a.body.as_bytes(),
                "{who}: wrong body at {}",
                a.physical
            );
        }
    }
}

/// Every acknowledged message appears exactly once in its queue on the broker at
/// `port`, at the queue and physical offsets its SEND_OK named.
async fn assert_queues_hold(port: u16, acks: &[Ack]) {
    let c = Client::connect(port).await.unwrap();
    for q in 0..QUEUES {
        let mut seen: HashMap<Vec<u8>, Vec<(i64, i64)>> = HashMap::new();
        for rec in pull_queue(&c, "FoCheck", TOPIC, q).await {
            seen.entry(rec.body)
                .or_default()
                .push((rec.queue_offset, rec.physical_offset));
        }
        for a in acks.iter().filter(|a| a.queue == q) {
            let at = seen.get(a.body.as_bytes()).cloned().unwrap_or_default();
            assert_eq!(
                at,
                vec![(a.queue_offset, a.physical)],
                "queue {q}: acknowledged {} must be once at its offsets",
                a.body
            );
        }
    }
}

async fn metric(http_port: u16, name: &str) -> Option<i64> {
    let (_, text) = e2e::http::get(http_port, "/metrics").await.ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        .map(|v| v as i64)
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const BROKER_CONF: &[(&str, &str)] = &[
    ("haSecret", "fo-secret"),
    ("syncFlushTimeout", "1500"),
    ("slaveSyncInterval", "300"),
    ("haSendHeartbeatInterval", "200"),
    ("registerNameServerPeriod", "2000"),
];

/// Waits for the slave to be in sync and creates the topic on the master.
async fn group_ready(group: &SimGroup, master: &str) {
    eventually(
        Duration::from_secs(20),
        "the slave to be in sync",
        || async {
            let h = group.admin.ha_status(&group.member(master).addr()).await;
            h.is_ok_and(|h| h.in_sync_slave_nums == 1)
        },
    )
    .await;
    let c = Client::connect(group.member(master).port).await.unwrap();
    let r = c.request(send_v2(TOPIC, 0, b"hello", "")).await.unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    // Metadata sync brings the topic to the slaves, which may be promoted later.
    for m in group.members.iter().filter(|m| m.pod != master) {
        let s = Client::connect(m.port).await.unwrap();
        eventually(
            Duration::from_secs(20),
            "the topic on the slave",
            || async {
                let all = protocol::RemotingCommand::bare_request(request::GET_ALL_TOPIC_CONFIG);
                s.request(all).await.is_ok_and(|r| {
                    r.code == response::SUCCESS
                        && String::from_utf8_lossy(&r.body).contains(&format!("\"{TOPIC}\""))
                })
            },
        )
        .await;
    }
}

/// Waits until the member at `port` acknowledged `n` more messages since `since`: the
/// load goes on under the new master for a while before it stops.
async fn acked_since(acks: &Mutex<Vec<Ack>>, port: u16, since: Instant, n: usize) {
    eventually(
        Duration::from_secs(30),
        "acknowledgements from the new master",
        || async {
            let acks = acks.lock().unwrap();
            acks.iter()
                .filter(|a| a.port == port && a.at > since)
                .count()
                >= n
        },
    )
    .await;
}

/// Ticks the driver at rest until the master acknowledged `n` messages of this round
/// and the recorded status shows every other member in sync.
async fn loaded(
    driver: &mut Driver,
    group: &SimGroup,
    acks: &Mutex<Vec<Ack>>,
    from: usize,
    n: usize,
) {
    let master = driver.state.master.clone();
    let port = group.member(&master).port;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        driver.tick(group).await.expect("step at rest");
        let acked = acks.lock().unwrap()[from..]
            .iter()
            .filter(|a| a.port == port)
            .count();
        let slave_in_sync = driver.previous.as_ref().is_some_and(|g| {
            g.members
                .iter()
                .all(|m| m.pod == master || m.in_sync == Some(true))
        });
        if acked >= n && slave_in_sync {
            break;
        }
        assert!(Instant::now() < deadline, "no load on {master}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(driver.state.phase.at_rest(), "{:?}", driver.state);
}

/// Waits until `slave` holds the same epochs and log as `master` and is in sync.
async fn converged(group: &SimGroup, master: &str, slave: &str) {
    let (m, s) = (group.member(master), group.member(slave));
    let what = format!("{slave} to converge on {master}");
    eventually_ok(Duration::from_secs(30), &what, || async {
        let (a, b) = (
            epochs(&group.admin, &m.addr()).await,
            epochs(&group.admin, &s.addr()).await,
        );
        let status = group.admin.ha_status(&m.addr()).await;
        if status.as_ref().is_ok_and(|h| h.in_sync_slave_nums == 1) && a.is_some() && a == b {
            return Ok(());
        }
        let slave_status = group.admin.ha_status(&s.addr()).await;
        Err(Lazy(move || {
            let log = s.log();
            let tail = &log[log.len().saturating_sub(6000)..];
            format!(
                "epochs {a:?} vs {b:?}; master {status:?}; slave {slave_status:?}; \
                 slave log tail:\n{tail}"
            )
        }))
    })
    .await;
}

#[test]
fn sigkilled_master_fails_over_without_losing_acknowledged_messages() {
    let rounds: usize = env_or("RMQ_FAILOVER_ROUNDS", 2);
    let unavailable_for: String = env_or("RMQ_FAILOVER_UNAVAILABLE_FOR", "5s".to_owned());
    let ns = NameServer::start(Options::default());
    let group = SimGroup::start("fo", 2, ns.port, BROKER_CONF);
    let spec = FailoverSpec {
        policy: FailoverPolicy::Automatic,
        unavailable_for,
        ..FailoverSpec::default()
    };
    let mut driver = Driver::new(&group.members[0].pod, spec);
    let ports: Vec<u16> = group.members.iter().map(|m| m.port).collect();
    let rt = runtime();
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let mut times = Vec::new();
    let mut truncating_rounds = 0;
    rt.block_on(async {
        group_ready(&group, &driver.state.master.clone()).await;
        for round in 0..rounds {
            let old = driver.state.master.clone();
            let old_m = group.member(&old);
            let round_start = acks.lock().unwrap().len();
            let load = start_load(ports.clone(), round, Arc::clone(&acks));
            // At rest the loop keeps recording the slave's in-sync flag and the offsets.
            loaded(&mut driver, &group, &acks, round_start, 100).await;

            let killed = Instant::now();
            old_m.kill9();
            let log_from = driver.log.len();
            driver
                .drive_until(&group, Duration::from_secs(60), Duration::from_millis(100), |s| {
                    s.phase == Phase::Completed && s.master != old
                })
                .await
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            let new = driver.state.master.clone();
            let new_m = group.member(&new);
            let acted: Vec<&Action> = driver.log[log_from..]
                .iter()
                .map(|(_, a)| a)
                .filter(|a| a.acts())
                .collect();
            assert!(
                matches!(acted.first(), Some(Action::DeletePod { pod }) if *pod == old),
                "round {round}: the dead master is fenced first: {acted:?}"
            );
            assert!(acted.iter().any(|a| matches!(a, Action::Promote { pod, .. } if *pod == new)));

            let writable = |acks: &Mutex<Vec<Ack>>| {
                acks.lock()
                    .unwrap()
                    .iter()
                    .any(|a| a.port == new_m.port && a.at > killed)
            };
            let what = format!("round {round}: a SEND_OK on the new master {new}");
            let driver_log = &driver.log[log_from..];
            eventually_ok(Duration::from_secs(60), &what, || async {
                if writable(&acks) {
                    return Ok(());
                }
                Err(Lazy(|| {
                    format!(
                        "refusals {:?}\ndriver log: {driver_log:?}\n--- {new} log:\n{}\n--- {old} log:\n{}",
                        load.refusals.lock().unwrap(),
                        tail(&new_m.log(), 60),
                        tail(&old_m.log(), 60),
                    )
                }))
            })
            .await;
            let first_ok = acks
                .lock()
                .unwrap()
                .iter()
                .filter(|a| a.port == new_m.port && a.at > killed)
                .map(|a| a.at)
                .min()
                .unwrap();
            let took = first_ok - killed;
            eprintln!(
                "round {round}: {old} -> {new} at epoch {}: SIGKILL to first SEND_OK on the new master {:.2} s",
                driver.state.epoch,
                took.as_secs_f64()
            );
            times.push(took);
            acked_since(&acks, new_m.port, first_ok, 20).await;
            load.finish().await;

            // The recreated old master follows the new one: same log, same epochs.
            assert_eq!(old_m.conf("brokerRole").as_deref(), Some("SLAVE"));
            converged(&group, &new, &old).await;
            if metric(old_m.http_port, "rocketmq_ha_truncated_bytes").await > Some(0) {
                truncating_rounds += 1;
            }
            let all = acks.lock().unwrap().clone();
            assert_readable_by_offset(new_m.port, &all[round_start..], &new).await;
            assert_readable_by_offset(old_m.port, &all[round_start..], &old).await;
            assert_queues_hold(new_m.port, &all).await;
            // The new master keeps the group writable with its slave back.
            let c = Client::connect(new_m.port).await.unwrap();
            let r = c.request(send_v2(TOPIC, 0, b"after", "")).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "round {round}: {:?}", r.remark);
        }
    });
    times.sort();
    if let (Some(min), Some(max)) = (times.first(), times.last()) {
        eprintln!(
            "failover over {} rounds: SIGKILL to first SEND_OK min {:.2} s, median {:.2} s, max {:.2} s; {} acknowledged messages, {} rounds cut a divergent tail",
            times.len(),
            min.as_secs_f64(),
            times[times.len() / 2].as_secs_f64(),
            max.as_secs_f64(),
            acks.lock().unwrap().len(),
            truncating_rounds
        );
    }
}

/// A planned switchover of a live master under load: the machine fences it over the admin
/// protocol (NOTIFY_BROKER_ROLE_CHANGED naming no master, brokerId -1, empty address),
/// promotes the slave once it holds everything, and tells the old master (configured
/// brokerId 0) to follow the new one (brokerId 0): it must become its slave, not take
/// the order as its own promotion.
#[test]
fn switchover_fences_the_live_master_and_it_follows_the_new_one() {
    let ns = NameServer::start(Options::default());
    let group = SimGroup::start("sw", 2, ns.port, BROKER_CONF);
    let (old, new) = (group.members[0].pod.clone(), group.members[1].pod.clone());
    let mut driver = Driver::new(&old, FailoverSpec::default());
    let ports: Vec<u16> = group.members.iter().map(|m| m.port).collect();
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    runtime().block_on(async {
        group_ready(&group, &old).await;
        let load = start_load(ports, 0, Arc::clone(&acks));
        loaded(&mut driver, &group, &acks, 0, 100).await;
        driver.request = Some(Request {
            trigger: FailoverTrigger::Switchover,
            target: Some(new.clone()),
        });
        driver
            .drive_until(
                &group,
                Duration::from_secs(45),
                Duration::from_millis(100),
                |s| s.phase == Phase::Completed,
            )
            .await
            .unwrap();
        let completed = Instant::now();
        let master_port = group.member(&driver.state.master).port;
        acked_since(&acks, master_port, completed, 20).await;
        load.finish().await;
        assert_eq!(
            driver.state.master,
            new,
            "{:#?}\n--- {old} log:\n{}\n--- {new} log:\n{}",
            driver.trace,
            tail(&group.members[0].log(), 40),
            tail(&group.members[1].log(), 40),
        );
        assert!(driver.request.is_none(), "the request is cleared");
        let acted: Vec<&Action> = driver
            .log
            .iter()
            .map(|(_, a)| a)
            .filter(|a| a.acts())
            .collect();
        assert!(
            matches!(acted.first(), Some(Action::Fence { pod, .. }) if *pod == old),
            "the live master is fenced first: {acted:?}"
        );
        assert!(acted.iter().any(|a| matches!(
            a,
            Action::Follow { pod, master, master_broker_id: 0, .. } if *pod == old && *master == new
        )));
        // The old master never restarted: it follows the new one live.
        assert!(group.member(&old).running());
        converged(&group, &new, &old).await;
        let st = group
            .admin
            .ha_status(&group.member(&old).addr())
            .await
            .unwrap();
        assert!(!st.master, "{st:?}");
        let c = Client::connect(group.member(&old).port).await.unwrap();
        let r = c.request(send_v2(TOPIC, 0, b"no", "")).await.unwrap();
        assert_eq!(r.code, response::SERVICE_NOT_AVAILABLE);
        let all = acks.lock().unwrap().clone();
        assert_readable_by_offset(group.member(&new).port, &all, &new).await;
        assert_readable_by_offset(group.member(&old).port, &all, &old).await;
        assert_queues_hold(group.member(&new).port, &all).await;
        let c = Client::connect(group.member(&new).port).await.unwrap();
        let r = c.request(send_v2(TOPIC, 0, b"after", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    });
}
