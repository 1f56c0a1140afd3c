//! Master failover and switchover of one broker group.
//!
//! [`machine::step`] is a pure function: the persisted [`State`] (from
//! `status.groups[].failover`) and fresh [`Observations`] (pods, GET_BROKER_HA_STATUS of
//! every member, the spec's policy, a switchover request, the time) in; the next state and
//! the [`Action`]s to apply out. [`executor::execute`] applies the actions through the
//! [`executor::GroupApi`] trait (Kubernetes) and the [`crate::admin::Admin`] trait
//! (NOTIFY_BROKER_ROLE_CHANGED); the Broker reconciler implements `GroupApi` with the
//! API server, tests with an in-memory fake.
//!
//! Phases: Idle → Detected → Fencing → Electing → Promoting → Repointing → Completed, or
//! Blocked with a reason. Safety rests on three rules the property tests check: every
//! member that may still act as master is fenced (demoted at a new epoch, or its pod
//! deleted) before anyone is promoted; each failover installs an epoch larger than any a
//! member has seen, so no two masters ever share one; and only an in-sync replica within
//! `maxLagBytes` is promoted unless `allowUnclean` is set.
//!
//! This mirrors what RocketMQ 5.x's controller (`ReplicasInfoManager.electMaster`,
//! `DefaultElectPolicy`) does, with the operator as the controller and the Broker status
//! as its replicated state.

pub mod election;
pub mod executor;
pub mod machine;
pub mod model;
pub mod observe;
pub mod recover;
pub mod status;

pub use machine::{
    Action, BlockedReason, Ha, Member, Observations, Outcome, Phase, Policy, Request, State, step,
};

#[cfg(test)]
mod machine_tests;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod sim;
