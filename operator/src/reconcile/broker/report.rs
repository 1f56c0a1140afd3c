//! Status phase: the Broker's status computed from what every phase before it produced
//! (a pure function of those outcomes), written at a bounded rate, and the requeue that
//! follows from it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;

use super::Reconciliation;
use super::driver::GroupRun;
use super::listener::{Listener, awaiting_addresses};
use super::live::write_due;
use super::monitoring::record_member_metrics;
use super::objects::storage_condition;
use super::runtime::collect_runtime_info;
use super::status::{GroupObservation, ObservedPod, Rollout, broker_conditions, group_status};
use crate::admin::{Admin, RuntimeInfo};
use crate::conditions;
use crate::crd::{Broker, BrokerStatus, GroupStatus};
use crate::failover::State;
use crate::names::BrokerNames;
use crate::reconcile::apply::patch_status;
use crate::reconcile::{Context, Error, FAILOVER_POLL, PROGRESS_POLL, RESYNC};

/// What the phases before this one produced.
pub struct Outcome {
    /// The Broker's pods as listed after the failover pass.
    pub observed: Vec<ObservedPod>,
    /// Where each group's failover stands (the rolling restart's hand-overs included).
    pub runs: Vec<GroupRun>,
    pub rollout: Rollout,
    /// Why a scale-down waits (scale-down guard phase).
    pub shrink_blocked: Option<String>,
    /// Why lost-status recoveries wait (group starts phase).
    pub recovering: Vec<String>,
    pub listener: Listener,
    /// Why store volumes could not grow (owned objects phase).
    pub storage_refused: Vec<String>,
    /// `status.namesrvAddr` (nameserver push phase).
    pub namesrv_addr: Option<String>,
}

/// Computes and writes the status, then fails the reconcile with the first failover
/// error (status has recorded how far each failover got) or picks the next requeue.
pub async fn finish(
    ctx: &Context,
    admin: &dyn Admin,
    broker: &Broker,
    rec: &Reconciliation,
    outcome: Outcome,
) -> Result<Action, Error> {
    let runtime = collect_runtime_info(ctx, admin, &rec.names, &outcome.observed).await;
    let groups = group_statuses(
        &rec.names,
        broker,
        &outcome.observed,
        &runtime,
        &outcome.runs,
        &rec.previous.groups,
    );
    record_member_metrics(ctx, &rec.names, &groups, &outcome.runs, &runtime);
    let status = desired_status(
        &outcome,
        groups,
        &broker.spec.storage.size,
        &rec.previous.conditions,
        rec.generation,
        rec.now,
    );
    let became_ready = conditions::is_true(&status.conditions, conditions::READY)
        && !conditions::is_true(&rec.previous.conditions, conditions::READY);
    // Status changes that matter are written at once; live figures (offsets, lag) only
    // when they cross a threshold, and then at most every LIVE_STATUS_INTERVAL, so write
    // traffic on the brokers never turns into a stream of status writes.
    ctx.live.remember(&rec.key, &status);
    if write_due(
        &ctx.live,
        &rec.key,
        &rec.stored,
        &status,
        broker.spec.failover.max_lag_bytes,
    ) {
        patch_status::<Broker, _>(&ctx.client, &rec.namespace, &rec.name, &status).await?;
        ctx.metrics.status_writes.inc();
        ctx.live.written(&rec.key);
    }
    // The status above records how far each failover got; its error now fails the
    // reconcile (and retries with backoff).
    let failing_over = outcome
        .runs
        .iter()
        .any(|r| !r.state.phase.at_rest() || master_unready(&r.state, &outcome.observed));
    if let Some(e) = outcome.runs.into_iter().find_map(|r| r.error) {
        return Err(e);
    }
    if became_ready {
        rec.event(
            ctx,
            false,
            "Ready",
            "Reconcile",
            "all brokers ready and up to date".to_owned(),
        )
        .await;
    }
    Ok(next_action(
        failing_over,
        broker.spec.replicas_per_group,
        conditions::is_true(&status.conditions, conditions::READY),
    ))
}

/// `status.groups`: each group from its pods, its brokers' runtime and HA answers, and
/// the failover state it ended at.
fn group_statuses(
    names: &BrokerNames,
    broker: &Broker,
    observed: &[ObservedPod],
    runtime: &BTreeMap<String, RuntimeInfo>,
    runs: &[GroupRun],
    previous: &[GroupStatus],
) -> Vec<GroupStatus> {
    (0..broker.spec.groups.max(0))
        .map(|g| {
            let pods: Vec<ObservedPod> =
                observed.iter().filter(|p| p.group == g).cloned().collect();
            let run = &runs[g as usize];
            group_status(
                names,
                g,
                broker.spec.replicas_per_group,
                GroupObservation {
                    pods: &pods,
                    runtime,
                    ha: &run.ha,
                },
                &run.state,
                previous.get(g as usize),
            )
        })
        .collect()
}

/// The whole status from the phases' outcomes: a scale-down the guard holds, or else a
/// lost-status recovery, turns the rollout into a refusal (`Progressing=False`); pods
/// waiting for an external address keep the Broker from `Ready`; `StorageResized`
/// reports the volumes.
fn desired_status(
    outcome: &Outcome,
    groups: Vec<GroupStatus>,
    storage_size: &str,
    previous: &[Condition],
    generation: Option<i64>,
    now: Timestamp,
) -> BrokerStatus {
    let mut rollout = outcome.rollout.clone();
    if let Some(reason) = &outcome.shrink_blocked {
        rollout.waiting = Some(reason.clone());
        rollout.blocked_reason = Some("ScaleDownBlocked");
    } else if let Some(reason) = outcome.recovering.first() {
        rollout.waiting = Some(reason.clone());
        rollout.blocked_reason = Some("StatusLost");
    }
    let mut desired = broker_conditions(&groups, &rollout);
    if !outcome.listener.waiting.is_empty() {
        awaiting_addresses(&mut desired, &outcome.listener.waiting);
    }
    desired.push(storage_condition(storage_size, &outcome.storage_refused));
    BrokerStatus {
        observed_generation: generation,
        conditions: conditions::merge(previous, &desired, generation, now),
        namesrv_addr: outcome.namesrv_addr.clone(),
        groups,
        external_addresses: outcome.listener.addresses(),
    }
}

fn master_unready(state: &State, pods: &[ObservedPod]) -> bool {
    !pods.iter().any(|p| p.name == state.master && p.ready)
}

/// Polls every second while a replicated group fails over or has no ready master;
/// otherwise the periodic resync once Ready, the progress poll until then.
fn next_action(failing_over: bool, replicas: i32, ready: bool) -> Action {
    if failing_over && replicas > 1 {
        Action::requeue(FAILOVER_POLL)
    } else if ready {
        Action::requeue(RESYNC)
    } else {
        Action::requeue(PROGRESS_POLL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::listener::Advertised;

    fn outcome() -> Outcome {
        Outcome {
            observed: Vec::new(),
            runs: Vec::new(),
            rollout: Rollout::default(),
            shrink_blocked: None,
            recovering: Vec::new(),
            listener: Listener::default(),
            storage_refused: Vec::new(),
            namesrv_addr: Some("ns-0:9876".to_owned()),
        }
    }

    fn condition<'a>(status: &'a BrokerStatus, type_: &str) -> (&'a str, &'a str) {
        let c = conditions::find(&status.conditions, type_).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    fn status_of(outcome: &Outcome) -> BrokerStatus {
        desired_status(
            outcome,
            Vec::new(),
            "10Gi",
            &[],
            Some(4),
            Timestamp::UNIX_EPOCH,
        )
    }

    #[test]
    fn a_settled_broker_is_ready_and_stable() {
        let status = status_of(&outcome());
        assert_eq!(status.observed_generation, Some(4));
        assert_eq!(status.namesrv_addr.as_deref(), Some("ns-0:9876"));
        assert_eq!(condition(&status, conditions::READY), ("True", "Ready"));
        assert_eq!(
            condition(&status, conditions::PROGRESSING),
            ("False", "Stable")
        );
        assert_eq!(
            condition(&status, conditions::STORAGE_RESIZED),
            ("True", "Resized")
        );
        assert_eq!(
            condition(&status, conditions::RECONCILIATION_PAUSED),
            ("False", "Reconciling")
        );
    }

    #[test]
    fn a_held_scale_down_outranks_a_lost_status_recovery() {
        let mut o = outcome();
        o.recovering = vec!["waiting for c-0-1's epoch".to_owned()];
        assert_eq!(
            condition(&status_of(&o), conditions::PROGRESSING),
            ("False", "StatusLost")
        );
        o.shrink_blocked = Some("c-0-2 is master of c-0".to_owned());
        let status = status_of(&o);
        assert_eq!(
            condition(&status, conditions::PROGRESSING),
            ("False", "ScaleDownBlocked")
        );
        let progressing = conditions::find(&status.conditions, conditions::PROGRESSING).unwrap();
        assert_eq!(progressing.message, "c-0-2 is master of c-0");
    }

    #[test]
    fn pods_without_an_address_and_refused_volumes_are_reported() {
        let mut o = outcome();
        o.listener = Listener {
            hosts: BTreeMap::from([(
                "c-0-0".to_owned(),
                Advertised {
                    host: "203.0.113.7".to_owned(),
                    port: 10911,
                    grpc_port: Some(8081),
                },
            )]),
            waiting: vec!["c-0-1".to_owned()],
        };
        o.storage_refused = vec!["volumes cannot shrink".to_owned()];
        let status = status_of(&o);
        assert_eq!(
            condition(&status, conditions::READY),
            ("False", "AwaitingExternalAddress")
        );
        assert_eq!(
            condition(&status, conditions::STORAGE_RESIZED),
            ("False", "ResizeRefused")
        );
        assert_eq!(status.external_addresses.len(), 1);
        assert_eq!(status.external_addresses[0].address, "203.0.113.7:10911");
    }

    #[test]
    fn the_requeue_follows_failover_and_readiness() {
        assert_eq!(next_action(true, 2, true), Action::requeue(FAILOVER_POLL));
        // A single-member group has nothing to fail over to: no fast poll.
        assert_eq!(next_action(true, 1, true), Action::requeue(RESYNC));
        assert_eq!(next_action(false, 2, true), Action::requeue(RESYNC));
        assert_eq!(next_action(false, 2, false), Action::requeue(PROGRESS_POLL));
    }
}
