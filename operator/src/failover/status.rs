//! The machine's [`State`] to and from `status.groups[]` (times as RFC 3339 strings, the
//! Blocked reason in `failover.reason`).

use k8s_openapi::jiff::Timestamp;

use crate::crd::{FailoverPhase, FailoverStatus, GroupStatus};

use super::machine::{BlockedReason, Phase, State};

fn to_ms(s: Option<&str>) -> Option<i64> {
    s?.parse::<Timestamp>().ok().map(|t| t.as_millisecond())
}

fn to_rfc3339(ms: Option<i64>) -> Option<String> {
    Timestamp::from_millisecond(ms?).ok().map(|t| t.to_string())
}

/// The state recorded for a group whose master is `master` (`status.groups[].masterPod`
/// or the default for a new group).
pub fn from_status(group: Option<&GroupStatus>, master: &str) -> State {
    let Some(g) = group else {
        return State::idle(master, 0);
    };
    let f = &g.failover;
    let phase = match f.phase {
        FailoverPhase::Idle => Phase::Idle,
        FailoverPhase::Detected => Phase::Detected,
        FailoverPhase::Fencing => Phase::Fencing,
        FailoverPhase::Electing => Phase::Electing,
        FailoverPhase::Promoting => Phase::Promoting,
        FailoverPhase::Repointing => Phase::Repointing,
        FailoverPhase::Completed => Phase::Completed,
        FailoverPhase::Blocked => Phase::Blocked(match f.reason.as_deref() {
            Some("TargetNotEligible") => BlockedReason::TargetNotEligible,
            _ => BlockedReason::NoEligibleReplica,
        }),
    };
    State {
        master: master.to_owned(),
        epoch: g.epoch,
        phase,
        trigger: f.trigger,
        from: f.from.clone(),
        to: f.to.clone(),
        target_epoch: f.epoch,
        fenced: f.fenced.clone(),
        started_at_ms: to_ms(f.started_at.as_deref()),
        phase_since_ms: to_ms(f.phase_since.as_deref()),
        completed_at_ms: to_ms(f.completed_at.as_deref()),
        bytes_lost: f.bytes_lost,
        bytes_lost_exact: f.bytes_lost_exact,
        message: f.message.clone(),
    }
}

pub fn to_status(state: &State) -> FailoverStatus {
    let (phase, reason) = match state.phase {
        Phase::Idle => (FailoverPhase::Idle, None),
        Phase::Detected => (FailoverPhase::Detected, None),
        Phase::Fencing => (FailoverPhase::Fencing, None),
        Phase::Electing => (FailoverPhase::Electing, None),
        Phase::Promoting => (FailoverPhase::Promoting, None),
        Phase::Repointing => (FailoverPhase::Repointing, None),
        Phase::Completed => (FailoverPhase::Completed, None),
        Phase::Blocked(r) => (FailoverPhase::Blocked, Some(r.as_str().to_owned())),
    };
    FailoverStatus {
        phase,
        trigger: state.trigger,
        from: state.from.clone(),
        to: state.to.clone(),
        epoch: state.target_epoch,
        fenced: state.fenced.clone(),
        reason,
        message: state.message.clone(),
        started_at: to_rfc3339(state.started_at_ms),
        phase_since: to_rfc3339(state.phase_since_ms),
        completed_at: to_rfc3339(state.completed_at_ms),
        bytes_lost: state.bytes_lost,
        bytes_lost_exact: state.bytes_lost_exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::FailoverTrigger;

    #[test]
    fn state_round_trips_through_status() {
        let state = State {
            master: "c-0-1".to_owned(),
            epoch: 3,
            phase: Phase::Blocked(BlockedReason::TargetNotEligible),
            trigger: Some(FailoverTrigger::Switchover),
            from: Some("c-0-0".to_owned()),
            to: Some("c-0-1".to_owned()),
            target_epoch: Some(4),
            fenced: vec!["c-0-0".to_owned()],
            started_at_ms: Some(1_700_000_000_123),
            phase_since_ms: Some(1_700_000_001_000),
            completed_at_ms: None,
            bytes_lost: Some(10),
            bytes_lost_exact: Some(false),
            message: Some("m".to_owned()),
        };
        let status = to_status(&state);
        assert_eq!(status.reason.as_deref(), Some("TargetNotEligible"));
        assert_eq!(
            status.started_at.as_deref(),
            Some("2023-11-14T22:13:20.123Z")
        );
        let group = GroupStatus {
            broker_name: "c-0".to_owned(),
            epoch: 3,
            failover: status,
            ..GroupStatus::default()
        };
        assert_eq!(from_status(Some(&group), "c-0-1"), state);
    }
}
