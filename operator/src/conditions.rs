//! Status conditions (`metav1.Condition`) with Kubernetes' transition semantics:
//! `lastTransitionTime` only moves when `status` changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";
pub const FAILOVER_IN_PROGRESS: &str = "FailoverInProgress";
pub const RECONCILIATION_PAUSED: &str = "ReconciliationPaused";
/// Broker: every store volume has the size `spec.storage.size` asks for.
pub const STORAGE_RESIZED: &str = "StorageResized";

/// Whether condition `type_` is present with `reason`.
pub fn has_reason(conditions: &[Condition], type_: &str, reason: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.reason == reason)
}

/// A condition the reconciler wants; turned into a `Condition` by [`merge`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl Desired {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

fn status_str(status: bool) -> &'static str {
    if status { "True" } else { "False" }
}

/// The new condition list: one entry per desired condition, keeping the previous
/// `lastTransitionTime` of each whose status did not change. Conditions not in `desired`
/// are dropped, so the list always reflects the latest reconcile.
pub fn merge(
    previous: &[Condition],
    desired: &[Desired],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    desired
        .iter()
        .map(|d| {
            let status = status_str(d.status);
            let transition = previous
                .iter()
                .find(|c| c.type_ == d.type_ && c.status == status)
                .map(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            Condition {
                type_: d.type_.to_owned(),
                status: status.to_owned(),
                reason: d.reason.clone(),
                message: d.message.clone(),
                last_transition_time: transition,
                observed_generation: generation,
            }
        })
        .collect()
}

/// Whether `conditions` has `type_` with status True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The previous conditions with `ReconciliationPaused=True`: a paused object keeps
/// reporting what was last observed.
pub fn paused(previous: &[Condition], generation: Option<i64>, now: Timestamp) -> Vec<Condition> {
    let mut out: Vec<Condition> = previous
        .iter()
        .filter(|c| c.type_ != RECONCILIATION_PAUSED)
        .cloned()
        .collect();
    let transition = find(previous, RECONCILIATION_PAUSED)
        .filter(|c| c.status == "True")
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    out.push(Condition {
        type_: RECONCILIATION_PAUSED.to_owned(),
        status: "True".to_owned(),
        reason: "PausedByAnnotation".to_owned(),
        message: "rmq-rs.dev/pause-reconciliation is \"true\"".to_owned(),
        last_transition_time: transition,
        observed_generation: generation,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let first = merge(
            &[],
            &[Desired::new(READY, false, "Creating", "waiting for pods")],
            Some(1),
            at(100),
        );
        assert_eq!(first[0].last_transition_time, Time(at(100)));

        let same_status = merge(
            &first,
            &[Desired::new(READY, false, "Rolling", "restarting pod x")],
            Some(2),
            at(200),
        );
        assert_eq!(same_status[0].last_transition_time, Time(at(100)));
        assert_eq!(same_status[0].reason, "Rolling");
        assert_eq!(same_status[0].observed_generation, Some(2));

        let flipped = merge(
            &same_status,
            &[Desired::new(READY, true, "Ready", "all pods ready")],
            Some(2),
            at(300),
        );
        assert_eq!(flipped[0].last_transition_time, Time(at(300)));
        assert!(is_true(&flipped, READY));
    }
}
