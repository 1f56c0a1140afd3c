//! Applies the machine's actions: role changes through the admin protocol, pod deletes,
//! the master label and member configurations through [`GroupApi`], Events and metrics.
//!
//! Actions run in order and stop at the first failure, except `Follow` (a slave that does
//! not answer picks up its master from its configuration when it restarts). The caller
//! persists the machine's next state only when `execute` succeeded.

use futures::future::BoxFuture;
use thiserror::Error;

use crate::admin::ha::NO_MASTER_BROKER_ID;
use crate::admin::{Admin, AdminError, RoleChange};
use crate::metrics::{FailoverLabels, GroupLabels, Metrics};

use super::machine::Action;

#[derive(Debug, Error)]
pub enum ExecError {
    #[error("admin protocol: {0}")]
    Admin(#[from] AdminError),
    #[error("Kubernetes API: {0}")]
    Api(String),
}

/// The Kubernetes side of one broker group. The reconciler implements it with the API
/// server; tests (and the end-to-end failover test) with a simulated pod API.
pub trait GroupApi: Send + Sync {
    /// Remoting address (`host:port`) of a member.
    fn address(&self, pod: &str) -> String;
    /// Deletes the pod of an unreachable member; its configuration must already say
    /// slave, so the recreated pod cannot come back as a master. A missing pod is success.
    fn delete_pod<'a>(&'a self, pod: &'a str) -> BoxFuture<'a, Result<(), ExecError>>;
    /// Labels `master` as the group's master (the Service follows) and every other member
    /// as slave, and rewrites the member configurations around it.
    fn repoint<'a>(&'a self, master: &'a str) -> BoxFuture<'a, Result<(), ExecError>>;
    /// Removes the switchover request.
    fn clear_request<'a>(&'a self) -> BoxFuture<'a, Result<(), ExecError>>;
    /// Publishes an Event; never fails the failover.
    fn publish<'a>(&'a self, warning: bool, reason: &'a str, message: &'a str)
    -> BoxFuture<'a, ()>;
}

/// Where outcomes and durations are recorded.
pub struct Recorder<'a> {
    pub metrics: &'a Metrics,
    pub group: GroupLabels,
}

pub async fn execute(
    actions: &[Action],
    api: &dyn GroupApi,
    admin: &dyn Admin,
    recorder: &Recorder<'_>,
) -> Result<(), ExecError> {
    for action in actions {
        match action {
            Action::Fence { pod, epoch } => {
                let change = RoleChange {
                    master_address: String::new(),
                    master_epoch: *epoch,
                    sync_state_set_epoch: *epoch,
                    master_broker_id: NO_MASTER_BROKER_ID,
                };
                admin
                    .notify_role_changed(&api.address(pod), &change)
                    .await?;
            }
            Action::DeletePod { pod } => api.delete_pod(pod).await?,
            Action::Promote {
                pod,
                broker_id,
                epoch,
            } => {
                let addr = api.address(pod);
                let change = RoleChange {
                    master_address: addr.clone(),
                    master_epoch: *epoch,
                    sync_state_set_epoch: *epoch,
                    master_broker_id: *broker_id,
                };
                admin.notify_role_changed(&addr, &change).await?;
            }
            Action::Follow {
                pod,
                master,
                master_broker_id,
                epoch,
            } => {
                let change = RoleChange {
                    master_address: api.address(master),
                    master_epoch: *epoch,
                    sync_state_set_epoch: *epoch,
                    master_broker_id: *master_broker_id,
                };
                if let Err(e) = admin.notify_role_changed(&api.address(pod), &change).await {
                    let note = format!("{pod} did not take {master} as its master: {e}");
                    api.publish(true, "FollowFailed", &note).await;
                }
            }
            Action::Repoint { master } => api.repoint(master).await?,
            Action::ClearRequest => api.clear_request().await?,
            Action::Event {
                warning,
                reason,
                message,
            } => api.publish(*warning, reason, message).await,
            Action::Finished {
                outcome,
                duration_ms,
            } => {
                let labels = FailoverLabels {
                    resource_namespace: recorder.group.resource_namespace.clone(),
                    broker: recorder.group.broker.clone(),
                    broker_name: recorder.group.broker_name.clone(),
                    outcome: outcome.as_str(),
                };
                recorder.metrics.failovers.get_or_create(&labels).inc();
                #[allow(clippy::cast_precision_loss)]
                let secs = *duration_ms as f64 / 1000.0;
                recorder
                    .metrics
                    .failover_duration
                    .get_or_create(&labels)
                    .observe(secs);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
