//! The fault checker's faults: a seeded schedule and how each fault is injected into a
//! [`SimGroup`] while the operator's failover machine ([`Driver`]) keeps running, then
//! healed. Partitions need every member in a network namespace of its own
//! ([`e2e::netns`]); without namespaces the schedule holds only the other faults.

use std::time::{Duration, Instant};

use e2e::failover_sim::{Driver, SimGroup};
use e2e::netns::{Netns, NetnsError};
use operator::admin::Admin;
use operator::crd::FailoverTrigger;
use operator::failover::{BlockedReason, Phase, Request, State};

/// xorshift64*: the schedule is a pure function of the seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    KillMaster,
    KillSlave,
    PauseMaster,
    PauseSlave,
    Switchover,
    /// The master and one slave cannot reach each other (both directions dropped).
    PartitionMasterFromSlave,
    /// The master cannot reach the nameserver (registrations are dropped).
    PartitionMasterFromNameserver,
    /// The master is cut off from everyone while it keeps running: either one way (all
    /// it sends is dropped; requests still reach it) or its link goes down.
    IsolateMaster,
}

const BASE: [Fault; 5] = [
    Fault::KillMaster,
    Fault::KillSlave,
    Fault::PauseMaster,
    Fault::PauseSlave,
    Fault::Switchover,
];

pub const PARTITIONS: [Fault; 3] = [
    Fault::PartitionMasterFromSlave,
    Fault::PartitionMasterFromNameserver,
    Fault::IsolateMaster,
];

/// `n` faults drawn from the seed. With `partitions`, every partition kind occurs at
/// least once (as far as `n` allows), so even CI's short schedule runs each of them: a
/// missing kind replaces a fault at a random position whose kind occurs elsewhere or
/// is not a partition.
pub fn schedule(rng: &mut Rng, n: usize, partitions: bool) -> Vec<Fault> {
    let kinds: Vec<Fault> = if partitions {
        BASE.iter().chain(&PARTITIONS).copied().collect()
    } else {
        BASE.to_vec()
    };
    let mut s: Vec<Fault> = (0..n)
        .map(|_| kinds[rng.below(kinds.len() as u64) as usize])
        .collect();
    if partitions {
        for kind in PARTITIONS {
            if s.contains(&kind) {
                continue;
            }
            let spare: Vec<usize> = (0..s.len())
                .filter(|&i| {
                    !PARTITIONS.contains(&s[i]) || s.iter().filter(|f| **f == s[i]).count() > 1
                })
                .collect();
            if spare.is_empty() {
                break;
            }
            s[spare[rng.below(spare.len() as u64) as usize]] = kind;
        }
    }
    s
}

/// One network namespace per member, routed to each other, or `None` (after a notice)
/// when this machine cannot make them; `RMQ_REQUIRE_NETNS=1` makes that a failure.
pub fn namespaces(n: usize) -> Option<Vec<Netns>> {
    let required = std::env::var("RMQ_REQUIRE_NETNS").is_ok_and(|v| v == "1");
    let made = (0..n)
        .map(|_| -> Result<Netns, NetnsError> {
            let netns = Netns::create()?;
            netns.route_to_peers()?;
            Ok(netns)
        })
        .collect::<Result<Vec<Netns>, NetnsError>>();
    match made {
        Ok(nets) => Some(nets),
        Err(e) if required => panic!("RMQ_REQUIRE_NETNS=1 but no network namespaces: {e}"),
        Err(e) => {
            eprintln!(
                "fault checker: partitions SKIPPED, network namespaces unavailable ({e}); the \
                 other faults still run. Run as root with iproute2; RMQ_REQUIRE_NETNS=1 makes \
                 this fail"
            );
            None
        }
    }
}

/// What a fault acts on.
pub struct Target<'a> {
    pub group: &'a SimGroup,
    pub namesrv_port: u16,
    pub seed: u64,
}

/// Ticks the failover machine for `d`: how long a fault lasts is part of the random
/// schedule under test, so time itself is what this waits for.
pub async fn drive_for(driver: &mut Driver, group: &SimGroup, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if let Err(e) = driver.tick(group).await {
            eprintln!("failover step failed: {e}");
        }
        // The operator's reconcile period, shortened.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Heals: resumes everyone, restarts dead members, and drives until the machine is at
/// rest with every member running and the master reporting all slaves in sync.
pub async fn settle(driver: &mut Driver, group: &SimGroup, seed: u64) {
    for m in &group.members {
        m.resume();
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        for m in &group.members {
            if !m.running() {
                m.restart().await;
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

fn netns_of<'a>(group: &'a SimGroup, pod: &str) -> &'a Netns {
    group
        .member(pod)
        .netns
        .as_ref()
        .expect("partition faults are only scheduled for members in namespaces")
}

/// The machine replaced the master it had, or found no eligible replica to do so.
fn replaced_or_blocked(old: &str) -> impl Fn(&State) -> bool + '_ {
    move |s| {
        (s.phase == Phase::Completed && s.master != old)
            || s.phase == Phase::Blocked(BlockedReason::NoEligibleReplica)
    }
}

/// After the machine gave up on `old` for want of an eligible replica, the kubelet
/// restarts it and it is elected back.
async fn unblock_by_restart(driver: &mut Driver, group: &SimGroup, old: &str, seed: u64) {
    if !matches!(driver.state.phase, Phase::Blocked(_)) {
        return;
    }
    group.member(old).restart().await;
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

pub async fn inject(fault: Fault, rng: &mut Rng, driver: &mut Driver, t: &Target<'_>) {
    let (group, seed) = (t.group, t.seed);
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
                    replaced_or_blocked(&master),
                )
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            unblock_by_restart(driver, group, &master, seed).await;
        }
        // A crashed container is restarted by the kubelet.
        Fault::KillSlave => {
            group.member(&slave).kill9();
            drive_for(driver, group, rng.millis(200, 1500)).await;
            group.member(&slave).restart().await;
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
                    |s| {
                        s.phase.at_rest() && (s.phase == Phase::Completed || s.phase == Phase::Idle)
                    },
                )
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            // The machine clears the request when it is done (or refused it).
            drive_for(driver, group, Duration::from_millis(300)).await;
        }
        // Replication stops both ways while both brokers and the driver see each other
        // fine: SYNC sends are refused, nobody fails over, and the slave catches up after.
        Fault::PartitionMasterFromSlave => {
            let (m, s) = (group.member(&master), group.member(&slave));
            let (m_ns, s_ns) = (netns_of(group, &master), netns_of(group, &slave));
            m_ns.block_to(&s.host).expect("block master -> slave");
            s_ns.block_to(&m.host).expect("block slave -> master");
            drive_for(driver, group, rng.millis(500, 4000)).await;
            // Evidence that the cut held: the master's writes ran ahead of what its
            // replica confirmed.
            let seen = group
                .admin
                .ha_status(&m.addr())
                .await
                .map(|h| h.max_offset - h.confirm_offset);
            eprintln!("seed {seed}: {master} cut off from {slave}: unconfirmed bytes {seen:?}");
            m_ns.unblock_all().expect("heal master -> slave");
            s_ns.unblock_all().expect("heal slave -> master");
        }
        // Registrations are dropped; clients and the driver still reach the master.
        Fault::PartitionMasterFromNameserver => {
            let m_ns = netns_of(group, &master);
            m_ns.block_to_port(&m_ns.root_ip, t.namesrv_port)
                .expect("block master -> nameserver");
            drive_for(driver, group, rng.millis(500, 4000)).await;
            m_ns.unblock_all().expect("heal master -> nameserver");
        }
        // The operator sees a live master as unreachable and fails over: the old master
        // is fenced by deleting its pod (the restarted broker comes back from the fenced
        // configuration, as a slave) and, once healed, converges on the new master.
        Fault::IsolateMaster => {
            let m_ns = netns_of(group, &master);
            let one_way = rng.below(2) == 0;
            if one_way {
                m_ns.block_outgoing().expect("drop what the master sends");
            } else {
                m_ns.partition().expect("cut the master's link");
            }
            eprintln!(
                "seed {seed}: {master} isolated ({})",
                if one_way { "one way" } else { "link down" }
            );
            driver
                .drive_until(
                    group,
                    Duration::from_secs(90),
                    Duration::from_millis(100),
                    replaced_or_blocked(&master),
                )
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            // The old master stays cut off a while after the failover.
            drive_for(driver, group, rng.millis(300, 2000)).await;
            if one_way {
                m_ns.unblock_all()
                    .expect("heal the master's outgoing traffic");
            } else {
                m_ns.heal().expect("heal the master's link");
            }
            unblock_by_restart(driver, group, &master, seed).await;
        }
    }
}
