//! Owned objects phase: the desired objects rendered by the pure builders from where
//! the failover left each group, the listener's addresses and the running pods, then
//! server-side applied group by group. Store volumes that cannot grow keep their size
//! and set `StorageResized=False` `ResizeRefused`.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::Reconciliation;
use super::driver::GroupRun;
use super::listener::Listener;
use super::status::{ObservedPod, master_fenced, pod_ordinal};
use crate::builders::broker::{BrokerInputs, build};
use crate::conditions::{self, Desired};
use crate::crd::Broker;
use crate::names::BrokerNames;
use crate::reconcile::apply::{apply as apply_object, delete_if_exists};
use crate::reconcile::storage::{StorageStep, prepare_claims};
use crate::reconcile::{Context, Error};

/// What the apply left for the phases after it.
pub struct Applied {
    /// Each group's StatefulSet as stored (its `updateRevision` drives the rollout).
    pub statefulsets: Vec<StatefulSet>,
    /// Why store volumes could not grow, one entry per refusing group.
    pub storage_refused: Vec<String>,
}

/// Renders and applies the Broker's objects: the headless Service, then per group its
/// ConfigMap, StatefulSet (after its volumes are prepared), master Service,
/// PodDisruptionBudgets and NetworkPolicy; objects the spec no longer wants are deleted.
pub async fn apply(
    ctx: &Context,
    broker: &Broker,
    rec: &Reconciliation,
    namesrv_addr: &str,
    runs: &[GroupRun],
    listener: &Listener,
    observed: &[ObservedPod],
) -> Result<Applied, Error> {
    let names = &rec.names;
    let namespace = rec.namespace.as_str();
    let inputs = builder_inputs(namesrv_addr, runs, listener, observed);
    let mut objects = build(broker, &inputs, &ctx.settings);
    apply_object(&ctx.client, &objects.headless_service).await?;
    let mut statefulsets = Vec::with_capacity(objects.groups.len());
    let mut storage_refused = Vec::new();
    for (g, group) in objects.groups.iter_mut().enumerate() {
        let g = g as i32;
        apply_object(&ctx.client, &group.config_map).await?;
        match prepare_store(ctx, names, g, &mut group.statefulset).await? {
            StorageStep::UpToDate => {}
            StorageStep::Expanded { from, to } => {
                rec.event(
                    ctx,
                    false,
                    "VolumesExpanded",
                    "ResizeVolumes",
                    format!(
                        "{}: store volumes {from} -> {to}; StatefulSet re-created (pods kept)",
                        names.broker_name(g)
                    ),
                )
                .await;
            }
            StorageStep::Refused { reason, .. } => {
                if !conditions::has_reason(
                    &rec.stored.conditions,
                    conditions::STORAGE_RESIZED,
                    "ResizeRefused",
                ) {
                    rec.event(ctx, true, "ResizeRefused", "ResizeVolumes", reason.clone())
                        .await;
                }
                storage_refused.push(reason);
            }
        }
        statefulsets.push(apply_object(&ctx.client, &group.statefulset).await?);
        apply_object(&ctx.client, &group.master_service).await?;
        for (pdb, pdb_name) in [
            (&group.pdb, names.pdb(g)),
            (&group.master_pdb, names.master_pdb(g)),
        ] {
            match pdb {
                Some(pdb) => {
                    apply_object(&ctx.client, pdb).await?;
                }
                None => {
                    delete_if_exists::<PodDisruptionBudget>(&ctx.client, namespace, &pdb_name)
                        .await?
                }
            }
        }
        match &group.network_policy {
            Some(np) => {
                apply_object(&ctx.client, np).await?;
            }
            None => {
                delete_if_exists::<NetworkPolicy>(&ctx.client, namespace, &names.broker_name(g))
                    .await?
            }
        }
    }
    Ok(Applied {
        statefulsets,
        storage_refused,
    })
}

/// Builder inputs from where each group's failover stands, the addresses the external
/// listener advertises, and the pods that run (a pod not yet started waits for its
/// address; one already running keeps its configuration).
fn builder_inputs(
    namesrv_addr: &str,
    runs: &[GroupRun],
    listener: &Listener,
    observed: &[ObservedPod],
) -> BrokerInputs {
    BrokerInputs {
        namesrv_addr: namesrv_addr.to_owned(),
        master_ordinals: runs.iter().map(|r| pod_ordinal(&r.state.master)).collect(),
        fenced: runs.iter().map(|r| master_fenced(&r.state)).collect(),
        external: listener.hosts.clone(),
        running: observed
            .iter()
            .map(|p| p.name.clone())
            .collect::<BTreeSet<_>>(),
    }
}

/// Brings group `group`'s store volumes to the size in `desired` (the StatefulSet about
/// to be applied), or rewrites `desired` to the current size when they cannot grow.
async fn prepare_store(
    ctx: &Context,
    names: &BrokerNames,
    group: i32,
    desired: &mut StatefulSet,
) -> Result<StorageStep, Error> {
    prepare_claims(
        ctx,
        &names.namespace,
        &names.broker_name(group),
        "store",
        &|o| names.store_claim(group, o),
        desired,
    )
    .await
}

/// `StorageResized`: whether every store volume has the size `spec.storage.size` asks
/// for, and why not when some could not grow.
pub fn storage_condition(size: &str, refused: &[String]) -> Desired {
    if refused.is_empty() {
        Desired::new(
            conditions::STORAGE_RESIZED,
            true,
            "Resized",
            format!("store volumes have {size}"),
        )
    } else {
        Desired::new(
            conditions::STORAGE_RESIZED,
            false,
            "ResizeRefused",
            refused.join("; "),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::builders::listener::Advertised;
    use crate::failover::{Phase, State};

    fn run(state: State) -> GroupRun {
        GroupRun {
            state,
            ha: BTreeMap::new(),
            error: None,
        }
    }

    fn pod(name: &str) -> ObservedPod {
        ObservedPod {
            name: name.to_owned(),
            group: 0,
            ordinal: 0,
            ready: true,
            revision: None,
            config_hash: None,
            terminating: false,
            labels: BTreeMap::new(),
            unready_since_ms: None,
            ip: None,
            node: None,
            drain_requested: false,
        }
    }

    #[test]
    fn objects_follow_where_each_group_failover_stands() {
        let fencing = State {
            phase: Phase::Fencing,
            fenced: vec!["c-1-0".to_owned()],
            ..State::idle("c-1-0", 2)
        };
        let runs = [run(State::idle("c-0-2", 1)), run(fencing)];
        let listener = Listener {
            hosts: BTreeMap::from([(
                "c-0-0".to_owned(),
                Advertised {
                    host: "203.0.113.7".to_owned(),
                    port: 10911,
                    grpc_port: Some(8081),
                },
            )]),
            waiting: vec!["c-0-1".to_owned()],
        };
        let inputs = builder_inputs("ns-0:9876", &runs, &listener, &[pod("c-0-0")]);
        assert_eq!(inputs.namesrv_addr, "ns-0:9876");
        assert_eq!(inputs.master_ordinals, [2, 0]);
        // The fenced master of group 1 is rendered without a master.
        assert_eq!(inputs.fenced, [false, true]);
        assert_eq!(inputs.external, listener.hosts);
        assert_eq!(inputs.running, BTreeSet::from(["c-0-0".to_owned()]));
    }

    #[test]
    fn refused_growth_is_reported_per_group() {
        let ok = storage_condition("20Gi", &[]);
        assert!(ok.status);
        assert_eq!(ok.reason, "Resized");
        assert!(ok.message.contains("20Gi"));
        let refused = storage_condition("20Gi", &["c-0: a".to_owned(), "c-1: b".to_owned()]);
        assert!(!refused.status);
        assert_eq!(refused.reason, "ResizeRefused");
        assert_eq!(refused.message, "c-0: a; c-1: b");
    }
}
