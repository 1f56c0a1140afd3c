//! Who may become master (pure). Mirrors RocketMQ 5.x `DefaultElectPolicy`: candidates
//! come from the in-sync set, the one with the largest commit-log offset wins; outside the
//! in-sync set only with `allowUnclean` (5.x `enableElectUncleanMaster`).

use crate::crd::FailoverTrigger;

use super::machine::{BlockedReason, Member, Observations, State};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    /// A planned switchover's target is still catching up with the fenced old master.
    Wait,
    /// Promote `pod`; `loss` is set when acknowledged bytes may be lost by it.
    Promote { pod: String, loss: Option<Loss> },
}

/// Bytes a promotion discards: the old master's end minus the candidate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    pub bytes: i64,
    /// The old master answered, so its end is final. Otherwise the end is the last one
    /// observed and the master may have written (and, ASYNC, acknowledged) more.
    pub exact: bool,
}

fn old_master(state: &State) -> &str {
    state.from.as_deref().unwrap_or(&state.master)
}

/// The old master's commit-log max offset: live if it answers, else the best recorded.
fn master_offset(state: &State, obs: &Observations) -> Option<i64> {
    obs.member(old_master(state))
        .and_then(|m| m.ha)
        .map(|h| h.max_offset)
        .or(obs.master_offset)
}

fn lag(m: &Member, master_offset: Option<i64>) -> Option<i64> {
    Some((master_offset? - m.ha?.max_offset).max(0))
}

/// In sync, within `maxLagBytes`, ready and answering.
pub fn clean(m: &Member, state: &State, obs: &Observations) -> bool {
    m.reachable()
        && m.in_sync
        && lag(m, master_offset(state, obs)).is_some_and(|l| l <= obs.policy.max_lag_bytes)
}

/// The requested target, when the trigger carries one.
fn requested(state: &State) -> Option<&str> {
    match state.trigger {
        Some(FailoverTrigger::Switchover) => state.to.as_deref(),
        _ => None,
    }
}

/// Replicas other than the old master, best first: largest offset, then name.
fn ranked<'a>(
    state: &State,
    obs: &'a Observations,
    keep: impl Fn(&Member) -> bool,
) -> Vec<&'a Member> {
    let old = old_master(state);
    let mut out: Vec<&Member> = obs
        .members
        .iter()
        .filter(|m| m.pod != old && keep(m))
        .collect();
    out.sort_by(|a, b| {
        let off = |m: &Member| m.ha.map_or(i64::MIN, |h| h.max_offset);
        off(b).cmp(&off(a)).then_with(|| a.pod.cmp(&b.pod))
    });
    out
}

/// Before a planned switchover fences a healthy master: is there a clean candidate? If
/// not the switchover is Blocked and the master keeps serving.
pub fn precheck(state: &State, obs: &Observations) -> Result<(), BlockedReason> {
    match requested(state) {
        Some(t) => match obs.member(t) {
            Some(m) if clean(m, state, obs) => Ok(()),
            _ => Err(BlockedReason::TargetNotEligible),
        },
        None if ranked(state, obs, |m| clean(m, state, obs)).is_empty() => {
            Err(BlockedReason::NoEligibleReplica)
        }
        None => Ok(()),
    }
}

/// Chooses the member to promote once every possible master is fenced.
/// `catch_up_expired`: a planned switchover has waited long enough for its target.
pub fn elect(
    state: &State,
    obs: &Observations,
    catch_up_expired: bool,
) -> Result<Candidate, BlockedReason> {
    let old = old_master(state);
    let old_member = obs.member(old);
    let old_answers = old_member.is_some_and(|m| m.exists && m.ha.is_some());
    let planned = old_answers
        && matches!(
            state.trigger,
            Some(FailoverTrigger::Switchover | FailoverTrigger::RollingRestart)
        );
    let offset = master_offset(state, obs);
    let promote = |pod: &str, loss| {
        Ok(Candidate::Promote {
            pod: pod.to_owned(),
            loss,
        })
    };
    let lost = |m: &Member| Loss {
        bytes: bytes_lost(m, offset, obs),
        exact: old_answers,
    };
    // A clean choice under ASYNC_MASTER still discards what the candidate lacks, and
    // those bytes may have been acknowledged: reported like an unclean election (issue
    // 15 defect 6). Under SYNC_MASTER an in-sync candidate holds every acknowledged byte.
    let clean_loss = |m: &Member| {
        let l = lost(m);
        (obs.policy.async_acks && (l.bytes > 0 || !l.exact)).then_some(l)
    };
    let revert = || promote(old, None);

    if planned {
        // The old master is fenced and answering: its offset is final. The candidate must
        // hold all of it, or the old master is elected back.
        let candidate = match requested(state) {
            Some(t) => obs.member(t).filter(|m| m.reachable()),
            None => ranked(state, obs, |m| clean(m, state, obs))
                .first()
                .copied(),
        };
        // A requested target whose pod exists but missed this observation (a slow or
        // lost answer) is waited for like a lagging one: reverting at once would undo the
        // switchover over one dropped request.
        let target_pending = requested(state)
            .and_then(|t| obs.member(t))
            .is_some_and(|m| m.exists);
        return match candidate {
            Some(m) if lag(m, offset) == Some(0) => promote(&m.pod, None),
            Some(_) if !catch_up_expired => Ok(Candidate::Wait),
            None if target_pending && !catch_up_expired => Ok(Candidate::Wait),
            _ => revert(),
        };
    }

    if let Some(t) = requested(state) {
        return match obs.member(t) {
            Some(m) if clean(m, state, obs) => promote(t, clean_loss(m)),
            Some(m) if obs.policy.allow_unclean && m.reachable() => promote(t, Some(lost(m))),
            _ => Err(BlockedReason::TargetNotEligible),
        };
    }
    if let Some(m) = ranked(state, obs, |m| clean(m, state, obs)).first() {
        return promote(&m.pod, clean_loss(m));
    }
    if obs.policy.allow_unclean
        && let Some(m) = ranked(state, obs, Member::reachable).first()
    {
        return promote(&m.pod, Some(lost(m)));
    }
    // The old master came back: it holds everything that was acknowledged.
    if old_member.is_some_and(Member::reachable) {
        return revert();
    }
    Err(BlockedReason::NoEligibleReplica)
}

/// Bytes behind the old master; when its offset is unknown, behind the most advanced
/// member (a lower bound).
fn bytes_lost(m: &Member, master_offset: Option<i64>, obs: &Observations) -> i64 {
    let best = obs
        .members
        .iter()
        .filter_map(|x| x.ha.map(|h| h.max_offset))
        .max();
    let reference = master_offset.max(best).unwrap_or(0);
    (reference - m.ha.map_or(0, |h| h.max_offset)).max(0)
}
