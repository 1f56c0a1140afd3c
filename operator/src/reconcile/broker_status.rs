//! Pure status computation for a Broker: from observed pods and broker runtime info to
//! `status.groups` and the conditions.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::admin::RuntimeInfo;
use crate::builders::config_file::member_identities;
use crate::conditions::{self, Desired};
use crate::crd::{FailoverPhase, GroupStatus, MemberRole, MemberStatus};
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
}

impl ObservedPod {
    /// `None` for pods whose name is not `<cluster>-<group>-<ordinal>`.
    pub fn from_pod(pod: &Pod, names: &BrokerNames) -> Option<Self> {
        let name = pod.metadata.name.clone()?;
        let rest = name.strip_prefix(&format!("{}-", names.cluster))?;
        let (group, ordinal) = rest.split_once('-')?;
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
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
        }
    }
}

/// Ordinal of the master recorded in a previous group status (0 when unknown).
pub fn master_ordinal(previous: Option<&GroupStatus>) -> i32 {
    previous
        .and_then(|g| g.master_pod.as_deref())
        .and_then(|p| p.rsplit('-').next())
        .and_then(|o| o.parse().ok())
        .unwrap_or(0)
}

/// One group's status. `runtime` is keyed by pod name; members without an entry get no
/// lag figures.
pub fn group_status(
    names: &BrokerNames,
    group: i32,
    replicas: i32,
    pods: &[ObservedPod],
    runtime: &BTreeMap<String, RuntimeInfo>,
    previous: Option<&GroupStatus>,
) -> GroupStatus {
    let master = master_ordinal(previous);
    let master_pod = names.pod(group, master);
    let master_offset = runtime
        .get(&master_pod)
        .and_then(RuntimeInfo::commit_log_max_offset);
    let members = member_identities(replicas, master)
        .into_iter()
        .map(|m| {
            let pod = names.pod(group, m.ordinal);
            let observed = pods.iter().find(|p| p.name == pod);
            let info = runtime.get(&pod);
            let lag = if m.broker_id == 0 {
                info.map(|_| 0)
            } else {
                match (
                    master_offset,
                    info.and_then(RuntimeInfo::commit_log_max_offset),
                ) {
                    (Some(master), Some(own)) => Some((master - own).max(0)),
                    _ => None,
                }
            };
            MemberStatus {
                pod,
                broker_id: m.broker_id,
                role: if m.broker_id == 0 {
                    MemberRole::Master
                } else {
                    MemberRole::Slave
                },
                ready: observed.is_some_and(|p| p.ready),
                replication_lag_bytes: lag,
                dispatch_behind_bytes: info.and_then(RuntimeInfo::dispatch_behind_bytes),
                config_hash: observed.and_then(|p| p.config_hash.clone()),
            }
        })
        .collect();
    GroupStatus {
        broker_name: names.broker_name(group),
        master_pod: Some(master_pod),
        epoch: previous.map_or(0, |g| g.epoch),
        members,
        failover: previous.map(|g| g.failover.clone()).unwrap_or_default(),
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
        let g = group_status(&names, 0, 2, &pods, &runtime, None);
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
        let g = group_status(&names, 0, 2, &pods, &BTreeMap::new(), None);
        let conds = broker_conditions(&[g], &Rollout::default());
        let degraded = conds
            .iter()
            .find(|c| c.type_ == conditions::DEGRADED)
            .unwrap();
        assert!(degraded.status);
        assert!(degraded.message.contains("c-0"));
    }
}
