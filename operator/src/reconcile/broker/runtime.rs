//! Calls to running brokers outside the failover machine: the nameserver push phase (a
//! changed nameserver list goes to the running brokers with UPDATE_BROKER_CONFIG instead
//! of restarting them) and the runtime figures status and metrics report.

use std::collections::BTreeMap;

use kube::Resource;

use super::status::ObservedPod;
use super::{KIND, Reconciliation};
use crate::admin::{Admin, RuntimeInfo};
use crate::crd::Broker;
use crate::names::{BROKER_PORT, BrokerNames};
use crate::reconcile::{Context, Error};

/// Nameserver push phase: pushes `namesrv_addr` to the running brokers when it differs
/// from the list status recorded, and returns the list to record.
pub async fn namesrv_push(
    ctx: &Context,
    admin: &dyn Admin,
    broker: &Broker,
    rec: &Reconciliation,
    pods: &[ObservedPod],
    namesrv_addr: &str,
) -> Result<Option<String>, Error> {
    if push_due(rec.previous.namesrv_addr.as_deref(), namesrv_addr) {
        push_namesrv_addr(ctx, admin, broker, &rec.names, pods, namesrv_addr).await?;
    }
    Ok(Some(namesrv_addr.to_owned()))
}

/// Whether the running brokers must be told `current`: status recorded another list.
/// With none recorded the brokers started from a ConfigMap that already has it.
fn push_due(recorded: Option<&str>, current: &str) -> bool {
    recorded.is_some_and(|r| r != current)
}

async fn push_namesrv_addr(
    ctx: &Context,
    admin: &dyn Admin,
    broker: &Broker,
    names: &BrokerNames,
    pods: &[ObservedPod],
    namesrv_addr: &str,
) -> Result<(), Error> {
    let props = BTreeMap::from([("namesrvAddr".to_owned(), namesrv_addr.to_owned())]);
    for pod in pods.iter().filter(|p| p.ready) {
        let addr = format!(
            "{}:{BROKER_PORT}",
            names.pod_host(pod.group, pod.ordinal, &ctx.settings.cluster_domain)
        );
        admin.update_broker_config(&addr, &props).await?;
    }
    ctx.events
        .publish(
            KIND,
            &broker.object_ref(&()),
            false,
            "NameServersChanged",
            "UpdateBrokerConfig",
            format!("pushed namesrvAddr={namesrv_addr} to running brokers"),
        )
        .await;
    Ok(())
}

/// Runtime info of every ready pod; unreachable brokers are skipped (their members show
/// no lag figures) rather than failing the reconcile.
pub async fn collect_runtime_info(
    ctx: &Context,
    admin: &dyn Admin,
    names: &BrokerNames,
    pods: &[ObservedPod],
) -> BTreeMap<String, RuntimeInfo> {
    let mut out = BTreeMap::new();
    for pod in pods.iter().filter(|p| p.ready && !p.terminating) {
        let addr = format!(
            "{}:{BROKER_PORT}",
            names.pod_host(pod.group, pod.ordinal, &ctx.settings.cluster_domain)
        );
        match admin.runtime_info(&addr).await {
            Ok(info) => {
                out.insert(pod.name.clone(), info);
            }
            Err(e) => tracing::debug!(pod = %pod.name, error = %e, "no runtime info"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_changed_list_is_pushed() {
        assert!(!push_due(None, "a:9876;b:9876"));
        assert!(!push_due(Some("a:9876;b:9876"), "a:9876;b:9876"));
        assert!(push_due(Some("a:9876"), "a:9876;b:9876"));
    }
}
