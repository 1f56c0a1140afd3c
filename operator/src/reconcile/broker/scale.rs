//! Scale-down guard phase: a smaller `spec.replicasPerGroup` never removes a master.
//! While a group's master sits at an ordinal the new size would remove (or the group is
//! failing over), the reconcile goes on with an effective Broker that keeps the group's
//! members, and `Progressing=False` `ScaleDownBlocked` says what to do.

use std::sync::Arc;

use super::Reconciliation;
use super::status::pod_ordinal;
use crate::conditions;
use crate::crd::{Broker, BrokerStatus, FailoverPhase};
use crate::names::BrokerNames;
use crate::reconcile::Context;

/// What the guard leaves the rest of the reconcile.
pub struct ScaleGuard {
    /// The Broker every later phase renders: the spec, or a copy that keeps members.
    pub broker: Arc<Broker>,
    /// Why the scale-down waits (`ScaleDownBlocked`), if it does.
    pub blocked: Option<String>,
}

/// Applies [`shrink_guard`] and announces a newly blocked scale-down with a Warning
/// Event (once: not while status already says `ScaleDownBlocked`).
pub async fn guard(ctx: &Context, broker: Arc<Broker>, rec: &Reconciliation) -> ScaleGuard {
    let (broker, blocked) = match shrink_guard(&broker, &rec.previous, &rec.names) {
        Some((effective, reason)) => (Arc::new(effective), Some(reason)),
        None => (broker, None),
    };
    if let Some(reason) = &blocked
        && !conditions::has_reason(
            &rec.stored.conditions,
            conditions::PROGRESSING,
            "ScaleDownBlocked",
        )
    {
        rec.event(ctx, true, "ScaleDownBlocked", "Scale", reason.clone())
            .await;
    }
    ScaleGuard { broker, blocked }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BrokerSpec, FailoverStatus, GroupStatus, MemberStatus};

    fn broker(replicas: i32) -> Broker {
        let mut b = Broker::new(
            "c",
            BrokerSpec {
                groups: 1,
                replicas_per_group: replicas,
                ..BrokerSpec::default()
            },
        );
        b.metadata.namespace = Some("ns".to_owned());
        b
    }

    fn group(members: i32, master: &str, phase: FailoverPhase) -> GroupStatus {
        GroupStatus {
            broker_name: "c-0".to_owned(),
            master_pod: Some(master.to_owned()),
            members: (0..members)
                .map(|o| MemberStatus {
                    pod: format!("c-0-{o}"),
                    ..MemberStatus::default()
                })
                .collect(),
            failover: FailoverStatus {
                phase,
                ..FailoverStatus::default()
            },
            ..GroupStatus::default()
        }
    }

    fn status(groups: Vec<GroupStatus>) -> BrokerStatus {
        BrokerStatus {
            groups,
            ..BrokerStatus::default()
        }
    }

    #[test]
    fn a_master_at_a_removed_ordinal_keeps_its_replicas() {
        let names = BrokerNames::new("c", "ns");
        let previous = status(vec![group(3, "c-0-2", FailoverPhase::Idle)]);
        let (effective, reason) = shrink_guard(&broker(1), &previous, &names).unwrap();
        assert_eq!(effective.spec.replicas_per_group, 3);
        assert!(reason.contains("c-0-2 is master of c-0"), "{reason}");
        assert!(reason.contains("rmq-rs.dev/switchover"), "{reason}");
    }

    #[test]
    fn a_group_failing_over_keeps_its_members() {
        let names = BrokerNames::new("c", "ns");
        let previous = status(vec![group(3, "c-0-0", FailoverPhase::Electing)]);
        let (effective, reason) = shrink_guard(&broker(2), &previous, &names).unwrap();
        assert_eq!(effective.spec.replicas_per_group, 3);
        assert!(reason.contains("c-0 is failing over"), "{reason}");
    }

    #[test]
    fn a_scale_down_below_the_master_goes_ahead() {
        let names = BrokerNames::new("c", "ns");
        let previous = status(vec![group(3, "c-0-0", FailoverPhase::Completed)]);
        assert!(shrink_guard(&broker(1), &previous, &names).is_none());
        // Growing is never held.
        assert!(shrink_guard(&broker(5), &previous, &names).is_none());
    }
}
