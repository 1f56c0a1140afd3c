//! Drives one group's failover machine within a reconcile: observations from the API
//! server and GET_BROKER_HA_STATUS, the pure `failover::step`, its actions executed
//! through [`KubeGroup`], and each transition checkpointed into status.

use std::collections::BTreeMap;

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::KIND;
use super::kube_group::KubeGroup;
use super::recovery::reconcile_with_brokers;
use super::status::{ObservedPod, identities};
use crate::admin::{Admin, HaStatus};
use crate::crd::{Broker, FailoverTrigger, GroupStatus};
use crate::failover::executor::{Recorder, execute};
use crate::failover::observe::{PodFacts, observations};
use crate::failover::{Request, State, step};
use crate::metrics::GroupLabels;
use crate::names::{BROKER_PORT, BrokerNames, selector_string};
use crate::reconcile::{Context, Error};

/// Steps taken in one reconcile at most; a failover needs six from Idle to Completed.
const MAX_STEPS: usize = 8;

/// The failover state of one group after a reconcile's steps, with what was observed.
pub struct GroupRun {
    pub state: State,
    pub ha: BTreeMap<String, HaStatus>,
    pub error: Option<Error>,
}

/// GET_BROKER_HA_STATUS of every running member, concurrently (one admin timeout at most).
pub async fn collect_ha(
    ctx: &Context,
    admin: &dyn Admin,
    names: &BrokerNames,
    pods: &[ObservedPod],
) -> BTreeMap<String, HaStatus> {
    let calls = pods.iter().filter(|p| !p.terminating).map(|p| async move {
        let addr = format!(
            "{}:{BROKER_PORT}",
            names.pod_host(p.group, p.ordinal, &ctx.settings.cluster_domain)
        );
        let answer = admin.ha_status(&addr).await;
        if let Err(e) = &answer {
            tracing::debug!(pod = %p.name, error = %e, "no HA status");
        }
        (p.name.clone(), answer.ok())
    });
    join_all(calls)
        .await
        .into_iter()
        .filter_map(|(pod, ha)| Some((pod, ha?)))
        .collect()
}

pub async fn list_group_pods(
    ctx: &Context,
    names: &BrokerNames,
    group: i32,
) -> Result<Vec<ObservedPod>, Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &names.namespace);
    let pods = api
        .list(&ListParams::default().labels(&selector_string(&names.group_selector(group))))
        .await?;
    Ok(pods
        .items
        .iter()
        .filter_map(|p| ObservedPod::from_pod(p, names))
        .filter(|p| p.group == group)
        .collect())
}

fn pod_facts(
    replicas: i32,
    state: &State,
    names: &BrokerNames,
    group: i32,
    pods: &[ObservedPod],
) -> Vec<PodFacts> {
    identities(replicas, state)
        .into_iter()
        .map(|m| {
            let pod = names.pod(group, m.ordinal);
            let seen = pods.iter().find(|p| p.name == pod);
            PodFacts {
                exists: seen.is_some_and(|p| !p.terminating),
                terminating: seen.is_some_and(|p| p.terminating),
                ready: seen.is_some_and(|p| p.ready && !p.terminating),
                unready_since_ms: seen.and_then(|p| p.unready_since_ms),
                ip: seen.and_then(|p| p.ip.clone()),
                broker_id: m.broker_id,
                pod,
            }
        })
        .collect()
}

/// Persists `state` as `status.groups[group]`'s master, epoch and failover: a JSON patch
/// of that one element (guarded by a `test` of its brokerName), so checkpoints of two
/// groups in one reconcile never overwrite each other.
pub async fn checkpoint(
    ctx: &Context,
    names: &BrokerNames,
    group: i32,
    state: &State,
) -> Result<(), Error> {
    let at = format!("/status/groups/{group}");
    let ops: json_patch::Patch = serde_json::from_value(json!([
        { "op": "test", "path": format!("{at}/brokerName"), "value": names.broker_name(group) },
        { "op": "add", "path": format!("{at}/masterPod"), "value": state.master },
        { "op": "add", "path": format!("{at}/epoch"), "value": state.epoch },
        { "op": "add", "path": format!("{at}/failover"),
          "value": crate::failover::status::to_status(state) },
    ]))?;
    let api: Api<Broker> = Api::namespaced(ctx.client.clone(), &names.namespace);
    api.patch_status(
        &names.cluster,
        &PatchParams::default(),
        &Patch::Json::<()>(ops),
    )
    .await?;
    ctx.metrics.status_writes.inc();
    Ok(())
}

/// Steps one group's failover machine until its phase settles (or [`MAX_STEPS`]),
/// executing each step's actions.
///
/// Replaying is safe: the state reached by each transition is checkpointed before its
/// Events and its outcome metric go out, and the actions that change the cluster are
/// idempotent (a role change at the same epoch, a delete, a label). A crash or a lost
/// lease at any point resumes from the last checkpoint and counts each failover once.
#[allow(clippy::too_many_arguments)]
pub async fn drive_group(
    ctx: &Context,
    admin: &dyn Admin,
    broker: &Broker,
    names: &BrokerNames,
    namesrv_addr: &str,
    group: i32,
    previous: Option<&GroupStatus>,
    mut state: State,
    mut request: Option<Request>,
) -> GroupRun {
    let replicas = broker.spec.replicas_per_group;
    let mut ha = BTreeMap::new();
    let recorder = Recorder {
        metrics: &ctx.metrics,
        group: GroupLabels {
            resource_namespace: names.namespace.clone(),
            broker: names.cluster.clone(),
            broker_name: names.broker_name(group),
        },
    };
    let fail = |state, ha, e| GroupRun {
        state,
        ha,
        error: Some(e),
    };
    // Whether `state` is what status holds (a recovery start is not, until written).
    let mut persisted = state.trigger != Some(FailoverTrigger::StatusLost);
    for round in 0..MAX_STEPS {
        let pods = match list_group_pods(ctx, names, group).await {
            Ok(p) => p,
            Err(e) => return fail(state, ha, e),
        };
        ha = collect_ha(ctx, admin, names, &pods).await;
        if round == 0 {
            let members: Vec<String> = (0..replicas).map(|o| names.pod(group, o)).collect();
            if let Some(adopted) = reconcile_with_brokers(&state, &members, &ha) {
                let note = format!(
                    "{}: status recorded {} at epoch {}, but {} reports itself master at epoch {}; following the brokers",
                    names.broker_name(group),
                    state.master,
                    state.epoch,
                    adopted.master,
                    adopted.epoch
                );
                if let Err(e) = checkpoint(ctx, names, group, &adopted).await {
                    return fail(state, ha, e);
                }
                ctx.events
                    .publish(
                        KIND,
                        &broker.object_ref(&()),
                        true,
                        "MasterFromBrokers",
                        "Failover",
                        note,
                    )
                    .await;
                state = adopted;
            }
        }
        // Until a member has answered GET_BROKER_HA_STATUS nothing is known about the
        // group's replication: a group still starting (or brokers without HA support)
        // is never failed over.
        let armed = previous.is_some_and(|g| g.members.iter().any(|m| m.epoch.is_some()))
            || ha.get(&state.master).is_some_and(|h| h.master);
        if state.phase.at_rest() && request.is_none() && !armed {
            break;
        }
        let facts = pod_facts(replicas, &state, names, group, &pods);
        let obs = observations(
            crate::failover::observe::policy(
                &broker.spec.failover,
                broker.spec.replication.ack_mode,
            ),
            Timestamp::now().as_millisecond(),
            &state.master,
            &facts,
            &ha,
            previous,
            request.clone(),
        );
        let (next, actions) = step(&state, &obs);
        let api = KubeGroup {
            ctx,
            broker,
            names,
            group,
            namesrv_addr,
            master: state.master.clone(),
        };
        // A promotion goes out only once the choice of candidate is persisted (see
        // `machine::Transition::electing`).
        if !persisted
            && actions
                .iter()
                .any(|a| matches!(a, crate::failover::Action::Promote { .. }))
        {
            if let Err(e) = checkpoint(ctx, names, group, &state).await {
                return fail(state, ha, e);
            }
            persisted = true;
        }
        let (acting, telling): (Vec<_>, Vec<_>) = actions.iter().cloned().partition(|a| a.acts());
        if let Err(e) = execute(&acting, &api, admin, &recorder).await {
            return fail(state, ha, e.into());
        }
        let moved = next.phase != state.phase || !acting.is_empty();
        if next != state {
            if let Err(e) = checkpoint(ctx, names, group, &next).await {
                return fail(state, ha, e);
            }
            persisted = true;
        }
        // Events and the outcome metric only for a transition that is on record.
        if let Err(e) = execute(&telling, &api, admin, &recorder).await {
            return fail(next, ha, e.into());
        }
        // A removed annotation, or a rolling restart's request once taken up, is not
        // offered again in this reconcile.
        let taken = state.phase.at_rest() && !next.phase.at_rest();
        if actions.contains(&crate::failover::Action::ClearRequest)
            || (taken
                && request.as_ref().is_some_and(|r| {
                    matches!(
                        r.trigger,
                        FailoverTrigger::RollingRestart | FailoverTrigger::Drain
                    )
                }))
        {
            request = None;
        }
        state = next;
        if !moved {
            break;
        }
    }
    GroupRun {
        state,
        ha,
        error: None,
    }
}
