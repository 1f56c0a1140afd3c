//! Broker reconciler: owned objects per group, role labels on pods, one-pod-at-a-time
//! rolling restarts, live nameserver-list updates, and status from pods and the brokers'
//! runtime info.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::apply::{apply, apply_dynamic, delete_if_exists, patch_metadata, patch_status};
use super::broker_failover::{
    GroupRun, clear_switchover_annotation, drive_group, switchover_target,
};
use super::broker_status::{
    GroupObservation, ObservedPod, Rollout, broker_conditions, group_status, master_fenced,
    master_ordinal, pod_ordinal,
};
use super::{Context, Error, FAILOVER_POLL, PROGRESS_POLL, RESYNC};
use crate::admin::RuntimeInfo;
use crate::builders::broker::{BrokerInputs, ROLE_MASTER, ROLE_SLAVE, build};
use crate::builders::monitoring::{
    broker_rules, prometheus_rule_resource, service_monitor, service_monitor_resource,
};
use crate::conditions::{self, Desired};
use crate::crd::{Broker, BrokerStatus, FailoverTrigger, NameServer};
use crate::failover::{Request, State, status};
use crate::metrics::MemberLabels;
use crate::names::{
    ANNOTATION_PAUSE, BROKER_PORT, BrokerNames, LABEL_ROLE, NameServerNames, annotation_is,
    headless_selector, object_labels, selector_string,
};
use crate::restart_plan::{RestartStep, next_step};

pub const KIND: &str = "Broker";

pub async fn reconcile(broker: Arc<Broker>, ctx: Arc<Context>) -> Result<Action, Error> {
    let names = BrokerNames::of(&broker);
    let name = broker
        .metadata
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let namespace = broker
        .metadata
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let previous = broker.status.clone().unwrap_or_default();
    let generation = broker.metadata.generation;
    let now = Timestamp::now();
    let oref = broker.object_ref(&());

    if annotation_is(
        broker.metadata.annotations.as_ref(),
        ANNOTATION_PAUSE,
        "true",
    ) {
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
    let mut runs = Vec::with_capacity(groups as usize);
    for g in 0..groups {
        let prev = previous.groups.get(g as usize);
        let state = status::from_status(prev, &names.pod(g, master_ordinal(prev)));
        let request = match &annotated {
            Some(Ok((group, pod))) if *group == g => Some(Request {
                trigger: FailoverTrigger::Switchover,
                target: Some(pod.clone()),
            }),
            _ => None,
        };
        if broker.spec.replicas_per_group < 2 {
            runs.push(GroupRun {
                state,
                ha: BTreeMap::new(),
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

    let objects = build(&broker, &inputs_for(&namesrv_addr, &runs), &ctx.settings);
    apply(&ctx.client, &objects.headless_service).await?;
    let mut statefulsets = Vec::with_capacity(objects.groups.len());
    for (g, group) in objects.groups.iter().enumerate() {
        apply(&ctx.client, &group.config_map).await?;
        statefulsets.push(apply(&ctx.client, &group.statefulset).await?);
        apply(&ctx.client, &group.master_service).await?;
        match &group.pdb {
            Some(pdb) => {
                apply(&ctx.client, pdb).await?;
            }
            None => {
                delete_if_exists::<PodDisruptionBudget>(
                    &ctx.client,
                    namespace,
                    &names.pdb(g as i32),
                )
                .await?
            }
        }
    }
    apply_monitoring(&broker, &names, &ctx).await?;
    label_roles(&ctx, namespace, &observed, &runs).await?;

    // Rolling restart: at most one pod of the whole cluster per reconcile; never in a
    // group whose failover is running; a master hands over to a slave first.
    let mut rollout = Rollout::default();
    for (g, sts) in statefulsets.iter().enumerate() {
        let group_pods: Vec<_> = observed
            .iter()
            .filter(|p| p.group == g as i32)
            .map(ObservedPod::view)
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
                if settled && !handed_over && runs[g].error.is_none() {
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
    record_member_metrics(&ctx, &names, &group_statuses, &runs);

    let desired = broker_conditions(&group_statuses, &rollout);
    let status = BrokerStatus {
        observed_generation: generation,
        conditions: conditions::merge(&previous.conditions, &desired, generation, now),
        namesrv_addr: recorded_namesrv_addr,
        groups: group_statuses,
    };
    let became_ready = conditions::is_true(&status.conditions, conditions::READY)
        && !conditions::is_true(&previous.conditions, conditions::READY);
    if status != previous {
        patch_status::<Broker, _>(&ctx.client, namespace, name, &status).await?;
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

fn master_unready(state: &State, pods: &[ObservedPod]) -> bool {
    !pods.iter().any(|p| p.name == state.master && p.ready)
}

/// Builder inputs from where each group's failover stands.
fn inputs_for(namesrv_addr: &str, runs: &[GroupRun]) -> BrokerInputs {
    BrokerInputs {
        namesrv_addr: namesrv_addr.to_owned(),
        master_ordinals: runs.iter().map(|r| pod_ordinal(&r.state.master)).collect(),
        fenced: runs.iter().map(|r| master_fenced(&r.state)).collect(),
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
) {
    for (g, run) in groups.iter().zip(runs) {
        let labels = crate::metrics::GroupLabels {
            resource_namespace: names.namespace.clone(),
            broker: names.cluster.clone(),
            broker_name: g.broker_name.clone(),
        };
        ctx.metrics.epoch.get_or_create(&labels).set(g.epoch);
        ctx.metrics
            .set_failover_phase(&labels, run.state.phase.name());
        for m in &g.members {
            let labels = MemberLabels {
                resource_namespace: names.namespace.clone(),
                broker: names.cluster.clone(),
                pod: m.pod.clone(),
            };
            if let Some(lag) = m.replication_lag_bytes {
                ctx.metrics
                    .replication_lag_bytes
                    .get_or_create(&labels)
                    .set(lag);
            }
            if let Some(behind) = m.dispatch_behind_bytes {
                ctx.metrics
                    .dispatch_behind_bytes
                    .get_or_create(&labels)
                    .set(behind);
            }
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
    let labels = object_labels(&names.selector());
    let owner = broker.controller_owner_ref(&());
    if broker.spec.metrics.service_monitor {
        let sm = service_monitor(
            &format!("{}-broker", names.cluster),
            &names.namespace,
            &labels,
            &headless_selector(names.selector()),
            &broker.spec.metrics.interval,
            owner.clone(),
        );
        apply_dynamic(&ctx.client, &service_monitor_resource(), &sm).await?;
    }
    if broker.spec.metrics.prometheus_rule {
        let rules = broker_rules(
            &format!("{}-broker", names.cluster),
            &names.namespace,
            &names.cluster,
            &names.headless_service,
            &labels,
            owner,
        );
        apply_dynamic(&ctx.client, &prometheus_rule_resource(), &rules).await?;
    }
    Ok(())
}
