//! A simulated broker group for the tests: brokers with a role, an epoch and a commit
//! log, pods that die, come back and get partitioned. It answers the admin protocol
//! ([`Admin`]) and the Kubernetes side ([`GroupApi`]) the executor drives, and checks
//! the safety invariants at the moment each role change lands.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::admin::ha::{HaRole, NO_MASTER_BROKER_ID};
use crate::admin::{
    Admin, AdminError, ClusterInfo, EpochCache, HaStatus, RoleChange, RuntimeInfo, TopicConfig,
};
use crate::crd::{FailoverPolicy, FailoverTrigger};

use super::executor::{ExecError, GroupApi};
use super::machine::{Ha, Member, Observations, Policy, Request, State};

#[derive(Debug, Clone)]
pub struct SimBroker {
    pub pod: String,
    pub broker_id: i64,
    /// The process runs.
    pub alive: bool,
    /// Admin requests reach it (false while partitioned or dead).
    pub reachable: bool,
    pub ready: bool,
    pub unready_since_ms: Option<i64>,
    pub master: bool,
    pub epoch: i64,
    pub max_offset: i64,
    /// Its configuration says master (what a restarted process becomes).
    pub conf_master: bool,
    pub in_sync: bool,
    /// Its pod is being deleted (a drain, a `kubectl delete`): the process runs on until
    /// [`Sim::terminated`].
    pub terminating: bool,
}

#[derive(Debug, Default)]
pub struct World {
    pub brokers: Vec<SimBroker>,
    pub now_ms: i64,
    /// Every promotion that landed: (pod, epoch).
    pub promotions: Vec<(String, i64)>,
    /// Invariant violations seen while applying role changes.
    pub violations: Vec<String>,
    pub labelled_master: Option<String>,
    pub request: Option<Request>,
    pub events: Vec<String>,
    pub deleted: Vec<String>,
    /// Every NOTIFY_BROKER_ROLE_CHANGED received: (address, header).
    pub role_changes: Vec<(String, RoleChange)>,
    /// Pod deletes fail (an API server error).
    pub fail_deletes: bool,
    /// The master's offset as last observed (what the Broker status keeps).
    pub recorded_master_offset: Option<i64>,
}

#[derive(Clone, Default)]
pub struct Sim(pub Arc<Mutex<World>>);

impl Sim {
    /// A group of `n` pods `g-<i>`, `g-0` master at epoch 1, all in sync at `offset`.
    pub fn group(n: usize, offset: i64) -> Self {
        let brokers = (0..n)
            .map(|i| SimBroker {
                pod: format!("g-{i}"),
                broker_id: i as i64,
                alive: true,
                reachable: true,
                ready: true,
                unready_since_ms: None,
                master: i == 0,
                epoch: 1,
                max_offset: offset,
                conf_master: i == 0,
                in_sync: true,
                terminating: false,
            })
            .collect();
        Self(Arc::new(Mutex::new(World {
            brokers,
            labelled_master: Some("g-0".to_owned()),
            recorded_master_offset: Some(offset),
            now_ms: 1_000_000,
            ..World::default()
        })))
    }

    pub fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn observations(&self, policy: Policy, master: &str) -> Observations {
        let mut w = self.world();
        let live = w
            .brokers
            .iter()
            .find(|b| b.pod == master && b.reachable && b.master)
            .map(|b| b.max_offset);
        if live.is_some() {
            w.recorded_master_offset = live;
        }
        let master_offset = w.recorded_master_offset;
        Observations {
            now_ms: w.now_ms,
            policy,
            members: w
                .brokers
                .iter()
                .map(|b| Member {
                    pod: b.pod.clone(),
                    broker_id: b.broker_id,
                    exists: !b.terminating,
                    terminating: b.terminating,
                    ready: b.ready,
                    unready_since_ms: b.unready_since_ms,
                    ha: b.reachable.then_some(Ha {
                        master: b.master,
                        epoch: b.epoch,
                        max_offset: b.max_offset,
                    }),
                    in_sync: b.in_sync,
                })
                .collect(),
            request: w.request.clone(),
            master_offset,
        }
    }

    /// What the reconciler's configuration rendering does after a step: the recorded
    /// master's configuration says master unless it is fenced mid-failover.
    pub fn render_configs(&self, state: &State) {
        let mut w = self.world();
        for b in &mut w.brokers {
            b.conf_master =
                b.pod == state.master && (state.phase.at_rest() || !state.fenced.contains(&b.pod));
        }
    }

    pub fn kill(&self, i: usize) {
        let mut w = self.world();
        let now = w.now_ms;
        let b = &mut w.brokers[i];
        b.alive = false;
        b.reachable = false;
        b.master = false;
        if b.ready {
            b.unready_since_ms = Some(now);
        }
        b.ready = false;
    }

    /// The pod gets a deletionTimestamp; its process keeps running (and writing, if it
    /// is master) until [`Self::terminated`].
    pub fn terminate(&self, i: usize) {
        let mut w = self.world();
        let now = w.now_ms;
        let b = &mut w.brokers[i];
        b.terminating = true;
        if b.ready {
            b.unready_since_ms = Some(now);
        }
        b.ready = false;
    }

    /// The terminating pod's process exited and the StatefulSet made a new pod object,
    /// not started yet.
    pub fn terminated(&self, i: usize) {
        let mut w = self.world();
        let b = &mut w.brokers[i];
        b.terminating = false;
        b.alive = false;
        b.reachable = false;
        b.master = false;
    }

    pub fn partition(&self, i: usize) {
        let mut w = self.world();
        let now = w.now_ms;
        let b = &mut w.brokers[i];
        b.reachable = false;
        if b.ready {
            b.unready_since_ms = Some(now);
        }
        b.ready = false;
    }

    /// A dead process restarts from its configuration; a partition heals.
    pub fn revive(&self, i: usize) {
        let mut w = self.world();
        let b = &mut w.brokers[i];
        if !b.alive {
            b.alive = true;
            b.master = b.conf_master;
        }
        b.reachable = true;
        b.ready = true;
        b.unready_since_ms = None;
    }

    /// The master with the highest epoch takes `bytes`; slaves following it copy up to
    /// `copy` bytes of what they miss and are in sync when fully caught up.
    pub fn write(&self, bytes: i64, copy: i64) {
        let mut w = self.world();
        let Some(master) = w
            .brokers
            .iter()
            .filter(|b| b.alive && b.master)
            .max_by_key(|b| b.epoch)
            .map(|b| b.pod.clone())
        else {
            return;
        };
        let mut top = 0;
        for b in &mut w.brokers {
            if b.pod == master {
                b.max_offset += bytes;
                top = b.max_offset;
            }
        }
        for b in &mut w.brokers {
            if b.pod != master && b.alive && b.reachable && !b.master {
                b.max_offset = (b.max_offset + copy).min(top.max(b.max_offset));
                b.in_sync = b.max_offset >= top;
            }
        }
    }

    pub fn advance(&self, ms: i64) {
        self.world().now_ms += ms;
    }
}

fn refuse(addr: &str, what: &'static str) -> AdminError {
    AdminError::Refused {
        addr: addr.to_owned(),
        request: what,
        code: 1,
        remark: "not simulated".to_owned(),
    }
}

fn unreachable(addr: &str) -> AdminError {
    AdminError::Connect {
        addr: addr.to_owned(),
        source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
    }
}

impl World {
    fn apply_role_change(&mut self, addr: &str, change: &RoleChange) -> Result<(), AdminError> {
        self.role_changes.push((addr.to_owned(), change.clone()));
        let Some(i) = self
            .brokers
            .iter()
            .position(|b| b.pod == addr && b.reachable && b.alive)
        else {
            return Err(unreachable(addr));
        };
        if change.master_epoch < self.brokers[i].epoch {
            return Err(AdminError::Refused {
                addr: addr.to_owned(),
                request: "NOTIFY_BROKER_ROLE_CHANGED",
                code: 1,
                remark: "stale epoch".to_owned(),
            });
        }
        let becomes_master = change.master_broker_id != NO_MASTER_BROKER_ID
            && change.master_broker_id == self.brokers[i].broker_id;
        if becomes_master && !self.brokers[i].master {
            for (j, b) in self.brokers.iter().enumerate() {
                if j != i && b.alive && b.master {
                    self.violations.push(format!(
                        "{addr} promoted at epoch {} while {} is still master at epoch {}",
                        change.master_epoch, b.pod, b.epoch
                    ));
                }
            }
            if let Some((_, last)) = self.promotions.last()
                && change.master_epoch <= *last
            {
                self.violations.push(format!(
                    "promotion epoch {} not above the previous {last}",
                    change.master_epoch
                ));
            }
            self.promotions.push((addr.to_owned(), change.master_epoch));
        }
        let b = &mut self.brokers[i];
        b.epoch = change.master_epoch;
        b.master = becomes_master;
        Ok(())
    }
}

impl Admin for Sim {
    /// The simulation models no ACL or TLS: however reached, calls reach the same world.
    fn scoped(&self, _: crate::admin::PeerAccess) -> Arc<dyn Admin> {
        Arc::new(self.clone())
    }
    fn cluster_info<'a>(&'a self, a: &'a str) -> BoxFuture<'a, Result<ClusterInfo, AdminError>> {
        Box::pin(async move { Err(refuse(a, "GET_BROKER_CLUSTER_INFO")) })
    }
    fn create_topic<'a>(
        &'a self,
        a: &'a str,
        _: &'a TopicConfig,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move { Err(refuse(a, "UPDATE_AND_CREATE_TOPIC")) })
    }
    fn delete_topic_in_broker<'a>(
        &'a self,
        a: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move { Err(refuse(a, "DELETE_TOPIC_IN_BROKER")) })
    }
    fn delete_topic_in_namesrv<'a>(
        &'a self,
        a: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move { Err(refuse(a, "DELETE_TOPIC_IN_NAMESRV")) })
    }
    fn runtime_info<'a>(&'a self, a: &'a str) -> BoxFuture<'a, Result<RuntimeInfo, AdminError>> {
        Box::pin(async move { Err(refuse(a, "GET_BROKER_RUNTIME_INFO")) })
    }
    fn topic_configs<'a>(
        &'a self,
        a: &'a str,
    ) -> BoxFuture<'a, Result<std::collections::BTreeMap<String, TopicConfig>, AdminError>> {
        Box::pin(async move { Err(refuse(a, "GET_ALL_TOPIC_CONFIG")) })
    }
    fn update_broker_config<'a>(
        &'a self,
        a: &'a str,
        _: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move { Err(refuse(a, "UPDATE_BROKER_CONFIG")) })
    }
    fn ha_status<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, Result<HaStatus, AdminError>> {
        Box::pin(async move {
            let w = self.world();
            let b = w
                .brokers
                .iter()
                .find(|b| b.pod == addr && b.reachable)
                .ok_or_else(|| unreachable(addr))?;
            Ok(HaStatus {
                master: b.master,
                role: if b.master {
                    HaRole::SyncMaster
                } else {
                    HaRole::Slave
                },
                epoch: b.epoch,
                broker_id: b.broker_id,
                master_commit_log_max_offset: 0,
                max_offset: b.max_offset,
                confirm_offset: 0,
                in_sync_slave_nums: 0,
                ha_connection_info: Vec::new(),
                ha_client_runtime_info: None,
            })
        })
    }
    fn epoch_cache<'a>(&'a self, a: &'a str) -> BoxFuture<'a, Result<EpochCache, AdminError>> {
        Box::pin(async move { Err(refuse(a, "GET_BROKER_EPOCH_CACHE")) })
    }
    fn notify_role_changed<'a>(
        &'a self,
        addr: &'a str,
        change: &'a RoleChange,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move { self.world().apply_role_change(addr, change) })
    }
}

impl GroupApi for Sim {
    fn address(&self, pod: &str) -> String {
        pod.to_owned()
    }
    fn delete_pod<'a>(&'a self, pod: &'a str) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            let mut w = self.world();
            if w.fail_deletes {
                return Err(ExecError::Api("injected failure".to_owned()));
            }
            w.deleted.push(pod.to_owned());
            let now = w.now_ms;
            if let Some(b) = w.brokers.iter_mut().find(|b| b.pod == pod) {
                // The kube implementation writes the fenced configuration first.
                b.conf_master = false;
                if b.terminating {
                    // Already being deleted: deleting again changes nothing.
                    return Ok(());
                }
                b.alive = false;
                b.reachable = false;
                b.master = false;
                if b.ready {
                    b.unready_since_ms = Some(now);
                }
                b.ready = false;
            }
            Ok(())
        })
    }
    fn repoint<'a>(&'a self, master: &'a str) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            let mut w = self.world();
            w.labelled_master = Some(master.to_owned());
            for b in &mut w.brokers {
                b.conf_master = b.pod == master;
            }
            Ok(())
        })
    }
    fn clear_request<'a>(&'a self) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            self.world().request = None;
            Ok(())
        })
    }
    fn publish<'a>(
        &'a self,
        _warning: bool,
        reason: &'a str,
        _message: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move { self.world().events.push(reason.to_owned()) })
    }
}

pub fn policy(mode: FailoverPolicy, allow_unclean: bool) -> Policy {
    Policy {
        mode,
        unavailable_for_ms: 5_000,
        max_lag_bytes: 1_000,
        allow_unclean,
        async_acks: false,
    }
}

pub fn switchover(target: Option<&str>) -> Request {
    Request {
        trigger: FailoverTrigger::Switchover,
        target: target.map(str::to_owned),
    }
}
