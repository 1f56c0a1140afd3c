//! Group starts phase: where each group's failover state comes from. Normally its
//! record in status; when status has none (a new group, or status lost with the object
//! re-created) or cannot be trusted alone, the brokers' own roles and epochs. A
//! lost-status recovery that still waits for members' epochs holds the group as
//! `Progressing=False` `StatusLost`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

use serde_json::json;

use super::Reconciliation;
use super::driver::{collect_ha, list_group_pods};
use super::status::master_ordinal;
use crate::admin::{Admin, HaStatus};
use crate::crd::{Broker, BrokerStatus, FailoverTrigger, GroupStatus};
use crate::failover::recover::{self, Verdict};
use crate::failover::status::{from_status, to_status};
use crate::failover::{BlockedReason, Phase, State};
use crate::names::BrokerNames;
use crate::reconcile::apply::patch_status;
use crate::reconcile::{Context, Error};

/// Where every group starts this reconcile.
pub struct Starts {
    /// The failover state of each group, by group index.
    pub states: Vec<State>,
    /// Why lost-status recoveries wait (`StatusLost`), one entry per waiting group.
    pub recovering: Vec<String>,
}

/// Each group's starting state: its record, or the brokers' word when there is none.
/// Groups with no record get one before any failover step, so every checkpoint after
/// this phase is a patch of its own element.
pub async fn group_starts(
    ctx: &Context,
    admin: &dyn Admin,
    broker: &Broker,
    rec: &Reconciliation,
) -> Result<Starts, Error> {
    let names = &rec.names;
    let groups = broker.spec.groups.max(0);
    let mut states = Vec::with_capacity(groups as usize);
    let mut recovering = Vec::new();
    for g in 0..groups {
        let prev = rec.previous.groups.get(g as usize);
        let state = from_status(prev, &names.pod(g, master_ordinal(prev)));
        if !needs_recovery(prev, &state) {
            states.push(state);
            continue;
        }
        states.push(match recover_group(ctx, admin, broker, names, g).await? {
            Recovery::Fresh => state,
            Recovery::Adopted(s) => {
                rec.event(
                    ctx,
                    s.phase != Phase::Idle,
                    "MasterFromBrokers",
                    "Failover",
                    format!(
                        "{}: no status record; {}",
                        names.broker_name(g),
                        s.message.clone().unwrap_or_else(|| format!(
                            "{} reports itself master at epoch {}",
                            s.master, s.epoch
                        ))
                    ),
                )
                .await;
                s
            }
            Recovery::Waiting(s, reason) => {
                recovering.push(reason);
                s
            }
        });
    }
    if rec.stored.groups.len() < groups as usize {
        write_skeleton(ctx, names, &rec.stored, &states).await?;
    }
    Ok(Starts { states, recovering })
}

/// Whether a group's start must come from its brokers: status has no record of it, or
/// a lost-status recovery is still waiting for the members' epochs.
fn needs_recovery(record: Option<&GroupStatus>, state: &State) -> bool {
    record.is_none() || waiting_for_epochs(state)
}

/// Status groups with a record appended for every group status lacks (its name,
/// master, epoch and failover state); the existing elements are left alone.
fn skeleton(names: &BrokerNames, stored: &BrokerStatus, starts: &[State]) -> Vec<GroupStatus> {
    let mut groups = stored.groups.clone();
    for (g, state) in starts.iter().enumerate().skip(groups.len()) {
        groups.push(GroupStatus {
            broker_name: names.broker_name(g as i32),
            master_pod: Some(state.master.clone()),
            epoch: state.epoch,
            failover: to_status(state),
            ..GroupStatus::default()
        });
    }
    groups
}

/// Writes [`skeleton`]'s groups as `status.groups`.
async fn write_skeleton(
    ctx: &Context,
    names: &BrokerNames,
    stored: &BrokerStatus,
    starts: &[State],
) -> Result<(), Error> {
    patch_status::<Broker, _>(
        &ctx.client,
        &names.namespace,
        &names.cluster,
        &json!({ "groups": skeleton(names, stored, starts) }),
    )
    .await?;
    ctx.metrics.status_writes.inc();
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::FailoverPhase;

    #[test]
    fn the_skeleton_appends_missing_groups_and_keeps_recorded_ones() {
        let names = BrokerNames::new("c", "ns");
        let recorded = GroupStatus {
            broker_name: "c-0".to_owned(),
            master_pod: Some("c-0-1".to_owned()),
            epoch: 4,
            confirm_offset: Some(77),
            ..GroupStatus::default()
        };
        let stored = BrokerStatus {
            groups: vec![recorded.clone()],
            ..BrokerStatus::default()
        };
        let starts = [State::idle("c-0-0", 0), State::idle("c-1-2", 3)];
        let groups = skeleton(&names, &stored, &starts);
        assert_eq!(groups.len(), 2);
        // The recorded group is not rewritten from its start.
        assert_eq!(groups[0], recorded);
        assert_eq!(groups[1].broker_name, "c-1");
        assert_eq!(groups[1].master_pod.as_deref(), Some("c-1-2"));
        assert_eq!(groups[1].epoch, 3);
        assert_eq!(groups[1].failover.phase, FailoverPhase::Idle);
        assert!(groups[1].members.is_empty());
    }

    #[test]
    fn only_unrecorded_or_waiting_groups_ask_the_brokers() {
        let record = GroupStatus::default();
        let idle = State::idle("c-0-0", 2);
        assert!(needs_recovery(None, &idle));
        assert!(!needs_recovery(Some(&record), &idle));
        let waiting = State {
            phase: Phase::Blocked(BlockedReason::NoEligibleReplica),
            trigger: Some(FailoverTrigger::StatusLost),
            ..idle.clone()
        };
        assert!(needs_recovery(Some(&record), &waiting));
        // Blocked for another reason: the record stands.
        let blocked = State {
            trigger: Some(FailoverTrigger::Switchover),
            ..waiting
        };
        assert!(!needs_recovery(Some(&record), &blocked));
    }
}
