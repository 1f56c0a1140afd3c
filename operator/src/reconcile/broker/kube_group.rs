//! The failover executor's [`GroupApi`] over the API server: one group of one Broker,
//! whose configuration, pods and role labels the executor changes.

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, DeleteParams};
use serde_json::json;

use super::KIND;
use super::listener::recorded_hosts;
use super::status::{master_fenced, pod_ordinal};
use super::switchover::clear_switchover_annotation;
use crate::builders::broker::{BrokerInputs, ROLE_MASTER, ROLE_SLAVE, build_group};
use crate::crd::Broker;
use crate::failover::State;
use crate::failover::executor::{ExecError, GroupApi};
use crate::names::{BROKER_PORT, BrokerNames, LABEL_ROLE};
use crate::reconcile::apply::{apply, patch_metadata};
use crate::reconcile::{Context, Error};

/// One group of one Broker, as the executor sees it.
pub struct KubeGroup<'a> {
    pub ctx: &'a Context,
    pub broker: &'a Broker,
    pub names: &'a BrokerNames,
    pub group: i32,
    pub namesrv_addr: &'a str,
    /// The master before this step (fenced rendering is relative to it).
    pub master: String,
}

fn kube_error(e: Error) -> ExecError {
    ExecError::Api(e.to_string())
}

impl KubeGroup<'_> {
    fn namespace(&self) -> &str {
        &self.names.namespace
    }

    /// Writes the group's ConfigMap for `state`'s roles.
    async fn write_config(&self, state: &State) -> Result<(), ExecError> {
        let g = usize::try_from(self.group).unwrap_or(0);
        let mut master_ordinals = vec![0; g + 1];
        let mut fenced = vec![false; g + 1];
        master_ordinals[g] = pod_ordinal(&state.master);
        fenced[g] = master_fenced(state);
        let inputs = BrokerInputs {
            namesrv_addr: self.namesrv_addr.to_owned(),
            master_ordinals,
            fenced,
            // The addresses the last reconcile found; they only change with the Services.
            external: recorded_hosts(self.broker),
            running: BTreeSet::new(),
        };
        let objects = build_group(
            self.broker,
            self.names,
            self.group,
            &inputs,
            &self.ctx.settings,
        );
        apply(&self.ctx.client, &objects.config_map)
            .await
            .map(drop)
            .map_err(kube_error)
    }
}

impl GroupApi for KubeGroup<'_> {
    fn address(&self, pod: &str) -> String {
        format!(
            "{}:{BROKER_PORT}",
            self.names.pod_host(
                self.group,
                pod_ordinal(pod),
                &self.ctx.settings.cluster_domain
            )
        )
    }

    fn delete_pod<'a>(&'a self, pod: &'a str) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            // The recreated pod must not start as master: fence its configuration first.
            let fenced = State {
                master: self.master.clone(),
                phase: crate::failover::Phase::Fencing,
                fenced: vec![self.master.clone()],
                ..State::default()
            };
            self.write_config(&fenced).await?;
            let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), self.namespace());
            match api.delete(pod, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(kube_error(e.into())),
            }
        })
    }

    fn repoint<'a>(&'a self, master: &'a str) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            self.write_config(&State::idle(master, 0)).await?;
            for o in 0..self.broker.spec.replicas_per_group.max(0) {
                let pod = self.names.pod(self.group, o);
                let role = if pod == master {
                    ROLE_MASTER
                } else {
                    ROLE_SLAVE
                };
                let patched = patch_metadata::<Pod>(
                    &self.ctx.client,
                    self.namespace(),
                    &pod,
                    json!({ "labels": { LABEL_ROLE: role } }),
                )
                .await;
                match patched {
                    Ok(()) => {}
                    Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 => {}
                    Err(e) => return Err(kube_error(e)),
                }
            }
            Ok(())
        })
    }

    fn clear_request<'a>(&'a self) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            clear_switchover_annotation(self.ctx, self.broker)
                .await
                .map_err(kube_error)
        })
    }

    fn publish<'a>(
        &'a self,
        warning: bool,
        reason: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let note = format!("{}: {message}", self.names.broker_name(self.group));
            self.ctx
                .events
                .publish(
                    KIND,
                    &self.broker.object_ref(&()),
                    warning,
                    reason,
                    "Failover",
                    note,
                )
                .await;
        })
    }
}
