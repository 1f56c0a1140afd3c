//! The "group has a ready master" gauge behind `RocketMQMasterDown` is set
//! for every group, including single-replica groups and groups whose failover never armed
//! (no member ever answered GET_BROKER_HA_STATUS), which never leave phase Idle.

use k8s_openapi::api::apps::v1::StatefulSet;
use operator::crd::Broker;
use operator::reconcile::Context;
use serde_json::json;

use crate::NS;
use crate::broker_flow::{Cluster, pod_from};

/// The value of `family{…broker_name="<group>"…}` (plus `extra` labels) in the exposition.
fn sample(ctx: &Context, family: &str, group: &str, extra: &str) -> Option<i64> {
    let text = ctx.metrics.encode();
    let group_label = format!("broker_name=\"{group}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| l.contains(&group_label) && l.contains(extra))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn master_ready(ctx: &Context, group: &str) -> Option<i64> {
    sample(ctx, "rmq_operator_group_master_ready", group, "")
}

/// Replaces pod `<group>-<ordinal>` with one whose Ready condition is `ready`.
fn set_ready(c: &Cluster, group: i32, ordinal: i32, ready: bool) {
    let sts = c
        .api
        .get::<StatefulSet>(NS, &format!("rmq-ha-{group}"))
        .unwrap();
    c.api.insert(&pod_from(&sts, ordinal, "rev1", ready));
}

#[tokio::test]
async fn an_unarmed_group_without_a_ready_master_reports_master_down() {
    // Cluster::started never scripts an HA status: failover is not armed in any group.
    let c = Cluster::started().await;
    let ctx = c.ctx();
    c.reconcile_in(&ctx).await.unwrap();
    assert_eq!(master_ready(&ctx, "rmq-ha-0"), Some(1));
    assert_eq!(master_ready(&ctx, "rmq-ha-1"), Some(1));

    set_ready(&c, 0, 0, false);
    c.reconcile_in(&ctx).await.unwrap();
    assert_eq!(master_ready(&ctx, "rmq-ha-0"), Some(0));
    assert_eq!(master_ready(&ctx, "rmq-ha-1"), Some(1));
    // The failover machine did not move (not armed), so the phase gauge alone would
    // never have said anything.
    let phase = |p: &str| {
        sample(
            &ctx,
            "rmq_operator_failover_phase",
            "rmq-ha-0",
            &format!("phase=\"{p}\""),
        )
    };
    assert_eq!(phase("Idle"), Some(1));
    assert_eq!(phase("Detected"), Some(0));

    set_ready(&c, 0, 0, true);
    c.reconcile_in(&ctx).await.unwrap();
    assert_eq!(master_ready(&ctx, "rmq-ha-0"), Some(1));
}

#[tokio::test]
async fn a_single_replica_group_without_a_ready_master_reports_master_down() {
    let c = Cluster::started().await;
    c.api
        .edit::<Broker>(NS, "rmq-ha", json!({"spec": {"replicasPerGroup": 1}}));
    let ctx = c.ctx();
    c.reconcile_in(&ctx).await.unwrap();
    // The scale-down removed the slaves.
    c.api
        .remove::<k8s_openapi::api::core::v1::Pod>(NS, "rmq-ha-0-1");
    c.api
        .remove::<k8s_openapi::api::core::v1::Pod>(NS, "rmq-ha-1-1");
    c.reconcile_in(&ctx).await.unwrap();
    assert_eq!(master_ready(&ctx, "rmq-ha-1"), Some(1));

    set_ready(&c, 1, 0, false);
    c.reconcile_in(&ctx).await.unwrap();
    assert_eq!(master_ready(&ctx, "rmq-ha-1"), Some(0));
    assert_eq!(master_ready(&ctx, "rmq-ha-0"), Some(1));

    // The pod is gone altogether (deleted, node lost): still down, not silent.
    c.api
        .remove::<k8s_openapi::api::core::v1::Pod>(NS, "rmq-ha-1-0");
    c.reconcile_in(&ctx).await.unwrap();
    assert_eq!(master_ready(&ctx, "rmq-ha-1"), Some(0));
}
