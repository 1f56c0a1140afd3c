//! The failover state machine: `step(state, observations) -> (state, actions)`, pure.
//!
//! One call makes at most one phase transition; the reconciler calls it again (with fresh
//! observations) while the phase keeps changing. Actions are idempotent, and the state
//! returned is persisted only after all its actions succeeded, so a failed action simply
//! repeats the step on the next reconcile.

use crate::crd::{FailoverPolicy, FailoverTrigger};

use super::election::{self, Candidate};
pub use super::model::{
    Action, BlockedReason, Ha, Member, Observations, Outcome, Phase, Policy, Request, State,
};

/// A planned switchover waits this long for the target to catch up with the fenced old
/// master before the old master is elected back (nothing lost, nothing changed).
pub const CATCH_UP_TIMEOUT_MS: i64 = 30_000;

/// The next state and the actions that take the group there.
pub fn step(state: &State, obs: &Observations) -> (State, Vec<Action>) {
    let mut t = Transition {
        next: state.clone(),
        actions: Vec::new(),
        obs,
    };
    match state.phase {
        Phase::Idle | Phase::Completed => t.at_rest_step(),
        Phase::Detected => t.detected(),
        Phase::Fencing => t.fencing(),
        Phase::Electing => t.electing(),
        Phase::Promoting => t.promoting(),
        Phase::Repointing => t.repointing(),
        Phase::Blocked(_) => t.blocked(),
    }
    (t.next, t.actions)
}

struct Transition<'a> {
    next: State,
    actions: Vec<Action>,
    obs: &'a Observations,
}

impl Transition<'_> {
    fn enter(&mut self, phase: Phase, warning: bool, reason: &'static str, message: String) {
        self.next.phase = phase;
        self.next.phase_since_ms = Some(self.obs.now_ms);
        self.next.message = Some(message.clone());
        self.actions.push(Action::Event {
            warning,
            reason,
            message,
        });
    }

    fn finish(&mut self, outcome: Outcome) {
        let started = self.next.started_at_ms.unwrap_or(self.obs.now_ms);
        self.actions.push(Action::Finished {
            outcome,
            duration_ms: (self.obs.now_ms - started).max(0),
        });
    }

    fn master_down(&self) -> bool {
        self.obs
            .member(&self.next.master)
            .is_none_or(|m| !m.exists || !m.ready)
    }

    fn at_rest_step(&mut self) {
        let master = self.next.master.clone();
        if let Some(req) = self.obs.request.clone() {
            match &req.target {
                Some(t) if *t == master || self.obs.member(t).is_none() => {
                    self.actions.push(Action::ClearRequest);
                    self.actions.push(Action::Event {
                        warning: true,
                        reason: "SwitchoverRejected",
                        message: format!(
                            "{t} is not a replica of this group other than its master {master}"
                        ),
                    });
                    return;
                }
                _ => {}
            }
            self.begin(req.trigger, req.target.clone());
            let to = req.target.as_deref().unwrap_or("an in-sync replica");
            let message = format!("switchover of {master} to {to} requested");
            self.enter(Phase::Detected, false, "SwitchoverRequested", message);
            return;
        }
        // Nothing to fail over to while no other member runs (a group still starting).
        let others_up = self
            .obs
            .members
            .iter()
            .any(|m| m.pod != master && m.exists && m.ready);
        if self.master_down() && others_up {
            self.begin(FailoverTrigger::MasterUnavailable, None);
            let message = match self.obs.policy.mode {
                FailoverPolicy::Automatic => format!(
                    "master {master} is not ready; failing over after {} ms",
                    self.obs.policy.unavailable_for_ms
                ),
                FailoverPolicy::Manual => format!(
                    "master {master} is not ready; policy Manual waits for a switchover request"
                ),
            };
            self.enter(Phase::Detected, true, "MasterUnavailable", message);
        }
    }

    fn begin(&mut self, trigger: FailoverTrigger, target: Option<String>) {
        let n = &mut self.next;
        n.trigger = Some(trigger);
        n.from = Some(n.master.clone());
        n.to = target;
        n.target_epoch = None;
        n.fenced.clear();
        n.bytes_lost = None;
        n.bytes_lost_exact = None;
        n.started_at_ms = Some(self.obs.now_ms);
    }

    fn planned(&self) -> bool {
        matches!(
            self.next.trigger,
            Some(
                FailoverTrigger::Switchover
                    | FailoverTrigger::RollingRestart
                    | FailoverTrigger::Drain
            )
        )
    }

    fn detected(&mut self) {
        if self.planned() {
            if self.next.trigger == Some(FailoverTrigger::Switchover) && self.obs.request.is_none()
            {
                self.cancel("switchover request withdrawn");
                return;
            }
            // The old master keeps serving until a clean candidate exists.
            match election::precheck(&self.next, self.obs) {
                Ok(()) => self.start_fencing(),
                // A rolling restart or a drain tries again later (the master stays).
                Err(_)
                    if matches!(
                        self.next.trigger,
                        Some(FailoverTrigger::RollingRestart | FailoverTrigger::Drain)
                    ) =>
                {
                    self.cancel("no in-sync replica to hand over to yet; the master stays");
                }
                Err(reason) => self.block(reason),
            }
            return;
        }
        if !self.master_down() {
            self.cancel("master is ready again");
            return;
        }
        match self.obs.policy.mode {
            FailoverPolicy::Manual => {
                if let Some(req) = self.obs.request.clone() {
                    self.next.to = req.target;
                    self.next.trigger = Some(FailoverTrigger::Switchover);
                    self.start_fencing();
                }
            }
            FailoverPolicy::Automatic => {
                let down_since = self
                    .obs
                    .member(&self.next.master)
                    .and_then(|m| m.unready_since_ms)
                    .or(self.next.phase_since_ms)
                    .unwrap_or(self.obs.now_ms);
                if self.obs.now_ms - down_since >= self.obs.policy.unavailable_for_ms {
                    self.start_fencing();
                }
            }
        }
    }

    fn cancel(&mut self, why: &str) {
        self.finish(Outcome::Cancelled);
        self.next.trigger = None;
        self.next.from = None;
        self.next.to = None;
        self.next.target_epoch = None;
        self.next.fenced.clear();
        self.next.started_at_ms = None;
        self.enter(Phase::Idle, false, "FailoverCancelled", why.to_owned());
    }

    fn block(&mut self, reason: BlockedReason) {
        let message = match reason {
            BlockedReason::NoEligibleReplica => format!(
                "no replica of {} is in sync within maxLagBytes {} and reachable",
                self.next.from.as_deref().unwrap_or(&self.next.master),
                self.obs.policy.max_lag_bytes
            ),
            BlockedReason::TargetNotEligible => format!(
                "target {} is not in sync within maxLagBytes {}",
                self.next.to.as_deref().unwrap_or("?"),
                self.obs.policy.max_lag_bytes
            ),
        };
        if !matches!(self.next.phase, Phase::Blocked(_)) {
            self.finish(Outcome::Blocked);
        }
        self.enter(Phase::Blocked(reason), true, "FailoverBlocked", message);
    }

    /// Members that may act as master: the old master, a candidate a previous round
    /// promoted, and anyone reporting itself master.
    fn fence_targets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |p: &str| {
            if !out.iter().any(|o| o == p) {
                out.push(p.to_owned());
            }
        };
        if let Some(from) = &self.next.from {
            add(from);
        }
        add(&self.next.master);
        if self.next.phase == Phase::Promoting
            && let Some(to) = &self.next.to
        {
            add(to);
        }
        for m in &self.obs.members {
            if m.ha.is_some_and(|h| h.master) {
                add(&m.pod);
            }
        }
        out
    }

    /// Bumps the epoch past anything seen and fences every possible master.
    fn start_fencing(&mut self) {
        let targets = self.fence_targets();
        let epoch = self
            .next
            .epoch
            .max(self.next.target_epoch.unwrap_or(0))
            .max(self.obs.max_epoch())
            + 1;
        self.next.target_epoch = Some(epoch);
        self.next.fenced.clear();
        self.fence(&targets, epoch);
        self.enter(
            Phase::Fencing,
            false,
            "FailoverFencing",
            format!("fencing {} at epoch {epoch}", targets.join(", ")),
        );
    }

    fn fence(&mut self, targets: &[String], epoch: i64) {
        for pod in targets {
            if self.next.fenced.contains(pod) {
                continue;
            }
            match self.obs.member(pod) {
                Some(m) if m.ha.is_some() => self.actions.push(Action::Fence {
                    pod: pod.clone(),
                    epoch,
                }),
                Some(m) if m.exists => self.actions.push(Action::DeletePod { pod: pod.clone() }),
                // No pod: no process to fence.
                _ => {}
            }
            self.next.fenced.push(pod.clone());
        }
    }

    /// A fenced pod that is being deleted (by this machine's DeletePod, a drain, or a
    /// user) may still run its broker, and take writes from clients the operator cannot
    /// see, until its grace period ends. It counts as fenced only once the broker itself
    /// reports the new epoch as a non-master, or the pod object is gone (the kubelet
    /// confirmed the process exited; a recreated pod starts from the fenced
    /// configuration). Until then the election waits; one still answering is told again.
    /// A pod stuck terminating on a lost node keeps the group here until someone
    /// force-deletes it (`docs/runbooks/failover-blocked.md`).
    fn awaiting_termination(&mut self, epoch: i64) -> bool {
        let mut waiting = false;
        for pod in &self.next.fenced {
            let Some(m) = self.obs.member(pod).filter(|m| m.terminating) else {
                continue;
            };
            match m.ha {
                Some(h) if !h.master && h.epoch >= epoch => {}
                Some(_) => {
                    self.actions.push(Action::Fence {
                        pod: pod.clone(),
                        epoch,
                    });
                    waiting = true;
                }
                None => waiting = true,
            }
        }
        waiting
    }

    fn fencing(&mut self) {
        let epoch = self.next.target_epoch.unwrap_or(self.next.epoch + 1);
        // Someone still claiming mastership below the new epoch gets fenced again.
        let stale: Vec<String> = self
            .obs
            .members
            .iter()
            .filter(|m| m.ha.is_some_and(|h| h.master && h.epoch < epoch))
            .map(|m| m.pod.clone())
            .collect();
        if !stale.is_empty() {
            self.next.fenced.retain(|p| !stale.contains(p));
            self.fence(&stale, epoch);
            return;
        }
        if self.awaiting_termination(epoch) {
            return;
        }
        self.enter(
            Phase::Electing,
            false,
            "FailoverElecting",
            format!(
                "fenced {}; electing a new master",
                self.next.fenced.join(", ")
            ),
        );
    }

    fn electing(&mut self) {
        let waited = self.obs.now_ms - self.next.phase_since_ms.unwrap_or(self.obs.now_ms);
        match election::elect(&self.next, self.obs, waited >= CATCH_UP_TIMEOUT_MS) {
            Ok(Candidate::Wait) => {}
            // The promotion itself is the next step's action, so the choice is recorded
            // (and persisted) before any broker hears of it: a retry after a crash or a
            // timeout can only re-promote the same pod at this epoch, never another one.
            Ok(Candidate::Promote { pod, loss }) => {
                let epoch = self.next.target_epoch.unwrap_or(self.next.epoch + 1);
                self.next.bytes_lost = loss.map(|l| l.bytes);
                self.next.bytes_lost_exact = loss.map(|l| l.exact);
                let lost = match loss {
                    None => String::new(),
                    Some(l) if l.exact => format!(" (unclean: {} bytes lost)", l.bytes),
                    Some(l) => format!(
                        " (unclean: at least {} bytes lost; the old master's final end is unknown)",
                        l.bytes
                    ),
                };
                self.next.to = Some(pod.clone());
                self.enter(
                    Phase::Promoting,
                    loss.is_some(),
                    "FailoverPromoting",
                    format!("promoting {pod} at epoch {epoch}{lost}"),
                );
            }
            Err(reason) => self.block(reason),
        }
    }

    fn promoting(&mut self) {
        let Some(to) = self.next.to.clone() else {
            self.start_fencing();
            return;
        };
        let epoch = self.next.target_epoch.unwrap_or(self.next.epoch + 1);
        let Some(member) = self.obs.member(&to).cloned() else {
            self.start_fencing();
            return;
        };
        match member.ha {
            Some(h) if member.exists && h.master && h.epoch == epoch => {
                for m in &self.obs.members {
                    if m.pod != to && m.ha.is_some() {
                        self.actions.push(Action::Follow {
                            pod: m.pod.clone(),
                            master: to.clone(),
                            master_broker_id: member.broker_id,
                            epoch,
                        });
                    }
                }
                self.actions.push(Action::Repoint { master: to.clone() });
                if self.next.trigger == Some(FailoverTrigger::Switchover) {
                    self.actions.push(Action::ClearRequest);
                }
                self.next.master = to.clone();
                self.next.epoch = epoch;
                self.enter(
                    Phase::Repointing,
                    false,
                    "FailoverRepointing",
                    format!("{to} is master at epoch {epoch}; moving the master Service and member configurations"),
                );
            }
            Some(_) if member.exists => self.actions.push(Action::Promote {
                pod: to,
                broker_id: member.broker_id,
                epoch,
            }),
            // The candidate vanished mid-promotion: it may have become master, so it is
            // fenced with everyone else at a newer epoch before another election.
            _ => {
                self.actions.push(Action::Event {
                    warning: true,
                    reason: "PromotionFailed",
                    message: format!("{to} stopped answering while being promoted"),
                });
                self.start_fencing();
            }
        }
    }

    fn repointing(&mut self) {
        let outcome = match (&self.next.bytes_lost, &self.next.from) {
            (Some(_), _) => Outcome::Unclean,
            (None, Some(from)) if *from == self.next.master => Outcome::Reverted,
            _ => Outcome::Clean,
        };
        self.finish(outcome);
        self.next.completed_at_ms = Some(self.obs.now_ms);
        let message = format!(
            "{} is master of the group at epoch {}",
            self.next.master, self.next.epoch
        );
        self.enter(Phase::Completed, false, "FailoverCompleted", message);
    }

    fn blocked(&mut self) {
        if self.next.fenced.is_empty() {
            // Blocked before fencing: the old master still serves.
            if self.planned() {
                if self.next.trigger == Some(FailoverTrigger::Switchover)
                    && self.obs.request.is_none()
                {
                    self.cancel("switchover request withdrawn");
                    return;
                }
                if self.master_down() {
                    self.next.trigger = Some(FailoverTrigger::MasterUnavailable);
                    self.next.to = None;
                    self.enter(
                        Phase::Detected,
                        true,
                        "MasterUnavailable",
                        format!("master {} is not ready", self.next.master),
                    );
                    return;
                }
                if election::precheck(&self.next, self.obs).is_ok() {
                    self.start_fencing();
                }
                return;
            }
        }
        // After fencing the group has no master: retry whenever someone is eligible; a
        // Manual request may name a target.
        if let Some(req) = &self.obs.request
            && req.target.is_some()
            && req.target != self.next.to
        {
            self.next.to = req.target.clone();
            self.next.trigger = Some(FailoverTrigger::Switchover);
        }
        if matches!(
            election::elect(&self.next, self.obs, true),
            Ok(Candidate::Promote { .. })
        ) {
            self.start_fencing();
        }
    }
}
