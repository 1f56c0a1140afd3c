//! The Broker's pods as the reconcile sees them, and the role labels on them (the roles
//! phase: the group Services select the master by its label).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;

use super::driver::GroupRun;
use super::status::{ObservedPod, master_fenced};
use crate::builders::broker::{ROLE_MASTER, ROLE_SLAVE};
use crate::names::{BrokerNames, LABEL_ROLE, selector_string};
use crate::reconcile::apply::patch_metadata;
use crate::reconcile::{Context, Error};

pub async fn list_pods(pod_api: &Api<Pod>, names: &BrokerNames) -> Result<Vec<ObservedPod>, Error> {
    let pods = pod_api
        .list(&ListParams::default().labels(&selector_string(&names.selector())))
        .await?;
    Ok(pods
        .items
        .iter()
        .filter_map(|p| ObservedPod::from_pod(p, names))
        .collect())
}

/// Keeps the role labels (which the group Services select) on the recorded masters. A
/// fenced master loses its label at once, so the Service stops sending it clients.
pub async fn label_roles(
    ctx: &Context,
    namespace: &str,
    pods: &[ObservedPod],
    runs: &[GroupRun],
) -> Result<(), Error> {
    for pod in pods {
        let Some(run) = runs.get(pod.group as usize) else {
            continue;
        };
        let role = if pod.name == run.state.master && !master_fenced(&run.state) {
            ROLE_MASTER
        } else {
            ROLE_SLAVE
        };
        if pod.labels.get(LABEL_ROLE).map(String::as_str) != Some(role) && !pod.terminating {
            let patched = patch_metadata::<Pod>(
                &ctx.client,
                namespace,
                &pod.name,
                json!({ "labels": { LABEL_ROLE: role } }),
            )
            .await;
            match patched {
                Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 => {}
                other => other?,
            }
        }
    }
    Ok(())
}
