//! Pure status computation for a Broker: from observed pods and broker runtime info to
//! `status.groups` and the conditions.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::admin::{HaStatus, RuntimeInfo};
use crate::builders::config_file::{MemberIdentity, fenced_identities, member_identities};
use crate::conditions::{self, Desired};
use crate::crd::{FailoverPhase, GroupStatus, MemberRole, MemberStatus};
use crate::failover::observe::{self, PodFacts};
use crate::failover::{State, status};
use crate::names::{ANNOTATION_CONFIG_HASH, BrokerNames, LABEL_REVISION};
use crate::restart_plan::PodView;

/// What the reconciler needs from one broker pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedPod {
    pub name: String,
    pub group: i32,
    pub ordinal: i32,
    pub ready: bool,
    pub revision: Option<String>,
    pub config_hash: Option<String>,
    pub terminating: bool,
    pub labels: BTreeMap<String, String>,
    /// When the Ready condition last turned false (epoch ms); `None` while ready.
    pub unready_since_ms: Option<i64>,
    pub ip: Option<String>,
    /// The node the pod runs on.
    pub node: Option<String>,
    /// Annotated `rmq-rs.dev/drain: "true"`.
    pub drain_requested: bool,
}

impl ObservedPod {
    /// `None` for pods whose name is not `<cluster>-<group>-<ordinal>`.
    pub fn from_pod(pod: &Pod, names: &BrokerNames) -> Option<Self> {
        let name = pod.metadata.name.clone()?;
        let rest = name.strip_prefix(&format!("{}-", names.cluster))?;
        let (group, ordinal) = rest.split_once('-')?;
        let ready_condition = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
        let ready = ready_condition.is_some_and(|c| c.status == "True");
        let unready_since_ms = ready_condition
            .filter(|c| c.status != "True")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.as_millisecond());
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        Some(Self {
            group: group.parse().ok()?,
            ordinal: ordinal.parse().ok()?,
            ready,
            revision: labels.get(LABEL_REVISION).cloned(),
            config_hash: pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_CONFIG_HASH))
                .cloned(),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            labels,
            unready_since_ms,
            ip: pod.status.as_ref().and_then(|s| s.pod_ip.clone()),
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            drain_requested: crate::names::annotation_is(
                pod.metadata.annotations.as_ref(),
                crate::names::ANNOTATION_DRAIN,
                "true",
            ),
            name,
        })
    }

    pub fn view(&self) -> PodView {
        PodView {
            name: self.name.clone(),
            ordinal: self.ordinal,
            ready: self.ready,
            revision: self.revision.clone(),
            terminating: self.terminating,
            in_sync: None,
        }
    }
}

/// Ordinal of the master recorded in a previous group status (0 when unknown).
pub fn master_ordinal(previous: Option<&GroupStatus>) -> i32 {
    previous
        .and_then(|g| g.master_pod.as_deref())
        .map_or(0, pod_ordinal)
}

/// The ordinal at the end of a pod name (`<cluster>-<group>-<ordinal>`), 0 if none.
pub fn pod_ordinal(pod: &str) -> i32 {
    pod.rsplit('-')
        .next()
        .and_then(|o| o.parse().ok())
        .unwrap_or(0)
}

/// Whether the group's configuration must show no master: its master is fenced and the
/// failover has not moved it yet.
pub fn master_fenced(state: &State) -> bool {
    !state.phase.at_rest() && state.fenced.contains(&state.master)
}

/// brokerIds of the members for a failover state.
pub fn identities(replicas: i32, state: &State) -> Vec<MemberIdentity> {
    let master = pod_ordinal(&state.master);
    if master_fenced(state) {
        fenced_identities(replicas, master)
    } else {
        member_identities(replicas, master)
    }
}

/// What the reconciler saw of one group.
#[derive(Debug, Clone, Copy)]
pub struct GroupObservation<'a> {
    pub pods: &'a [ObservedPod],
    /// GET_BROKER_RUNTIME_INFO by pod name.
    pub runtime: &'a BTreeMap<String, RuntimeInfo>,
    /// GET_BROKER_HA_STATUS by pod name.
    pub ha: &'a BTreeMap<String, HaStatus>,
}

/// One group's status after the failover machine's step produced `state`. Members
/// without runtime or HA answers get no lag figures.
pub fn group_status(
    names: &BrokerNames,
    group: i32,
    replicas: i32,
    seen: GroupObservation<'_>,
    state: &State,
    previous: Option<&GroupStatus>,
) -> GroupStatus {
    let master_pod = state.master.clone();
    let master_offset = observe::master_offset(&master_pod, seen.ha, previous).or_else(|| {
        seen.runtime
            .get(&master_pod)
            .and_then(RuntimeInfo::commit_log_max_offset)
    });
    let facts: Vec<PodFacts> = (0..replicas)
        .map(|o| PodFacts {
            pod: names.pod(group, o),
            broker_id: 0,
            exists: true,
            terminating: false,
            ready: true,
            unready_since_ms: None,
            ip: seen
                .pods
                .iter()
                .find(|p| p.name == names.pod(group, o))
                .and_then(|p| p.ip.clone()),
        })
        .collect();
    let in_sync = observe::in_sync_set(&master_pod, &facts, seen.ha, previous);
    let members = identities(replicas, state)
        .into_iter()
        .map(|m| {
            let pod = names.pod(group, m.ordinal);
            let observed = seen.pods.iter().find(|p| p.name == pod);
            let info = seen.runtime.get(&pod);
            let ha = seen.ha.get(&pod);
            let own_offset = ha
                .map(|h| h.max_offset)
                .or_else(|| info.and_then(RuntimeInfo::commit_log_max_offset));
            let lag = if pod == master_pod {
                own_offset.map(|_| 0)
            } else {
                match (master_offset, own_offset) {
                    (Some(master), Some(own)) => Some((master - own).max(0)),
                    _ => None,
                }
            };
            MemberStatus {
                role: if m.broker_id == 0 {
                    MemberRole::Master
                } else {
                    MemberRole::Slave
                },
                broker_id: m.broker_id,
                ready: observed.is_some_and(|p| p.ready),
                replication_lag_bytes: lag,
                in_sync: (pod != master_pod).then(|| in_sync.get(&pod).copied().unwrap_or(false)),
                epoch: ha.map(|h| h.epoch),
                dispatch_behind_bytes: info.and_then(RuntimeInfo::dispatch_behind_bytes),
                config_hash: observed.and_then(|p| p.config_hash.clone()),
                pod,
            }
        })
        .collect();
    GroupStatus {
        broker_name: names.broker_name(group),
        master_pod: Some(master_pod.clone()),
        epoch: state.epoch,
        master_max_offset: master_offset,
        confirm_offset: seen
            .ha
            .get(&master_pod)
            .filter(|h| h.master)
            .map(|h| h.confirm_offset)
            .or_else(|| previous.and_then(|g| g.confirm_offset)),
        members,
        failover: status::to_status(state),
    }
}

/// Summary of the whole cluster for the conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollout {
    /// Pods still running an outdated template.
    pub outdated: Vec<String>,
    /// Why the rollout cannot progress right now, if it is waiting.
    pub waiting: Option<String>,
    /// The pod restarted in this reconcile.
    pub restarted: Option<String>,
    /// Set when `waiting` is a refusal (Progressing=False with this reason), not a wait.
    pub blocked_reason: Option<&'static str>,
}

pub fn broker_conditions(groups: &[GroupStatus], rollout: &Rollout) -> Vec<Desired> {
    let total: usize = groups.iter().map(|g| g.members.len()).sum();
    let ready: usize = groups
        .iter()
        .map(|g| g.members.iter().filter(|m| m.ready).count())
        .sum();
    let masters_down: Vec<&str> = groups
        .iter()
        .filter(|g| {
            !g.members
                .iter()
                .any(|m| m.role == MemberRole::Master && m.ready)
        })
        .map(|g| g.broker_name.as_str())
        .collect();
    let failing_over: Vec<&str> = groups
        .iter()
        .filter(|g| {
            !matches!(
                g.failover.phase,
                FailoverPhase::Idle | FailoverPhase::Completed
            )
        })
        .map(|g| g.broker_name.as_str())
        .collect();
    let settled = ready == total && rollout.outdated.is_empty();

    let ready_cond = if settled {
        Desired::new(
            conditions::READY,
            true,
            "Ready",
            format!("{ready}/{total} brokers ready"),
        )
    } else if !masters_down.is_empty() {
        Desired::new(
            conditions::READY,
            false,
            "MasterUnavailable",
            format!("no ready master in {}", masters_down.join(", ")),
        )
    } else {
        Desired::new(
            conditions::READY,
            false,
            "Rolling",
            format!(
                "{ready}/{total} brokers ready, {} outdated",
                rollout.outdated.len()
            ),
        )
    };
    let progressing = match (&rollout.restarted, &rollout.waiting) {
        (_, Some(why)) if rollout.blocked_reason.is_some() => Desired::new(
            conditions::PROGRESSING,
            false,
            rollout.blocked_reason.unwrap_or("Blocked"),
            why.clone(),
        ),
        (Some(pod), _) => Desired::new(
            conditions::PROGRESSING,
            true,
            "RollingRestart",
            format!(
                "restarted {pod}; {} pod(s) outdated",
                rollout.outdated.len()
            ),
        ),
        (None, Some(why)) if !settled => {
            Desired::new(conditions::PROGRESSING, true, "Waiting", why.clone())
        }
        _ if !settled => Desired::new(
            conditions::PROGRESSING,
            true,
            "PodsStarting",
            format!("{ready}/{total} brokers ready"),
        ),
        _ => Desired::new(
            conditions::PROGRESSING,
            false,
            "Stable",
            "no change in progress",
        ),
    };
    let degraded = if masters_down.is_empty() {
        Desired::new(
            conditions::DEGRADED,
            false,
            "AllMastersReady",
            "every group has a ready master",
        )
    } else {
        Desired::new(
            conditions::DEGRADED,
            true,
            "MasterUnavailable",
            format!(
                "writes to {} fail until its master is back",
                masters_down.join(", ")
            ),
        )
    };
    let failover = if failing_over.is_empty() {
        Desired::new(
            conditions::FAILOVER_IN_PROGRESS,
            false,
            "Idle",
            "no failover in progress",
        )
    } else {
        Desired::new(
            conditions::FAILOVER_IN_PROGRESS,
            true,
            "FailoverRunning",
            failing_over.join(", "),
        )
    };
    vec![
        ready_cond,
        progressing,
        degraded,
        failover,
        Desired::new(
            conditions::RECONCILIATION_PAUSED,
            false,
            "Reconciling",
            "the operator manages this object",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(name: &str, ordinal: i32, ready: bool) -> ObservedPod {
        ObservedPod {
            name: name.to_owned(),
            group: 0,
            ordinal,
            ready,
            revision: Some("r1".to_owned()),
            config_hash: Some("h".to_owned()),
            terminating: false,
            labels: BTreeMap::new(),
            unready_since_ms: None,
            ip: None,
            node: None,
            drain_requested: false,
        }
    }

    fn info(offset: i64, behind: i64) -> RuntimeInfo {
        RuntimeInfo(BTreeMap::from([
            ("commitLogMaxOffset".to_owned(), offset.to_string()),
            ("dispatchBehindBytes".to_owned(), behind.to_string()),
        ]))
    }

    #[test]
    fn lag_is_measured_against_the_master() {
        let names = BrokerNames::new("c", "ns");
        let pods = [observed("c-0-0", 0, true), observed("c-0-1", 1, true)];
        let runtime = BTreeMap::from([
            ("c-0-0".to_owned(), info(1000, 3)),
            ("c-0-1".to_owned(), info(900, 0)),
        ]);
        let seen = GroupObservation {
            pods: &pods,
            runtime: &runtime,
            ha: &BTreeMap::new(),
        };
        let g = group_status(&names, 0, 2, seen, &State::idle("c-0-0", 0), None);
        assert_eq!(g.master_pod.as_deref(), Some("c-0-0"));
        assert_eq!(g.members[0].replication_lag_bytes, Some(0));
        assert_eq!(g.members[0].dispatch_behind_bytes, Some(3));
        assert_eq!(g.members[1].role, MemberRole::Slave);
        assert_eq!(g.members[1].replication_lag_bytes, Some(100));
    }

    #[test]
    fn pod_names_parse_with_dashes_in_the_cluster_name() {
        let names = BrokerNames::new("my-cluster", "ns");
        let pod = Pod {
            metadata: kube::api::ObjectMeta {
                name: Some("my-cluster-3-1".to_owned()),
                ..Default::default()
            },
            ..Pod::default()
        };
        let o = ObservedPod::from_pod(&pod, &names).unwrap();
        assert_eq!((o.group, o.ordinal, o.ready), (3, 1, false));
    }

    #[test]
    fn unready_master_degrades_the_cluster() {
        let names = BrokerNames::new("c", "ns");
        let pods = [observed("c-0-0", 0, false), observed("c-0-1", 1, true)];
        let seen = GroupObservation {
            pods: &pods,
            runtime: &BTreeMap::new(),
            ha: &BTreeMap::new(),
        };
        let g = group_status(&names, 0, 2, seen, &State::idle("c-0-0", 0), None);
        let conds = broker_conditions(&[g], &Rollout::default());
        let degraded = conds
            .iter()
            .find(|c| c.type_ == conditions::DEGRADED)
            .unwrap();
        assert!(degraded.status);
        assert!(degraded.message.contains("c-0"));
    }

    #[test]
    fn a_fenced_group_has_no_master_until_repointed() {
        let names = BrokerNames::new("c", "ns");
        let pods = [observed("c-0-0", 0, false), observed("c-0-1", 1, true)];
        let mut state = State::idle("c-0-0", 1);
        state.phase = crate::failover::Phase::Electing;
        state.fenced = vec!["c-0-0".to_owned()];
        let seen = GroupObservation {
            pods: &pods,
            runtime: &BTreeMap::new(),
            ha: &BTreeMap::new(),
        };
        let g = group_status(&names, 0, 2, seen, &state, None);
        let ids: Vec<_> = g.members.iter().map(|m| (m.role, m.broker_id)).collect();
        assert_eq!(ids, [(MemberRole::Slave, 2), (MemberRole::Slave, 1)]);
        assert_eq!(g.failover.phase, FailoverPhase::Electing);
        let conds = broker_conditions(&[g], &Rollout::default());
        let failover = conds
            .iter()
            .find(|c| c.type_ == conditions::FAILOVER_IN_PROGRESS)
            .unwrap();
        assert!(failover.status);

        state.phase = crate::failover::Phase::Completed;
        state.master = "c-0-1".to_owned();
        let g = group_status(&names, 0, 2, seen, &state, None);
        let ids: Vec<_> = g.members.iter().map(|m| (m.role, m.broker_id)).collect();
        assert_eq!(ids, [(MemberRole::Slave, 1), (MemberRole::Master, 0)]);
    }
}
