//! Broker reconciler: owned objects per group, role labels on pods, one-pod-at-a-time
//! rolling restarts, live nameserver-list updates, and status from pods and the brokers'
//! runtime info.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Action;
use serde_json::json;

use super::admin_credentials::{self, admin_for};
use super::apply::{apply, delete_if_exists, patch_status};
use super::broker_drain::draining;
use super::broker_failover::{
    GroupRun, clear_switchover_annotation, drive_group, switchover_target,
};
use super::broker_listener::{awaiting_addresses, reconcile_listener};
use super::broker_live::write_due;
use super::broker_monitoring::{apply_monitoring, record_member_metrics};
use super::broker_pods::{label_roles, list_pods};
use super::broker_recovery::{
    Recovery, recover_group, shrink_guard, single_member_ha, waiting_for_epochs,
};
use super::broker_rollout::roll;
use super::broker_runtime::{collect_runtime_info, push_namesrv_addr};
use super::broker_secret::ensure_ha_secret;
use super::broker_status::{
    GroupObservation, ObservedPod, broker_conditions, group_status, master_fenced, master_ordinal,
    pod_ordinal,
};
use super::broker_storage::{self, StorageStep};
use super::{Context, Error, FAILOVER_POLL, PROGRESS_POLL, RESYNC};
use crate::builders::broker::{BrokerInputs, build};
use crate::conditions::{self, Desired};
use crate::crd::GroupStatus;
use crate::crd::{Broker, BrokerStatus, FailoverTrigger, NameServer};
use crate::failover::{Phase, Request, State, status};
use crate::names::{ANNOTATION_PAUSE, BrokerNames, NameServerNames, annotation_is};

pub const KIND: &str = "Broker";

pub async fn reconcile(broker: Arc<Broker>, ctx: Arc<Context>) -> Result<Action, Error> {
    let names = BrokerNames::of(&broker);
    let name = broker
        .metadata
        .name
        .clone()
        .ok_or(Error::MissingField("metadata.name"))?;
    let namespace = broker
        .metadata
        .namespace
        .clone()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let (name, namespace) = (name.as_str(), namespace.as_str());
    let stored = broker.status.clone().unwrap_or_default();
    let generation = broker.metadata.generation;
    let now = Timestamp::now();
    let oref = broker.object_ref(&());
    let key = format!("{namespace}/{name}");
    // Live figures are written to status at a bounded rate; the freshest ones this
    // process saw stand in for them (the failover's "last known master offset").
    let previous = ctx.live.overlay(&key, stored.clone());

    if annotation_is(
        broker.metadata.annotations.as_ref(),
        ANNOTATION_PAUSE,
        "true",
    ) {
        let previous = stored.clone();
        let mut status = previous.clone();
        status.conditions = conditions::paused(&previous.conditions, generation, now);
        if status != previous {
            patch_status::<Broker, _>(&ctx.client, namespace, name, &status).await?;
        }
        return Ok(Action::requeue(RESYNC));
    }

    // Every admin call to this Broker's pods below goes through this client: signed with
    // spec.security.adminCredentials when set, and none at all when they cannot be read.
    let admin = match admin_for(&ctx, &broker).await {
        Ok(admin) => admin,
        Err(Error::Credentials(problem)) => {
            return Err(admin_credentials::report(&ctx, &broker, &stored, problem).await);
        }
        Err(e) => return Err(e),
    };
    let admin = admin.as_ref();

    // The nameserver list comes from the referenced NameServer's stable DNS names.
    let ns_api: Api<NameServer> = Api::namespaced(ctx.client.clone(), namespace);
    let ns_name = &broker.spec.name_server_ref.name;
    let Some(nameserver) = ns_api.get_opt(ns_name).await? else {
        let previous = stored.clone();
        let mut status = previous.clone();
        status.observed_generation = generation;
        status.conditions = conditions::merge(
            &previous.conditions,
            &[Desired::new(
                conditions::READY,
                false,
                "NameServerNotFound",
                format!("NameServer {ns_name} does not exist in {namespace}"),
            )],
            generation,
            now,
        );
        if status != previous {
            patch_status::<Broker, _>(&ctx.client, namespace, name, &status).await?;
            ctx.events
                .publish(
                    KIND,
                    &oref,
                    true,
                    "NameServerNotFound",
                    "Reconcile",
                    format!("waiting for NameServer {ns_name}"),
                )
                .await;
        }
        return Ok(Action::requeue(PROGRESS_POLL));
    };
    let namesrv_addr = NameServerNames::of(&nameserver)
        .addresses(nameserver.spec.replicas, &ctx.settings.cluster_domain)
        .join(";");

    let groups = broker.spec.groups.max(0);
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);

    // Scale-down never removes a master: while a group's master sits at an ordinal the
    // new replicasPerGroup would remove, the group keeps its members (and says why).
    let (broker, shrink_blocked) = match shrink_guard(&broker, &previous, &names) {
        Some((effective, reason)) => (Arc::new(effective), Some(reason)),
        None => (broker, None),
    };
    if let Some(reason) = &shrink_blocked
        && !conditions::has_reason(
            &stored.conditions,
            conditions::PROGRESSING,
            "ScaleDownBlocked",
        )
    {
        ctx.events
            .publish(
                KIND,
                &oref,
                true,
                "ScaleDownBlocked",
                "Scale",
                reason.clone(),
            )
            .await;
    }

    // Failover first: the objects below are rendered from where it leaves each group.
    let annotated = switchover_target(&broker, &names);
    if let Some(Err(pod)) = &annotated {
        clear_switchover_annotation(&ctx, &broker).await?;
        ctx.events
            .publish(
                KIND,
                &oref,
                true,
                "SwitchoverRejected",
                "Failover",
                format!("{pod} is not a pod of this Broker"),
            )
            .await;
    }
    if broker.spec.replicas_per_group < 2
        && let Some(Ok((_, pod))) = &annotated
    {
        clear_switchover_annotation(&ctx, &broker).await?;
        ctx.events
            .publish(
                KIND,
                &oref,
                true,
                "SwitchoverRejected",
                "Failover",
                format!(
                    "{pod}: replicasPerGroup is 1, so there is no replica to switch over to; raise replicasPerGroup first"
                ),
            )
            .await;
    }
    // Where each group starts: its record, or the brokers' word when there is none.
    let mut starts = Vec::with_capacity(groups as usize);
    let mut recovering = Vec::new();
    for g in 0..groups {
        let prev = previous.groups.get(g as usize);
        let state = status::from_status(prev, &names.pod(g, master_ordinal(prev)));
        let start = if prev.is_none() || waiting_for_epochs(&state) {
            match recover_group(&ctx, admin, &broker, &names, g).await? {
                Recovery::Fresh => state,
                Recovery::Adopted(s) => {
                    ctx.events
                        .publish(
                            KIND,
                            &oref,
                            s.phase != Phase::Idle,
                            "MasterFromBrokers",
                            "Failover",
                            format!(
                                "{}: no status record; {}",
                                names.broker_name(g),
                                s.message.clone().unwrap_or_else(|| format!(
                                    "{} reports itself master at epoch {}",
                                    s.master, s.epoch
                                ))
                            ),
                        )
                        .await;
                    s
                }
                Recovery::Waiting(s, reason) => {
                    recovering.push(reason);
                    s
                }
            }
        } else {
            state
        };
        starts.push(start);
    }
    // Groups with no record get one before any failover step, so every checkpoint below
    // is a patch of its own element.
    if stored.groups.len() < groups as usize {
        write_skeleton(&ctx, &names, &stored, &starts).await?;
    }

    let before = list_pods(&pod_api, &names).await?;
    let mut runs = Vec::with_capacity(groups as usize);
    for (g, mut state) in (0..groups).zip(starts) {
        let prev = previous.groups.get(g as usize);
        let mut request = match &annotated {
            Some(Ok((group, pod))) if *group == g => Some(Request {
                trigger: FailoverTrigger::Switchover,
                target: Some(pod.clone()),
            }),
            _ => None,
        };
        // A master about to be drained hands over first (its PDB holds the eviction).
        if request.is_none()
            && state.phase.at_rest()
            && broker.spec.replicas_per_group > 1
            && let Some(master) = before.iter().find(|p| p.name == state.master)
            && draining(&ctx, master).await
        {
            request = Some(Request {
                trigger: FailoverTrigger::Drain,
                target: None,
            });
        }
        if waiting_for_epochs(&state) {
            runs.push(GroupRun {
                state,
                ha: BTreeMap::new(),
                error: None,
            });
            continue;
        }
        if broker.spec.replicas_per_group < 2 && state.phase.at_rest() {
            // Nothing to fail over to; the single member's own epoch is still recorded.
            let ha = single_member_ha(&ctx, admin, &names, g).await;
            if let Some(h) = ha.get(&state.master) {
                state.epoch = state.epoch.max(h.epoch);
            }
            runs.push(GroupRun {
                state,
                ha,
                error: None,
            });
            continue;
        }
        runs.push(
            drive_group(
                &ctx,
                admin,
                &broker,
                &names,
                &namesrv_addr,
                g,
                prev,
                state,
                request,
            )
            .await,
        );
    }

    // Listed after the failover pass, which may have deleted pods.
    let observed = list_pods(&pod_api, &names).await?;

    // Before any pod exists: replicating brokers refuse to start without the HA secret.
    if ensure_ha_secret(&ctx, &broker, &names).await? {
        ctx.events
            .publish(
                KIND,
                &oref,
                false,
                "HaSecretGenerated",
                "Reconcile",
                format!(
                    "generated the HA handshake secret into Secret {}",
                    names.ha_secret()
                ),
            )
            .await;
    }
    // External Services first: their addresses go into the members' broker.conf.
    let listener = reconcile_listener(&ctx, &broker, &names).await?;
    let mut inputs = inputs_for(&namesrv_addr, &runs);
    inputs.external = listener.hosts.clone();
    inputs.running = observed.iter().map(|p| p.name.clone()).collect();
    let mut objects = build(&broker, &inputs, &ctx.settings);
    apply(&ctx.client, &objects.headless_service).await?;
    let mut statefulsets = Vec::with_capacity(objects.groups.len());
    let mut storage_refused = Vec::new();
    for (g, group) in objects.groups.iter_mut().enumerate() {
        apply(&ctx.client, &group.config_map).await?;
        match broker_storage::prepare(&ctx, &names, g as i32, &mut group.statefulset).await? {
            StorageStep::UpToDate => {}
            StorageStep::Expanded { from, to } => {
                ctx.events
                    .publish(
                        KIND,
                        &oref,
                        false,
                        "VolumesExpanded",
                        "ResizeVolumes",
                        format!(
                            "{}: store volumes {from} -> {to}; StatefulSet re-created (pods kept)",
                            names.broker_name(g as i32)
                        ),
                    )
                    .await;
            }
            StorageStep::Refused { reason, .. } => {
                if !conditions::has_reason(
                    &stored.conditions,
                    conditions::STORAGE_RESIZED,
                    "ResizeRefused",
                ) {
                    ctx.events
                        .publish(
                            KIND,
                            &oref,
                            true,
                            "ResizeRefused",
                            "ResizeVolumes",
                            reason.clone(),
                        )
                        .await;
                }
                storage_refused.push(reason);
            }
        }
        statefulsets.push(apply(&ctx.client, &group.statefulset).await?);
        apply(&ctx.client, &group.master_service).await?;
        for (pdb, pdb_name) in [
            (&group.pdb, names.pdb(g as i32)),
            (&group.master_pdb, names.master_pdb(g as i32)),
        ] {
            match pdb {
                Some(pdb) => {
                    apply(&ctx.client, pdb).await?;
                }
                None => {
                    delete_if_exists::<PodDisruptionBudget>(&ctx.client, namespace, &pdb_name)
                        .await?
                }
            }
        }
        match &group.network_policy {
            Some(np) => {
                apply(&ctx.client, np).await?;
            }
            None => {
                delete_if_exists::<NetworkPolicy>(
                    &ctx.client,
                    namespace,
                    &names.broker_name(g as i32),
                )
                .await?
            }
        }
    }
    apply_monitoring(&broker, &names, &ctx).await?;
    label_roles(&ctx, namespace, &observed, &runs).await?;
    ctx.metrics.retain_members(
        namespace,
        name,
        &observed.iter().map(|p| p.name.clone()).collect(),
    );

    let mut rollout = roll(
        &ctx,
        admin,
        &broker,
        &names,
        &namesrv_addr,
        &pod_api,
        &statefulsets,
        &observed,
        &mut runs,
        &previous.groups,
    )
    .await?;

    // A changed nameserver list is pushed to running brokers instead of restarting them.
    let mut recorded_namesrv_addr = previous.namesrv_addr.clone();
    if previous.namesrv_addr.as_deref() != Some(namesrv_addr.as_str()) {
        if previous.namesrv_addr.is_some() {
            push_namesrv_addr(&ctx, admin, &broker, &names, &observed, &namesrv_addr).await?;
        }
        recorded_namesrv_addr = Some(namesrv_addr.clone());
    }

    let runtime = collect_runtime_info(&ctx, admin, &names, &observed).await;
    let group_statuses: Vec<_> = (0..groups)
        .map(|g| {
            let pods: Vec<ObservedPod> =
                observed.iter().filter(|p| p.group == g).cloned().collect();
            let run = &runs[g as usize];
            group_status(
                &names,
                g,
                broker.spec.replicas_per_group,
                GroupObservation {
                    pods: &pods,
                    runtime: &runtime,
                    ha: &run.ha,
                },
                &run.state,
                previous.groups.get(g as usize),
            )
        })
        .collect();
    record_member_metrics(&ctx, &names, &group_statuses, &runs, &runtime);

    if let Some(reason) = shrink_blocked {
        rollout.waiting = Some(reason);
        rollout.blocked_reason = Some("ScaleDownBlocked");
    } else if let Some(reason) = recovering.first() {
        rollout.waiting = Some(reason.clone());
        rollout.blocked_reason = Some("StatusLost");
    }
    let mut desired = broker_conditions(&group_statuses, &rollout);
    if !listener.waiting.is_empty() {
        awaiting_addresses(&mut desired, &listener.waiting);
    }
    desired.push(if storage_refused.is_empty() {
        Desired::new(
            conditions::STORAGE_RESIZED,
            true,
            "Resized",
            format!("store volumes have {}", broker.spec.storage.size),
        )
    } else {
        Desired::new(
            conditions::STORAGE_RESIZED,
            false,
            "ResizeRefused",
            storage_refused.join("; "),
        )
    });
    let status = BrokerStatus {
        observed_generation: generation,
        conditions: conditions::merge(&previous.conditions, &desired, generation, now),
        namesrv_addr: recorded_namesrv_addr,
        groups: group_statuses,
        external_addresses: listener.addresses(),
    };
    let became_ready = conditions::is_true(&status.conditions, conditions::READY)
        && !conditions::is_true(&previous.conditions, conditions::READY);
    // Status changes that matter are written at once; live figures (offsets, lag) only
    // when they cross a threshold, and then at most every LIVE_STATUS_INTERVAL, so write
    // traffic on the brokers never turns into a stream of status writes.
    ctx.live.remember(&key, &status);
    if write_due(
        &ctx.live,
        &key,
        &stored,
        &status,
        broker.spec.failover.max_lag_bytes,
    ) {
        patch_status::<Broker, _>(&ctx.client, namespace, name, &status).await?;
        ctx.metrics.status_writes.inc();
        ctx.live.written(&key);
    }
    // The status above records how far each failover got; its error now fails the
    // reconcile (and retries with backoff).
    let failing_over = runs
        .iter()
        .any(|r| !r.state.phase.at_rest() || master_unready(&r.state, &observed));
    if let Some(e) = runs.into_iter().find_map(|r| r.error) {
        return Err(e);
    }
    if became_ready {
        ctx.events
            .publish(
                KIND,
                &oref,
                false,
                "Ready",
                "Reconcile",
                "all brokers ready and up to date".to_owned(),
            )
            .await;
    }
    Ok(if failing_over && broker.spec.replicas_per_group > 1 {
        Action::requeue(FAILOVER_POLL)
    } else if conditions::is_true(&status.conditions, conditions::READY) {
        Action::requeue(RESYNC)
    } else {
        Action::requeue(PROGRESS_POLL)
    })
}

/// Appends a record for every group status lacks (its name, master, epoch and failover
/// state), leaving the existing elements alone.
async fn write_skeleton(
    ctx: &Context,
    names: &BrokerNames,
    stored: &BrokerStatus,
    starts: &[State],
) -> Result<(), Error> {
    let mut groups = stored.groups.clone();
    for (g, state) in starts.iter().enumerate().skip(groups.len()) {
        groups.push(GroupStatus {
            broker_name: names.broker_name(g as i32),
            master_pod: Some(state.master.clone()),
            epoch: state.epoch,
            failover: status::to_status(state),
            ..GroupStatus::default()
        });
    }
    patch_status::<Broker, _>(
        &ctx.client,
        &names.namespace,
        &names.cluster,
        &json!({ "groups": groups }),
    )
    .await?;
    ctx.metrics.status_writes.inc();
    Ok(())
}

fn master_unready(state: &State, pods: &[ObservedPod]) -> bool {
    !pods.iter().any(|p| p.name == state.master && p.ready)
}

/// Builder inputs from where each group's failover stands.
fn inputs_for(namesrv_addr: &str, runs: &[GroupRun]) -> BrokerInputs {
    BrokerInputs {
        namesrv_addr: namesrv_addr.to_owned(),
        master_ordinals: runs.iter().map(|r| pod_ordinal(&r.state.master)).collect(),
        fenced: runs.iter().map(|r| master_fenced(&r.state)).collect(),
        ..BrokerInputs::default()
    }
}
