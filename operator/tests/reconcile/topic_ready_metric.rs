//! `rmq_operator_topic_ready` (behind `RocketMQTopicNotReady`) follows each
//! managed Topic's Ready condition, and leaves no series for unmanaged or deleted Topics.

use operator::crd::Topic;
use operator::reconcile::Context;
use operator::reconcile::topic::reconcile;
use serde_json::json;

use crate::topic_flow::cluster;
use crate::{NS, context, example, refetch, seed};

fn topic_ready(ctx: &Context, name: &str) -> Option<i64> {
    let want = format!("rmq_operator_topic_ready{{resource_namespace=\"{NS}\",topic=\"{name}\"}} ");
    ctx.metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&want).map(|v| v.parse().unwrap()))
}

#[tokio::test]
async fn follows_ready_and_vanishes_when_unmanaged_or_deleted() {
    let (api, admin) = cluster();
    let ctx = context(&api, &admin);
    let payments = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    reconcile(payments.clone(), ctx.clone()).await.unwrap();
    assert_eq!(topic_ready(&ctx, "payments"), Some(1));

    // A refused shrink leaves the Topic not Ready.
    api.edit::<Topic>(NS, "payments", json!({"spec": {"writeQueues": 1}}));
    reconcile(refetch(&api, &*payments), ctx.clone())
        .await
        .unwrap();
    assert_eq!(topic_ready(&ctx, "payments"), Some(0));

    // Deleted: the finalizer's pass drops the series.
    kube::Api::<Topic>::namespaced(api.client(), NS)
        .delete("payments", &Default::default())
        .await
        .unwrap();
    reconcile(refetch(&api, &*payments), ctx.clone())
        .await
        .unwrap();
    assert_eq!(topic_ready(&ctx, "payments"), None);

    // Unmanaged on purpose: not Ready, but nothing to page about.
    let events = seed(
        &api,
        &example::<Topic>("topics.yaml", "Topic", "order-events"),
    );
    reconcile(events.clone(), ctx.clone()).await.unwrap();
    assert_eq!(topic_ready(&ctx, "order-events"), Some(1));
    api.edit::<Topic>(
        NS,
        "order-events",
        json!({"metadata": {"annotations": {"rmq-rs.dev/managed": "false"}}}),
    );
    reconcile(refetch(&api, &*events), ctx.clone())
        .await
        .unwrap();
    assert_eq!(topic_ready(&ctx, "order-events"), None);
}
