//! Failover phase: every group's failover machine is taken forward from its start (see
//! [`super::recovery`]) before any object is rendered, so the ConfigMaps, Services and
//! role labels applied afterwards follow where it leaves each group. What each group
//! ends at feeds `FailoverInProgress` and `Degraded`, and a step's error fails the
//! reconcile only after status has recorded how far the failover got.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::Reconciliation;
use super::drain::draining;
use super::driver::{GroupRun, drive_group};
use super::pods::list_pods;
use super::recovery::{single_member_ha, waiting_for_epochs};
use crate::admin::Admin;
use crate::crd::{Broker, FailoverTrigger};
use crate::failover::{Request, State};
use crate::reconcile::{Context, Error};

/// How one group's failover is taken forward in this reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupPath {
    /// A lost-status recovery waits for every member's epoch: nothing is stepped.
    AwaitEpochs,
    /// One replica and no failover running: there is nothing to fail over to, but the
    /// member's own epoch is still recorded.
    SingleMember,
    /// The failover machine steps the group.
    Drive,
}

fn group_path(state: &State, replicas: i32) -> GroupPath {
    if waiting_for_epochs(state) {
        GroupPath::AwaitEpochs
    } else if replicas < 2 && state.phase.at_rest() {
        GroupPath::SingleMember
    } else {
        GroupPath::Drive
    }
}

/// The request an accepted switchover annotation makes of group `group`.
fn annotated_request(switchover: Option<&(i32, String)>, group: i32) -> Option<Request> {
    match switchover {
        Some((g, pod)) if *g == group => Some(Request {
            trigger: FailoverTrigger::Switchover,
            target: Some(pod.clone()),
        }),
        _ => None,
    }
}

/// Whether the master's drain must be looked for: a master about to be drained hands
/// over first (its PodDisruptionBudget holds the eviction), unless something else is
/// already asked of the group or there is no replica to hand over to.
fn drain_check_due(request: Option<&Request>, state: &State, replicas: i32) -> bool {
    request.is_none() && state.phase.at_rest() && replicas > 1
}

/// Takes every group's failover forward from `starts`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    ctx: &Context,
    admin: &dyn Admin,
    broker: &Broker,
    rec: &Reconciliation,
    namesrv_addr: &str,
    pod_api: &Api<Pod>,
    starts: Vec<State>,
    switchover: Option<&(i32, String)>,
) -> Result<Vec<GroupRun>, Error> {
    let names = &rec.names;
    let replicas = broker.spec.replicas_per_group;
    let before = list_pods(pod_api, names).await?;
    let mut runs = Vec::with_capacity(starts.len());
    for (g, mut state) in (0..).zip(starts) {
        let mut request = annotated_request(switchover, g);
        if drain_check_due(request.as_ref(), &state, replicas)
            && let Some(master) = before.iter().find(|p| p.name == state.master)
            && draining(ctx, master).await
        {
            request = Some(Request {
                trigger: FailoverTrigger::Drain,
                target: None,
            });
        }
        runs.push(match group_path(&state, replicas) {
            GroupPath::AwaitEpochs => GroupRun {
                state,
                ha: BTreeMap::new(),
                error: None,
            },
            GroupPath::SingleMember => {
                let ha = single_member_ha(ctx, admin, names, g).await;
                if let Some(h) = ha.get(&state.master) {
                    state.epoch = state.epoch.max(h.epoch);
                }
                GroupRun {
                    state,
                    ha,
                    error: None,
                }
            }
            GroupPath::Drive => {
                drive_group(
                    ctx,
                    admin,
                    broker,
                    names,
                    namesrv_addr,
                    g,
                    rec.previous.groups.get(g as usize),
                    state,
                    request,
                )
                .await
            }
        });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failover::{BlockedReason, Phase};

    #[test]
    fn each_group_takes_the_path_its_state_and_size_allow() {
        let idle = State::idle("c-0-0", 1);
        assert_eq!(group_path(&idle, 1), GroupPath::SingleMember);
        assert_eq!(group_path(&idle, 3), GroupPath::Drive);
        let electing = State {
            phase: Phase::Electing,
            ..idle.clone()
        };
        // A failover already running is finished even if the group shrank to one.
        assert_eq!(group_path(&electing, 1), GroupPath::Drive);
        let waiting = State {
            phase: Phase::Blocked(BlockedReason::NoEligibleReplica),
            trigger: Some(FailoverTrigger::StatusLost),
            ..idle
        };
        assert_eq!(group_path(&waiting, 3), GroupPath::AwaitEpochs);
        assert_eq!(group_path(&waiting, 1), GroupPath::AwaitEpochs);
    }

    #[test]
    fn a_switchover_is_asked_only_of_its_group() {
        let target = (1, "c-1-2".to_owned());
        assert_eq!(annotated_request(Some(&target), 0), None);
        assert_eq!(
            annotated_request(Some(&target), 1),
            Some(Request {
                trigger: FailoverTrigger::Switchover,
                target: Some("c-1-2".to_owned()),
            })
        );
        assert_eq!(annotated_request(None, 1), None);
    }

    #[test]
    fn drains_are_looked_for_only_at_rest_with_a_replica_and_no_other_request() {
        let idle = State::idle("c-0-0", 1);
        assert!(drain_check_due(None, &idle, 2));
        assert!(!drain_check_due(None, &idle, 1));
        let switchover = annotated_request(Some(&(0, "c-0-1".to_owned())), 0);
        assert!(!drain_check_due(switchover.as_ref(), &idle, 2));
        let fencing = State {
            phase: Phase::Fencing,
            ..idle
        };
        assert!(!drain_check_due(None, &fencing, 2));
    }
}
