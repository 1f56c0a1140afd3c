//! The failover machine's inputs, outputs and persisted state.

use crate::crd::{FailoverPolicy, FailoverTrigger};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub mode: FailoverPolicy,
    pub unavailable_for_ms: i64,
    pub max_lag_bytes: i64,
    pub allow_unclean: bool,
    /// ASYNC_MASTER (`replication.ackMode: Async`): a send is acknowledged before any
    /// slave has it, so whatever a promoted slave lacks may have been acknowledged.
    pub async_acks: bool,
}

/// What GET_BROKER_HA_STATUS said about one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ha {
    pub master: bool,
    pub epoch: i64,
    pub max_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub pod: String,
    /// brokerId in the member's current configuration.
    pub broker_id: i64,
    /// The pod object exists and is not terminating.
    pub exists: bool,
    /// The pod object is being deleted (it has a deletionTimestamp): its process may
    /// still run, and serve clients, until its grace period ends.
    pub terminating: bool,
    pub ready: bool,
    /// When the pod's Ready condition last turned false (epoch ms).
    pub unready_since_ms: Option<i64>,
    /// `None`: the admin port did not answer.
    pub ha: Option<Ha>,
    /// In the master's in-sync set, as last reported by the master.
    pub in_sync: bool,
}

impl Member {
    /// Ready and answering admin requests.
    pub fn reachable(&self) -> bool {
        self.exists && self.ready && self.ha.is_some()
    }
}

/// A switchover asked for by the user (annotation) or a rolling restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub trigger: FailoverTrigger,
    /// The pod to promote; `None` lets the election choose.
    pub target: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observations {
    pub now_ms: i64,
    pub policy: Policy,
    pub members: Vec<Member>,
    pub request: Option<Request>,
    /// Best known commit-log max offset of the master: live when it answers, else the
    /// last recorded value or what its slaves last saw.
    pub master_offset: Option<i64>,
}

impl Observations {
    pub fn member(&self, pod: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.pod == pod)
    }

    /// Largest epoch any member reports.
    pub fn max_epoch(&self) -> i64 {
        self.members
            .iter()
            .filter_map(|m| m.ha.map(|h| h.epoch))
            .max()
            .unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockedReason {
    /// No member may be promoted (none in sync within maxLagBytes, none reachable).
    NoEligibleReplica,
    /// The requested target is not (yet) eligible.
    TargetNotEligible,
}

impl BlockedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockedReason::NoEligibleReplica => "NoEligibleReplica",
            BlockedReason::TargetNotEligible => "TargetNotEligible",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    #[default]
    Idle,
    Detected,
    Fencing,
    Electing,
    Promoting,
    Repointing,
    Completed,
    Blocked(BlockedReason),
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "Idle",
            Phase::Detected => "Detected",
            Phase::Fencing => "Fencing",
            Phase::Electing => "Electing",
            Phase::Promoting => "Promoting",
            Phase::Repointing => "Repointing",
            Phase::Completed => "Completed",
            Phase::Blocked(_) => "Blocked",
        }
    }

    pub fn at_rest(self) -> bool {
        matches!(self, Phase::Idle | Phase::Completed)
    }
}

/// How a failover ended, for the `failovers_total{outcome}` metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A replica within maxLagBytes (or a caught-up switchover target) took over.
    Clean,
    /// `allowUnclean` promoted a lagging replica; bytes were lost.
    Unclean,
    /// The old master was elected back (it recovered, or a switchover target never
    /// caught up).
    Reverted,
    /// Entered Blocked.
    Blocked,
    /// The request was withdrawn or the master recovered before fencing.
    Cancelled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Clean => "clean",
            Outcome::Unclean => "unclean",
            Outcome::Reverted => "reverted",
            Outcome::Blocked => "blocked",
            Outcome::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// NOTIFY_BROKER_ROLE_CHANGED naming no master: `pod` becomes a slave at `epoch`.
    Fence { pod: String, epoch: i64 },
    /// The pod does not answer: delete it (its configuration already says slave).
    DeletePod { pod: String },
    /// NOTIFY_BROKER_ROLE_CHANGED naming `pod` itself: it becomes master at `epoch`.
    Promote {
        pod: String,
        broker_id: i64,
        epoch: i64,
    },
    /// NOTIFY_BROKER_ROLE_CHANGED to a non-master member: replicate from `master`.
    Follow {
        pod: String,
        master: String,
        master_broker_id: i64,
        epoch: i64,
    },
    /// Move the group's master label and rewrite the members' configurations
    /// (brokerId/brokerRole) around `master`.
    Repoint { master: String },
    /// Remove the switchover request (annotation) that started this failover.
    ClearRequest,
    Event {
        warning: bool,
        reason: &'static str,
        message: String,
    },
    /// The failover ended; `duration_ms` from detection.
    Finished { outcome: Outcome, duration_ms: i64 },
}

impl Action {
    /// Whether the action changes the cluster (anything but an Event or a metric).
    pub fn acts(&self) -> bool {
        !matches!(self, Action::Event { .. } | Action::Finished { .. })
    }
}

/// The group's failover state, as persisted in `status.groups[]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct State {
    /// The current master (status `masterPod`).
    pub master: String,
    /// The group's committed epoch (status `epoch`).
    pub epoch: i64,
    pub phase: Phase,
    pub trigger: Option<FailoverTrigger>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// The epoch this failover installs.
    pub target_epoch: Option<i64>,
    pub fenced: Vec<String>,
    pub started_at_ms: Option<i64>,
    pub phase_since_ms: Option<i64>,
    pub completed_at_ms: Option<i64>,
    /// Commit-log bytes the promoted replica lacked: the old master's end minus its
    /// own. `bytes_lost_exact` false: that end is the last one observed before the
    /// master went away, so the loss is at least this much and the rest is unknown.
    pub bytes_lost: Option<i64>,
    pub bytes_lost_exact: Option<bool>,
    pub message: Option<String>,
}

impl State {
    pub fn idle(master: &str, epoch: i64) -> Self {
        Self {
            master: master.to_owned(),
            epoch,
            ..Self::default()
        }
    }
}
