//! Broker reconciler: owned objects per group, role labels on pods, one-pod-at-a-time
//! rolling restarts, live nameserver-list updates, and status from pods and the brokers'
//! runtime info.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::apply::{
    apply, apply_dynamic, delete_dynamic_if_exists, delete_if_exists, patch_metadata, patch_status,
};
use super::broker_drain::draining;
use super::broker_failover::{
    GroupRun, clear_switchover_annotation, drive_group, switchover_target,
};
use super::broker_listener::{awaiting_addresses, reconcile_listener};
use super::broker_live::write_due;
use super::broker_recovery::{
    Recovery, recover_group, shrink_guard, single_member_ha, waiting_for_epochs,
};
use super::broker_secret::ensure_ha_secret;
use super::broker_status::{
    GroupObservation, ObservedPod, Rollout, broker_conditions, group_status, master_fenced,
    master_ordinal, pod_ordinal,
};
use super::broker_storage::{self, StorageStep};
use super::{Context, Error, FAILOVER_POLL, PROGRESS_POLL, RESYNC};
use crate::admin::RuntimeInfo;
use crate::builders::broker::{BrokerInputs, ROLE_MASTER, ROLE_SLAVE, build};
use crate::builders::monitoring::{
    broker_rules, monitoring_labels, prometheus_rule_resource, service_monitor,
    service_monitor_resource,
};
use crate::conditions::{self, Desired};
use crate::crd::GroupStatus;
use crate::crd::{Broker, BrokerStatus, FailoverTrigger, NameServer};
use crate::failover::{Phase, Request, State, status};
use crate::metrics::MemberLabels;
use crate::names::{
    ANNOTATION_PAUSE, BROKER_PORT, BrokerNames, LABEL_ROLE, NameServerNames, annotation_is,
    headless_selector, object_labels, selector_string,
};
use crate::restart_plan::{PodView, RestartStep, next_step};

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
            match recover_group(&ctx, &broker, &names, g).await? {
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
            let ha = single_member_ha(&ctx, &names, g).await;
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

    // Rolling restart: at most one pod of the whole cluster per reconcile; never in a
    // group whose failover is running; a master hands over to a slave first.
    let mut rollout = Rollout::default();
    for (g, sts) in statefulsets.iter().enumerate() {
        let in_sync = group_in_sync(g as i32, &observed, &runs[g], previous.groups.get(g));
        let group_pods: Vec<_> = observed
            .iter()
            .filter(|p| p.group == g as i32)
            .map(|p| PodView {
                in_sync: in_sync
                    .as_ref()
                    .map(|s| s.get(&p.name).copied().unwrap_or(false)),
                ..p.view()
            })
            .collect();
        let update_revision = sts
            .status
            .as_ref()
            .and_then(|s| s.update_revision.as_deref());
        if let Some(rev) = update_revision {
            rollout.outdated.extend(
                group_pods
                    .iter()
                    .filter(|p| p.revision.as_deref().is_some_and(|r| r != rev))
                    .map(|p| p.name.clone()),
            );
        }
        if rollout.restarted.is_some() {
            continue;
        }
        if !runs[g].state.phase.at_rest() {
            rollout.waiting.get_or_insert(format!(
                "failover of {} in progress",
                names.broker_name(g as i32)
            ));
            continue;
        }
        let master = pod_ordinal(&runs[g].state.master);
        match next_step(
            &group_pods,
            broker.spec.replicas_per_group,
            update_revision,
            master,
        ) {
            RestartStep::UpToDate => {}
            RestartStep::Wait { reason } => {
                rollout.waiting.get_or_insert(reason);
            }
            RestartStep::Restart { pod, reason } => {
                restart_pod(&ctx, &broker, &pod_api, &pod, &reason).await?;
                rollout.restarted = Some(pod);
            }
            RestartStep::Switchover { master: pod } => {
                let prev = previous.groups.get(g);
                let request = Some(Request {
                    trigger: FailoverTrigger::RollingRestart,
                    target: None,
                });
                let state = runs[g].state.clone();
                let run = drive_group(
                    &ctx,
                    &broker,
                    &names,
                    &namesrv_addr,
                    g as i32,
                    prev,
                    state,
                    request,
                )
                .await;
                let handed_over = run.state.master != pod;
                let settled = run.state.phase.at_rest();
                runs[g] = run;
                // A master that answers for its replication waits for a slave to catch
                // up; only brokers without HA status are restarted in place.
                let replicating = runs[g].ha.get(&pod).is_some_and(|h| h.master);
                if settled && !handed_over && runs[g].error.is_none() && !replicating {
                    restart_pod(
                        &ctx,
                        &broker,
                        &pod_api,
                        &pod,
                        "no in-sync slave to hand over to; master restarted in place",
                    )
                    .await?;
                    rollout.restarted = Some(pod);
                } else {
                    rollout
                        .waiting
                        .get_or_insert(format!("{pod} hands over to a slave before it restarts"));
                }
            }
        }
    }

    // A changed nameserver list is pushed to running brokers instead of restarting them.
    let mut recorded_namesrv_addr = previous.namesrv_addr.clone();
    if previous.namesrv_addr.as_deref() != Some(namesrv_addr.as_str()) {
        if previous.namesrv_addr.is_some() {
            push_namesrv_addr(&ctx, &broker, &names, &observed, &namesrv_addr).await?;
        }
        recorded_namesrv_addr = Some(namesrv_addr.clone());
    }

    let runtime = collect_runtime_info(&ctx, &names, &observed).await;
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

async fn list_pods(pod_api: &Api<Pod>, names: &BrokerNames) -> Result<Vec<ObservedPod>, Error> {
    let pods = pod_api
        .list(&ListParams::default().labels(&selector_string(&names.selector())))
        .await?;
    Ok(pods
        .items
        .iter()
        .filter_map(|p| ObservedPod::from_pod(p, names))
        .collect())
}

/// In-sync flag of each member, as the group's master reports it; `None` when the master
/// does not answer GET_BROKER_HA_STATUS (nothing known: readiness alone decides).
fn group_in_sync(
    group: i32,
    pods: &[ObservedPod],
    run: &GroupRun,
    previous: Option<&GroupStatus>,
) -> Option<BTreeMap<String, bool>> {
    run.ha.get(&run.state.master).filter(|h| h.master)?;
    let facts: Vec<crate::failover::observe::PodFacts> = pods
        .iter()
        .filter(|p| p.group == group)
        .map(|p| crate::failover::observe::PodFacts {
            pod: p.name.clone(),
            broker_id: 0,
            exists: true,
            terminating: false,
            ready: p.ready,
            unready_since_ms: None,
            ip: p.ip.clone(),
        })
        .collect();
    let mut set =
        crate::failover::observe::in_sync_set(&run.state.master, &facts, &run.ha, previous);
    set.insert(run.state.master.clone(), true);
    Some(set)
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

/// Keeps the role labels (which the group Services select) on the recorded masters. A
/// fenced master loses its label at once, so the Service stops sending it clients.
async fn label_roles(
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

async fn restart_pod(
    ctx: &Context,
    broker: &Broker,
    pod_api: &Api<Pod>,
    pod: &str,
    reason: &str,
) -> Result<(), Error> {
    match pod_api.delete(pod, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    ctx.metrics
        .restarts
        .get_or_create(&MemberLabels {
            resource_namespace: broker.namespace().unwrap_or_default(),
            broker: broker.name_any(),
            pod: pod.to_owned(),
        })
        .inc();
    ctx.events
        .publish(
            KIND,
            &broker.object_ref(&()),
            false,
            "RollingRestart",
            "RestartPod",
            format!("restarted {pod}: {reason}"),
        )
        .await;
    Ok(())
}

async fn push_namesrv_addr(
    ctx: &Context,
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
        ctx.admin.update_broker_config(&addr, &props).await?;
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
async fn collect_runtime_info(
    ctx: &Context,
    names: &BrokerNames,
    pods: &[ObservedPod],
) -> BTreeMap<String, RuntimeInfo> {
    let mut out = BTreeMap::new();
    for pod in pods.iter().filter(|p| p.ready && !p.terminating) {
        let addr = format!(
            "{}:{BROKER_PORT}",
            names.pod_host(pod.group, pod.ordinal, &ctx.settings.cluster_domain)
        );
        match ctx.admin.runtime_info(&addr).await {
            Ok(info) => {
                out.insert(pod.name.clone(), info);
            }
            Err(e) => tracing::debug!(pod = %pod.name, error = %e, "no runtime info"),
        }
    }
    out
}

fn record_member_metrics(
    ctx: &Context,
    names: &BrokerNames,
    groups: &[crate::crd::GroupStatus],
    runs: &[GroupRun],
    runtime: &BTreeMap<String, RuntimeInfo>,
) {
    for (g, run) in groups.iter().zip(runs) {
        let labels = crate::metrics::GroupLabels {
            resource_namespace: names.namespace.clone(),
            broker: names.cluster.clone(),
            broker_name: g.broker_name.clone(),
        };
        ctx.metrics.note_group(&labels);
        let master_ready = g
            .members
            .iter()
            .any(|m| m.role == crate::crd::MemberRole::Master && m.ready);
        ctx.metrics
            .master_ready
            .get_or_create(&labels)
            .set(i64::from(master_ready));
        ctx.metrics.epoch.get_or_create(&labels).set(g.epoch);
        match g.master_max_offset {
            Some(o) => {
                ctx.metrics.master_max_offset.get_or_create(&labels).set(o);
            }
            None => {
                ctx.metrics.master_max_offset.remove(&labels);
            }
        }
        ctx.metrics
            .set_failover_phase(&labels, run.state.phase.name());
        for m in &g.members {
            let labels = MemberLabels {
                resource_namespace: names.namespace.clone(),
                broker: names.cluster.clone(),
                pod: m.pod.clone(),
            };
            let flush_behind = runtime
                .get(&m.pod)
                .and_then(RuntimeInfo::flush_behind_bytes);
            ctx.metrics.set_member(
                &labels,
                m.replication_lag_bytes,
                m.dispatch_behind_bytes,
                flush_behind,
            );
        }
    }
}

async fn apply_monitoring(
    broker: &Broker,
    names: &BrokerNames,
    ctx: &Context,
) -> Result<(), Error> {
    if !ctx.monitoring_available {
        return Ok(());
    }
    let labels = monitoring_labels(
        &object_labels(&names.selector()),
        &ctx.settings.monitoring_labels,
    );
    let owner = broker.controller_owner_ref(&());
    let object_name = format!("{}-broker", names.cluster);
    if broker.spec.metrics.service_monitor {
        let sm = service_monitor(
            &object_name,
            &names.namespace,
            &labels,
            &headless_selector(names.selector()),
            &broker.spec.metrics.interval,
            owner.clone(),
        );
        apply_dynamic(&ctx.client, &service_monitor_resource(), &sm).await?;
    } else {
        delete_dynamic_if_exists(
            &ctx.client,
            &service_monitor_resource(),
            &names.namespace,
            &object_name,
        )
        .await?;
    }
    if !broker.spec.metrics.prometheus_rule {
        delete_dynamic_if_exists(
            &ctx.client,
            &prometheus_rule_resource(),
            &names.namespace,
            &object_name,
        )
        .await?;
    } else {
        let rules = broker_rules(
            &format!("{}-broker", names.cluster),
            &names.namespace,
            &names.headless_service,
            &labels,
            owner,
            &ctx.settings.runbook_base_url,
        );
        apply_dynamic(&ctx.client, &prometheus_rule_resource(), &rules).await?;
    }
    Ok(())
}
