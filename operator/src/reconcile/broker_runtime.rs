//! Calls to running brokers outside the failover machine: the nameserver list pushed
//! live, and the runtime figures status and metrics report.

use std::collections::BTreeMap;

use kube::Resource;

use super::broker::KIND;
use super::broker_status::ObservedPod;
use super::{Context, Error};
use crate::admin::{Admin, RuntimeInfo};
use crate::crd::Broker;
use crate::names::{BROKER_PORT, BrokerNames};

pub async fn push_namesrv_addr(
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
