//! Reconcilers: read the world, compute the desired state with the pure builders, apply it
//! with server-side apply, and write status. Everything is derived from the object being
//! reconciled, so any number of clusters in any number of namespaces coexist.

pub mod admin_credentials;
pub mod apply;
pub mod broker;
pub mod context;
mod generated_secret;
pub mod nameserver;
mod nameserver_secret;
mod storage;
pub mod topic;

pub use context::{Context, EventSink};

use std::time::Duration;

use thiserror::Error;

use crate::admin::AdminError;

#[derive(Debug, Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("admin protocol: {0}")]
    Admin(#[from] AdminError),
    #[error("object has no {0}")]
    MissingField(&'static str),
    #[error("serialization: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("failover: {0}")]
    Failover(#[from] crate::failover::executor::ExecError),
    #[error("the system random generator failed")]
    Random,
    #[error("admin credentials: {0}")]
    Credentials(#[from] admin_credentials::CredentialsError),
}

impl Error {
    /// Low-cardinality label for the failure metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Admin(_) => "admin",
            Error::MissingField(_) => "invalid_object",
            Error::Serialize(_) => "serialize",
            Error::Failover(_) => "failover",
            Error::Random => "random",
            Error::Credentials(_) => "credentials",
        }
    }
}

/// Requeue delay after `failures` consecutive failures of one object: 5 s doubling to a
/// 5-minute cap, so a broken object neither spins nor waits forever.
pub fn backoff(failures: u32) -> Duration {
    let secs = 5u64.saturating_mul(1u64 << failures.min(6));
    Duration::from_secs(secs.min(300))
}

/// Periodic resync of healthy objects (drift repair, status refresh).
pub const RESYNC: Duration = Duration::from_secs(300);
/// Requeue while something is in progress (pods starting, a rolling restart).
pub const PROGRESS_POLL: Duration = Duration::from_secs(10);
/// Requeue while a failover is running or a master is unready: detection and each phase
/// should not wait for the next pod event.
pub const FAILOVER_POLL: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), Duration::from_secs(5));
        assert_eq!(backoff(1), Duration::from_secs(10));
        assert_eq!(backoff(5), Duration::from_secs(160));
        assert_eq!(backoff(6), Duration::from_secs(300));
        assert_eq!(backoff(40), Duration::from_secs(300));
    }
}
