//! Drains without losing the master: as Strimzi's Drain Cleaner does, mastership moves
//! off a pod before it is evicted. The master's PodDisruptionBudget allows no disruption,
//! so `kubectl drain` keeps retrying the eviction; meanwhile the operator sees the drain
//! (the node is cordoned, or the pod is annotated `rmq-rs.dev/drain: "true"`) and
//! switches over to an in-sync slave. The old master is then labelled `slave`, falls
//! under the slaves' budget, and the drain proceeds.

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use super::status::ObservedPod;
use crate::reconcile::Context;

/// Whether `pod` is about to be evicted by a drain.
pub async fn draining(ctx: &Context, pod: &ObservedPod) -> bool {
    if pod.drain_requested {
        return true;
    }
    let Some(node) = &pod.node else {
        return false;
    };
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    match nodes.get_opt(node).await {
        Ok(Some(n)) => n.spec.and_then(|s| s.unschedulable).unwrap_or(false),
        // Without permission to read nodes only the annotation works.
        Ok(None) | Err(_) => false,
    }
}
