//! NameServer reconciler, in phases like the Broker's: pause (`ReconciliationPaused`),
//! the admin secret (`super::nameserver_secret`), owned objects (Events `VolumesExpanded` / `ResizeRefused` for the KV volumes),
//! monitoring, and status from the applied StatefulSet ([`desired_status`], pure:
//! `Ready`, `Progressing`, `ReconciliationPaused=False`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::controller::Action;

use super::apply::{
    apply, apply_dynamic, delete_dynamic_if_exists, delete_if_exists, patch_status,
};
use super::storage::{StorageStep, prepare_claims};
use super::{Context, Error, PROGRESS_POLL, RESYNC};
use crate::builders::monitoring::{monitoring_labels, service_monitor, service_monitor_resource};
use crate::builders::nameserver::KV_CLAIM;
use crate::builders::nameserver::build;
use crate::conditions::{self, Desired};
use crate::crd::{NameServer, NameServerStatus};
use crate::names::{
    ANNOTATION_PAUSE, NameServerNames, annotation_is, headless_selector, object_labels,
};

pub const KIND: &str = "NameServer";

pub async fn reconcile(ns: Arc<NameServer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let names = NameServerNames::of(&ns);
    let name = ns
        .metadata
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let namespace = ns
        .metadata
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let previous = ns.status.clone().unwrap_or_default();
    let now = Timestamp::now();

    if annotation_is(ns.metadata.annotations.as_ref(), ANNOTATION_PAUSE, "true") {
        let mut status = previous.clone();
        status.conditions = conditions::paused(&previous.conditions, ns.metadata.generation, now);
        if status != previous {
            patch_status::<NameServer, _>(&ctx.client, namespace, name, &status).await?;
        }
        return Ok(Action::requeue(RESYNC));
    }

    let enforce_admin_secret = super::nameserver_secret::ensure(&ctx, &ns, &names).await?;
    let sts = apply_objects(&ctx, &ns, &names, namespace, enforce_admin_secret).await?;
    apply_service_monitor(&ctx, &ns, &names, namespace).await?;

    let status = desired_status(&ns, &sts, &previous, &ctx.settings.cluster_domain, now);
    let became_ready = conditions::is_true(&status.conditions, conditions::READY)
        && !conditions::is_true(&previous.conditions, conditions::READY);
    if status != previous {
        patch_status::<NameServer, _>(&ctx.client, namespace, name, &status).await?;
    }
    if became_ready {
        ctx.events
            .publish(
                KIND,
                &ns.object_ref(&()),
                false,
                "Ready",
                "Reconcile",
                format!("{} nameserver replica(s) ready", status.ready_replicas),
            )
            .await;
    }
    Ok(
        if conditions::is_true(&status.conditions, conditions::READY) {
            Action::requeue(RESYNC)
        } else {
            Action::requeue(PROGRESS_POLL)
        },
    )
}

/// Owned objects phase: the ConfigMap, the Services, the StatefulSet (after its KV
/// volumes are prepared) and the PodDisruptionBudget, server-side applied; returns the
/// StatefulSet as stored, whose status the status phase reads.
async fn apply_objects(
    ctx: &Context,
    ns: &NameServer,
    names: &NameServerNames,
    namespace: &str,
    enforce_admin_secret: bool,
) -> Result<StatefulSet, Error> {
    let mut objects = build(ns, &ctx.settings, enforce_admin_secret);
    apply(&ctx.client, &objects.config_map).await?;
    apply(&ctx.client, &objects.headless_service).await?;
    apply(&ctx.client, &objects.client_service).await?;
    // volumeClaimTemplates are immutable: a new or grown KV claim re-creates the
    // StatefulSet with orphaned pods, as for Broker storage.
    let sts_name = names.statefulset.clone();
    let step = prepare_claims(
        ctx,
        namespace,
        &sts_name,
        KV_CLAIM,
        &|o| format!("{KV_CLAIM}-{sts_name}-{o}"),
        &mut objects.statefulset,
    )
    .await?;
    match step {
        StorageStep::UpToDate => {}
        StorageStep::Expanded { from, to } => {
            ctx.events
                .publish(
                    KIND,
                    &ns.object_ref(&()),
                    false,
                    "VolumesExpanded",
                    "ResizeVolumes",
                    format!("KV config volumes {from} -> {to}; StatefulSet re-created (pods kept)"),
                )
                .await;
        }
        StorageStep::Refused { reason, .. } => {
            ctx.events
                .publish(
                    KIND,
                    &ns.object_ref(&()),
                    true,
                    "ResizeRefused",
                    "ResizeVolumes",
                    reason,
                )
                .await;
        }
    }
    let sts = apply(&ctx.client, &objects.statefulset).await?;
    match &objects.pdb {
        Some(pdb) => {
            apply(&ctx.client, pdb).await?;
        }
        None => {
            delete_if_exists::<PodDisruptionBudget>(&ctx.client, namespace, &names.statefulset)
                .await?
        }
    }
    Ok(sts)
}

/// Monitoring phase: the ServiceMonitor when `spec.metrics.serviceMonitor` asks for one
/// and the cluster serves the monitoring API; removed when no longer asked for.
async fn apply_service_monitor(
    ctx: &Context,
    ns: &NameServer,
    names: &NameServerNames,
    namespace: &str,
) -> Result<(), Error> {
    if ns.spec.metrics.service_monitor && ctx.monitoring_available {
        let sm = service_monitor(
            &names.statefulset,
            namespace,
            &monitoring_labels(
                &object_labels(&names.selector()),
                &ctx.settings.monitoring_labels,
            ),
            &headless_selector(names.selector()),
            &ns.spec.metrics.interval,
            ns.controller_owner_ref(&()),
        );
        apply_dynamic(&ctx.client, &service_monitor_resource(), &sm).await?;
    } else if ctx.monitoring_available {
        delete_dynamic_if_exists(
            &ctx.client,
            &service_monitor_resource(),
            namespace,
            &names.statefulset,
        )
        .await?;
    }
    Ok(())
}

/// Status from the applied StatefulSet: readiness, stable addresses, conditions.
pub fn desired_status(
    ns: &NameServer,
    sts: &StatefulSet,
    previous: &NameServerStatus,
    cluster_domain: &str,
    now: Timestamp,
) -> NameServerStatus {
    let names = NameServerNames::of(ns);
    let sts_status = sts.status.clone().unwrap_or_default();
    let ready = sts_status.ready_replicas.unwrap_or(0);
    let updated = sts_status.updated_replicas.unwrap_or(0);
    let want = ns.spec.replicas;
    let addresses = names.addresses(want, cluster_domain);
    let all_ready = ready >= want && updated >= want;
    let desired = [
        if all_ready {
            Desired::new(
                conditions::READY,
                true,
                "Ready",
                format!("{ready}/{want} replicas ready"),
            )
        } else {
            Desired::new(
                conditions::READY,
                false,
                "ReplicasNotReady",
                format!("{ready}/{want} replicas ready, {updated} up to date"),
            )
        },
        Desired::new(
            conditions::PROGRESSING,
            !all_ready,
            if all_ready { "Stable" } else { "Rolling" },
            if all_ready {
                "no change in progress".to_owned()
            } else {
                format!("waiting for {} replica(s)", want - ready.min(want))
            },
        ),
        Desired::new(
            conditions::RECONCILIATION_PAUSED,
            false,
            "Reconciling",
            "the operator manages this object",
        ),
    ];
    NameServerStatus {
        observed_generation: ns.metadata.generation,
        conditions: conditions::merge(&previous.conditions, &desired, ns.metadata.generation, now),
        replicas: want,
        ready_replicas: ready,
        namesrv_addr: Some(addresses.join(";")),
        addresses,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::StatefulSetStatus;

    use super::*;
    use crate::crd::NameServerSpec;

    fn nameserver(replicas: i32) -> NameServer {
        let mut ns = NameServer::new(
            "ns",
            NameServerSpec {
                replicas,
                ..NameServerSpec::default()
            },
        );
        ns.metadata.namespace = Some("team-a".to_owned());
        ns.metadata.generation = Some(2);
        ns
    }

    fn applied(ready: i32, updated: i32) -> StatefulSet {
        StatefulSet {
            status: Some(StatefulSetStatus {
                ready_replicas: Some(ready),
                updated_replicas: Some(updated),
                ..StatefulSetStatus::default()
            }),
            ..StatefulSet::default()
        }
    }

    fn condition<'a>(status: &'a NameServerStatus, type_: &str) -> (&'a str, &'a str) {
        let c = conditions::find(&status.conditions, type_).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn ready_once_every_replica_is_ready_and_up_to_date() {
        let previous = NameServerStatus::default();
        let now = Timestamp::UNIX_EPOCH;
        let status = desired_status(
            &nameserver(3),
            &applied(3, 3),
            &previous,
            "cluster.local",
            now,
        );
        assert_eq!(condition(&status, conditions::READY), ("True", "Ready"));
        assert_eq!(
            condition(&status, conditions::PROGRESSING),
            ("False", "Stable")
        );
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(status.addresses.len(), 3);
        assert_eq!(status.namesrv_addr, Some(status.addresses.join(";")));

        // Ready but not yet rolled: still progressing.
        let rolling = desired_status(
            &nameserver(3),
            &applied(3, 1),
            &previous,
            "cluster.local",
            now,
        );
        assert_eq!(
            condition(&rolling, conditions::READY),
            ("False", "ReplicasNotReady")
        );
        let starting = desired_status(
            &nameserver(3),
            &applied(1, 3),
            &previous,
            "cluster.local",
            now,
        );
        let progressing = conditions::find(&starting.conditions, conditions::PROGRESSING).unwrap();
        assert_eq!(progressing.reason, "Rolling");
        assert_eq!(progressing.message, "waiting for 2 replica(s)");
    }
}
