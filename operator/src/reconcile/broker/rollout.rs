//! Rolling restart phase: at most one pod of the whole Broker per reconcile, never in a
//! group whose failover is running, and a master hands over to an in-sync slave first.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::{Resource, ResourceExt};

use super::KIND;
use super::driver::{GroupRun, drive_group};
use super::status::{ObservedPod, Rollout, pod_ordinal};
use crate::admin::Admin;
use crate::crd::{Broker, FailoverTrigger, GroupStatus};
use crate::failover::Request;
use crate::metrics::MemberLabels;
use crate::names::BrokerNames;
use crate::reconcile::{Context, Error};
use crate::restart_plan::{PodView, RestartStep, next_step};

/// Takes the next restart step of the cluster, after the failover pass (`runs`, which a
/// master's hand-over updates) and with the StatefulSets as just applied.
#[allow(clippy::too_many_arguments)]
pub async fn roll(
    ctx: &Context,
    admin: &dyn Admin,
    broker: &Broker,
    names: &BrokerNames,
    namesrv_addr: &str,
    pod_api: &Api<Pod>,
    statefulsets: &[StatefulSet],
    observed: &[ObservedPod],
    runs: &mut [GroupRun],
    previous: &[GroupStatus],
) -> Result<Rollout, Error> {
    // Rolling restart: at most one pod of the whole cluster per reconcile; never in a
    // group whose failover is running; a master hands over to a slave first.
    let mut rollout = Rollout::default();
    for (g, sts) in statefulsets.iter().enumerate() {
        let in_sync = group_in_sync(g as i32, observed, &runs[g], previous.get(g));
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
                restart_pod(ctx, broker, pod_api, &pod, &reason).await?;
                rollout.restarted = Some(pod);
            }
            RestartStep::Switchover { master: pod } => {
                let prev = previous.get(g);
                let request = Some(Request {
                    trigger: FailoverTrigger::RollingRestart,
                    target: None,
                });
                let state = runs[g].state.clone();
                let run = drive_group(
                    ctx,
                    admin,
                    broker,
                    names,
                    namesrv_addr,
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
                        ctx,
                        broker,
                        pod_api,
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
    Ok(rollout)
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
