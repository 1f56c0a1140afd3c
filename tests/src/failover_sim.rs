//! One broker group of real `rmq-broker` processes driven by the operator's own failover
//! logic: [`Driver`] builds observations with `operator::failover::observe` from the
//! processes (pod facts from process liveness and `/readyz`, HA status from the real
//! GET_BROKER_HA_STATUS through [`RemotingAdmin`]), calls `operator::failover::step` and
//! applies the actions with `operator::failover::executor::execute`. [`SimGroup`] is the
//! executor's `GroupApi`: a deleted pod is SIGKILLed and recreated (restarted with the
//! configuration the operator last wrote for it) once the group is repointed; repointing
//! rewrites every member's `brokerId`/`brokerRole` the way the operator's ConfigMap does.
//!
//! [`SimGroup::start_in_namespaces`] runs each member in a network namespace of its own
//! (`crate::netns`), so a test can partition members from each other, from the
//! nameserver, or from the driver; everyone else stays in the root namespace and reaches
//! members at their namespace address.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use operator::admin::{Admin, HaStatus, RemotingAdmin};
use operator::crd::{AckMode, FailoverSpec, GroupStatus, MemberStatus};
use operator::failover::executor::{ExecError, GroupApi, Recorder, execute};
use operator::failover::observe::{self, PodFacts};
use operator::failover::{Action, Phase, Request, State, step};
use operator::metrics::{GroupLabels, Metrics};
use operator::reconcile::broker::status::identities;

use crate::broker_harness::{BrokerProcess, Launch};
use crate::netns::Netns;
use crate::{http, ports};

/// The group's master role (`replication.ackMode`).
fn master_role(mode: AckMode) -> &'static str {
    match mode {
        AckMode::Sync => "SYNC_MASTER",
        AckMode::Async => "ASYNC_MASTER",
    }
}

/// `brokerRole` of one member for its brokerId: id 0 is the group's master.
fn role_for(broker_id: i64, mode: AckMode) -> &'static str {
    if broker_id == 0 {
        master_role(mode)
    } else {
        "SLAVE"
    }
}

/// One pod of the group: a broker process with fixed ports and its own data directory,
/// reached at `host` (its namespace's address, or 127.0.0.1).
pub struct SimMember {
    pub pod: String,
    pub host: String,
    pub port: u16,
    pub http_port: u16,
    pub ha_port: u16,
    process: Arc<Mutex<BrokerProcess>>,
    /// Deleted and not yet recreated, or being restarted.
    pending: Arc<AtomicBool>,
    unready_since_ms: Mutex<Option<i64>>,
    _dir: tempfile::TempDir,
    /// The member's own network namespace, if it has one; declared last so the process
    /// is killed before its namespace goes.
    pub netns: Option<Netns>,
}

impl SimMember {
    /// Where clients, the driver and the other members reach it (what it advertises).
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BrokerProcess> {
        self.process.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// SIGKILL (the container dies; the pod object stays until the operator deletes it).
    pub fn kill9(&self) {
        self.lock().kill9();
    }

    /// SIGSTOP / SIGCONT: a paused broker keeps its connections but answers nothing.
    pub fn pause(&self) {
        self.lock().pause();
    }

    pub fn resume(&self) {
        self.lock().resume();
    }

    /// What the kubelet or the StatefulSet controller does for a dead container or a
    /// deleted pod: starts the process again with the configuration the reconciler last
    /// wrote, and waits until it is ready. A deleted pod counts as recreated from then
    /// on, even if the machine has not repointed the group yet.
    pub async fn restart(&self) {
        let process = Arc::clone(&self.process);
        let pending = Arc::clone(&self.pending);
        tokio::task::spawn_blocking(move || {
            let mut p = process.lock().unwrap_or_else(|p| p.into_inner());
            if !p.running() {
                p.kill9();
                p.restart();
            }
            pending.store(false, Ordering::Release);
        })
        .await
        .expect("restart task");
    }

    /// Whether the process runs; a member being restarted (its lock held) does not.
    pub fn running(&self) -> bool {
        !self.pending.load(Ordering::Acquire) && self.lock().running()
    }

    pub fn conf(&self, key: &str) -> Option<String> {
        self.lock().conf(key).map(str::to_owned)
    }

    pub fn log(&self) -> String {
        self.lock().log()
    }
}

/// The group as the executor's `GroupApi` sees it.
pub struct SimGroup {
    pub members: Vec<SimMember>,
    pub admin: RemotingAdmin,
    /// Every Event the executor published.
    pub events: Mutex<Vec<String>>,
    /// The pod labelled master (what the master Service selects).
    pub labelled_master: Mutex<String>,
    /// The master before the step being executed (what a pod delete fences).
    master_before: Mutex<String>,
    pub ack_mode: AckMode,
}

impl SimGroup {
    /// Starts `replicas` brokers named `<name>-0-<i>`; `<name>-0-0` is SYNC_MASTER with
    /// brokerId 0, the others SLAVE. `extra` config lines apply to every member.
    pub fn start(name: &str, replicas: usize, namesrv_port: u16, extra: &[(&str, &str)]) -> Self {
        Self::start_with_mode(name, replicas, namesrv_port, extra, AckMode::Sync)
    }

    /// [`Self::start`] for a group of `replication.ackMode` `mode`.
    pub fn start_with_mode(
        name: &str,
        replicas: usize,
        namesrv_port: u16,
        extra: &[(&str, &str)],
        mode: AckMode,
    ) -> Self {
        let nets = (0..replicas).map(|_| None).collect();
        Self::start_members(name, namesrv_port, extra, mode, nets)
    }

    /// [`Self::start_with_mode`] with member `i` in network namespace `nets[i]`, which
    /// must reach the others ([`Netns::route_to_peers`]). The nameserver must listen on
    /// the root namespace's addresses (`bindAddress=0.0.0.0`): each member reaches it at
    /// its own veth's root end.
    pub fn start_in_namespaces(
        name: &str,
        nets: Vec<Netns>,
        namesrv_port: u16,
        extra: &[(&str, &str)],
        mode: AckMode,
    ) -> Self {
        let nets = nets.into_iter().map(Some).collect();
        Self::start_members(name, namesrv_port, extra, mode, nets)
    }

    fn start_members(
        name: &str,
        namesrv_port: u16,
        extra: &[(&str, &str)],
        mode: AckMode,
        nets: Vec<Option<Netns>>,
    ) -> Self {
        let master = format!("{name}-0-0");
        let state = State::idle(&master, 0);
        let ids = identities(nets.len() as i32, &state);
        let members = nets
            .into_iter()
            .enumerate()
            .map(|(i, netns)| {
                let dir = tempfile::tempdir().expect("temp dir");
                let ha_port = ports::free_port();
                let id = ids[i].broker_id.to_string();
                let ha = ha_port.to_string();
                let mut conf: Vec<(&str, &str)> = vec![
                    ("brokerName", name),
                    ("haListenPort", &ha),
                    ("brokerId", &id),
                    ("brokerRole", role_for(ids[i].broker_id, mode)),
                    ("haMasterRole", master_role(mode)),
                ];
                let namesrv = netns
                    .as_ref()
                    .map(|n| format!("{}:{namesrv_port}", n.root_ip));
                if let (Some(n), Some(namesrv)) = (&netns, &namesrv) {
                    // Advertised in routes, message ids and the HA address slaves dial.
                    conf.extend([
                        ("bindAddress", "0.0.0.0"),
                        ("brokerIP1", n.ns_ip.as_str()),
                        ("namesrvAddr", namesrv.as_str()),
                    ]);
                }
                conf.extend_from_slice(extra);
                let broker = match &netns {
                    Some(n) => BrokerProcess::start_with(
                        dir.path(),
                        None,
                        &conf,
                        Launch {
                            prefix: n.exec_prefix(),
                            host: n.ns_ip.clone(),
                        },
                    ),
                    None => BrokerProcess::start_in(dir.path(), Some(namesrv_port), &conf),
                };
                SimMember {
                    pod: format!("{name}-0-{i}"),
                    host: netns
                        .as_ref()
                        .map_or_else(|| "127.0.0.1".to_owned(), |n| n.ns_ip.clone()),
                    port: broker.port,
                    http_port: broker.http_port,
                    ha_port,
                    process: Arc::new(Mutex::new(broker)),
                    pending: Arc::default(),
                    unready_since_ms: Mutex::new(None),
                    _dir: dir,
                    netns,
                }
            })
            .collect();
        Self {
            members,
            admin: RemotingAdmin::new(Duration::from_secs(2)),
            events: Mutex::default(),
            labelled_master: Mutex::new(master.clone()),
            master_before: Mutex::new(master),
            ack_mode: mode,
        }
    }

    pub fn member(&self, pod: &str) -> &SimMember {
        self.members
            .iter()
            .find(|m| m.pod == pod)
            .unwrap_or_else(|| panic!("no member {pod}"))
    }

    pub fn data_dir(&self, pod: &str) -> &Path {
        self.member(pod)._dir.path()
    }

    /// Writes every member's brokerId/brokerRole for `state` (the operator's ConfigMap).
    fn write_configs(&self, state: &State) {
        let ids = identities(self.members.len() as i32, state);
        for (m, id) in self.members.iter().zip(ids) {
            let mut p = m.lock();
            p.set_conf("brokerId", &id.broker_id.to_string());
            p.set_conf("brokerRole", role_for(id.broker_id, self.ack_mode));
        }
    }

    /// Pod facts and GET_BROKER_HA_STATUS answers of every member, as the reconciler
    /// collects them; brokerIds come from `state` like the reconciler's `pod_facts`.
    pub async fn observe(&self, state: &State) -> (Vec<PodFacts>, BTreeMap<String, HaStatus>) {
        let ids = identities(self.members.len() as i32, state);
        let now = now_ms();
        let mut facts = Vec::new();
        let mut ha = BTreeMap::new();
        for (m, id) in self.members.iter().zip(ids) {
            let pending = m.pending.load(Ordering::Acquire);
            let running = !pending && m.running();
            // One retry: on a loaded machine a single slow answer would make a live pod
            // look unreachable (which reverts a planned switchover at once).
            let mut ready = false;
            let mut status = None;
            for _ in 0..2 {
                if !running {
                    break;
                }
                // Bounded like a kubelet probe: a paused (SIGSTOP) broker reads as unready.
                let probe = tokio::time::timeout(
                    Duration::from_secs(1),
                    http::get_at(&m.host, m.http_port, "/readyz"),
                );
                ready = ready || matches!(probe.await, Ok(Ok((200, _))));
                if status.is_none() {
                    status = self.admin.ha_status(&m.addr()).await.ok();
                }
                if ready && status.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if let Some(h) = status {
                ha.insert(m.pod.clone(), h);
            }
            let unready_since_ms = {
                let mut since = m.unready_since_ms.lock().unwrap_or_else(|p| p.into_inner());
                if ready {
                    *since = None;
                } else {
                    since.get_or_insert(now);
                }
                *since
            };
            facts.push(PodFacts {
                pod: m.pod.clone(),
                broker_id: id.broker_id,
                exists: true,
                terminating: false,
                ready,
                unready_since_ms,
                ip: Some(m.host.clone()),
            });
        }
        (facts, ha)
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl GroupApi for SimGroup {
    fn address(&self, pod: &str) -> String {
        self.member(pod).addr()
    }

    fn delete_pod<'a>(&'a self, pod: &'a str) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            // Like the reconciler: the recreated pod must not start as master.
            let master = self
                .master_before
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let fenced = State {
                phase: Phase::Fencing,
                fenced: vec![master.clone()],
                ..State::idle(&master, 0)
            };
            self.write_configs(&fenced);
            let m = self.member(pod);
            m.pending.store(true, Ordering::Release);
            let process = Arc::clone(&m.process);
            tokio::task::spawn_blocking(move || {
                process.lock().unwrap_or_else(|p| p.into_inner()).kill9();
            })
            .await
            .map_err(|e| ExecError::Api(e.to_string()))
        })
    }

    fn repoint<'a>(&'a self, master: &'a str) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            self.write_configs(&State::idle(master, 0));
            *self
                .labelled_master
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = master.to_owned();
            // Deleted pods come back now, with the configuration just written.
            for m in &self.members {
                if m.pending.load(Ordering::Acquire) {
                    let process = Arc::clone(&m.process);
                    let pending = Arc::clone(&m.pending);
                    tokio::task::spawn_blocking(move || {
                        process.lock().unwrap_or_else(|p| p.into_inner()).restart();
                        pending.store(false, Ordering::Release);
                    });
                }
            }
            Ok(())
        })
    }

    fn clear_request<'a>(&'a self) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async { Ok(()) })
    }

    fn publish<'a>(
        &'a self,
        warning: bool,
        reason: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let kind = if warning { "Warning" } else { "Normal" };
            self.events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("{kind} {reason}: {message}"));
        })
    }
}

/// The operator's reconcile loop for one group, minus the API server: the failover state
/// and the recorded group status live here.
pub struct Driver {
    pub state: State,
    pub previous: Option<GroupStatus>,
    pub spec: FailoverSpec,
    /// A switchover request (the annotation); removed when the machine clears it.
    pub request: Option<Request>,
    /// The group's `replication.ackMode` (what the failover policy reads).
    pub ack_mode: AckMode,
    metrics: Metrics,
    /// Every action executed, with the phase it was taken in.
    pub log: Vec<(Phase, Action)>,
    /// Each phase change with the observations that caused it.
    pub trace: Vec<String>,
}

impl Driver {
    pub fn new(master: &str, spec: FailoverSpec) -> Self {
        Self {
            state: State::idle(master, 0),
            previous: None,
            spec,
            request: None,
            ack_mode: AckMode::Sync,
            metrics: Metrics::default(),
            log: Vec::new(),
            trace: Vec::new(),
        }
    }

    /// One reconcile step: observe, `step`, execute. Returns whether anything moved.
    pub async fn tick(&mut self, group: &SimGroup) -> Result<bool, ExecError> {
        let (facts, ha) = group.observe(&self.state).await;
        let obs = observe::observations(
            observe::policy(&self.spec, self.ack_mode),
            now_ms(),
            &self.state.master,
            &facts,
            &ha,
            self.previous.as_ref(),
            self.request.clone(),
        );
        self.previous = Some(record(&self.state, &facts, &ha, self.previous.as_ref()));
        let (next, actions) = step(&self.state, &obs);
        *group
            .master_before
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = self.state.master.clone();
        let recorder = Recorder {
            metrics: &self.metrics,
            group: GroupLabels {
                resource_namespace: "e2e".to_owned(),
                broker: "fo".to_owned(),
                broker_name: "fo-0".to_owned(),
            },
        };
        execute(&actions, group, &group.admin, &recorder).await?;
        if actions.contains(&Action::ClearRequest) {
            self.request = None;
        }
        let moved = next.phase != self.state.phase || actions.iter().any(Action::acts);
        if next.phase != self.state.phase {
            self.trace.push(format!(
                "{} -> {}: master offset {:?}, members {:?}",
                self.state.phase.name(),
                next.phase.name(),
                obs.master_offset,
                obs.members
            ));
        }
        for a in actions {
            self.log.push((self.state.phase, a));
        }
        self.state = next;
        Ok(moved)
    }

    /// Ticks (every `poll` while nothing moves) until `done` holds for the state.
    pub async fn drive_until(
        &mut self,
        group: &SimGroup,
        within: Duration,
        poll: Duration,
        done: impl Fn(&State) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + within;
        while !done(&self.state) {
            if Instant::now() > deadline {
                return Err(format!(
                    "failover did not finish: state {:?}; actions {:#?}",
                    self.state, self.log
                ));
            }
            match self.tick(group).await {
                Ok(true) => {}
                Ok(false) => tokio::time::sleep(poll).await,
                // A failed action repeats with the next step, as in the reconciler.
                Err(e) => {
                    eprintln!("failover step failed: {e}");
                    tokio::time::sleep(poll).await;
                }
            }
        }
        Ok(())
    }
}

/// What the reconciler keeps in `status.groups[]` between steps: the master's offset and
/// each member's in-sync flag and epoch.
fn record(
    state: &State,
    facts: &[PodFacts],
    ha: &BTreeMap<String, HaStatus>,
    previous: Option<&GroupStatus>,
) -> GroupStatus {
    let in_sync = observe::in_sync_set(&state.master, facts, ha, previous);
    GroupStatus {
        master_pod: Some(state.master.clone()),
        epoch: state.epoch,
        master_max_offset: observe::master_offset(&state.master, ha, previous),
        members: facts
            .iter()
            .map(|f| MemberStatus {
                pod: f.pod.clone(),
                broker_id: f.broker_id,
                ready: f.ready,
                in_sync: in_sync.get(&f.pod).copied(),
                epoch: ha.get(&f.pod).map(|h| h.epoch),
                ..MemberStatus::default()
            })
            .collect(),
        ..GroupStatus::default()
    }
}

/// The epoch cache of a broker as (epoch, start offset) pairs plus its max offset.
pub async fn epochs(admin: &RemotingAdmin, addr: &str) -> Option<(Vec<(i64, i64)>, i64)> {
    let c = admin.epoch_cache(addr).await.ok()?;
    Some((
        c.epoch_list
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect(),
        c.max_offset,
    ))
}
