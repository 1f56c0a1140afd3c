//! Where a group's failover state comes from when `status` cannot be trusted alone: the
//! brokers' own roles and epochs (status lost, or disagreeing at rest), and the guard that
//! keeps a scale-down from removing a master.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

use super::broker_failover::{collect_ha, list_group_pods};
use super::broker_status::pod_ordinal;
use super::{Context, Error};
use crate::admin::{Admin, HaStatus};
use crate::crd::{Broker, BrokerStatus, FailoverPhase, FailoverTrigger};
use crate::failover::recover::{self, Verdict};
use crate::failover::{BlockedReason, Phase, State};
use crate::names::BrokerNames;

/// The starting state of a group without a usable record.
pub enum Recovery {
    /// A new group: ordinal 0 starts as master at epoch 0.
    Fresh,
    /// The brokers named the master (or the one to promote).
    Adopted(State),
    /// Every member is configured as a slave until all of them report their epochs.
    Waiting(State, String),
}

/// Whether `state` is a lost-status recovery still waiting for the members.
pub fn waiting_for_epochs(state: &State) -> bool {
    state.trigger == Some(FailoverTrigger::StatusLost) && matches!(state.phase, Phase::Blocked(_))
}

/// Asks the members of group `group` who is master when status has no record of it.
pub async fn recover_group(
    ctx: &Context,
    admin: &dyn Admin,
    broker: &Broker,
    names: &BrokerNames,
    group: i32,
) -> Result<Recovery, Error> {
    let replicas = broker.spec.replicas_per_group.max(0);
    let members: Vec<String> = (0..replicas).map(|o| names.pod(group, o)).collect();
    let pods = list_group_pods(ctx, names, group).await?;
    let ha = collect_ha(ctx, admin, names, &pods).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &names.namespace);
    let mut has_data = false;
    for o in 0..replicas {
        if claims
            .get_opt(&names.store_claim(group, o))
            .await?
            .is_some()
        {
            has_data = true;
            break;
        }
    }
    let now = Timestamp::now().as_millisecond();
    Ok(match recover::derive(None, &members, &ha, has_data) {
        Verdict::Keep => Recovery::Fresh,
        Verdict::Adopt { master, epoch } => Recovery::Adopted(State::idle(&master, epoch)),
        Verdict::Wait { reason } => Recovery::Waiting(
            State {
                master: names.pod(group, 0),
                phase: Phase::Blocked(BlockedReason::NoEligibleReplica),
                trigger: Some(FailoverTrigger::StatusLost),
                fenced: members.clone(),
                started_at_ms: Some(now),
                phase_since_ms: Some(now),
                message: Some(reason.clone()),
                ..State::default()
            },
            reason,
        ),
        Verdict::Promote { pod, epoch } => Recovery::Adopted(State {
            master: pod.clone(),
            epoch: epoch - 1,
            phase: Phase::Promoting,
            trigger: Some(FailoverTrigger::StatusLost),
            from: None,
            to: Some(pod.clone()),
            target_epoch: Some(epoch),
            fenced: members,
            started_at_ms: Some(now),
            phase_since_ms: Some(now),
            message: Some(format!(
                "status lost: promoting {pod}, the member with the newest data, at epoch {epoch}"
            )),
            ..State::default()
        }),
    })
}

/// When the recorded master of a group is at rest, the brokers' view wins: a member
/// reporting itself master at the highest epoch is the master.
pub fn reconcile_with_brokers(
    state: &State,
    members: &[String],
    ha: &BTreeMap<String, HaStatus>,
) -> Option<State> {
    if !state.phase.at_rest() {
        return None;
    }
    match recover::derive(Some((&state.master, state.epoch)), members, ha, true) {
        Verdict::Adopt { master, epoch } => Some(State {
            master,
            epoch,
            ..state.clone()
        }),
        _ => None,
    }
}

/// GET_BROKER_HA_STATUS of a group's members (single-replica groups, which skip the
/// failover machine, still record the epoch their master reports).
pub async fn single_member_ha(
    ctx: &Context,
    admin: &dyn Admin,
    names: &BrokerNames,
    group: i32,
) -> BTreeMap<String, HaStatus> {
    match list_group_pods(ctx, names, group).await {
        Ok(pods) => collect_ha(ctx, admin, names, &pods).await,
        Err(_) => BTreeMap::new(),
    }
}

/// A copy of `broker` with the replicas a scale-down must keep for now, and why, when
/// `spec.replicasPerGroup` would remove a group's master or shrink a group mid-failover.
pub fn shrink_guard(
    broker: &Broker,
    previous: &BrokerStatus,
    names: &BrokerNames,
) -> Option<(Broker, String)> {
    let wanted = broker.spec.replicas_per_group;
    let mut keep = wanted;
    let mut why = Vec::new();
    for g in &previous.groups {
        let current = i32::try_from(g.members.len()).unwrap_or(i32::MAX);
        if current <= wanted {
            continue;
        }
        if !matches!(
            g.failover.phase,
            FailoverPhase::Idle | FailoverPhase::Completed
        ) {
            keep = keep.max(current);
            why.push(format!("{} is failing over", g.broker_name));
            continue;
        }
        if let Some(master) = &g.master_pod
            && pod_ordinal(master) >= wanted
        {
            keep = keep.max(pod_ordinal(master) + 1);
            why.push(format!("{master} is master of {}", g.broker_name));
        }
    }
    if keep == wanted {
        return None;
    }
    let mut effective = broker.clone();
    effective.spec.replicas_per_group = keep;
    let reason = format!(
        "replicasPerGroup {wanted} would remove a master ({}); keeping {keep} replicas until mastership moves: \
         kubectl annotate broker {} rmq-rs.dev/switchover=<pod with an ordinal below {wanted}>",
        why.join(", "),
        names.cluster
    );
    Some((effective, reason))
}
