//! replicasPerGroup changes: a shrink never removes a master; a single-replica group
//! refuses switchovers with a reason.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::ConfigMap;
use operator::conditions;
use operator::crd::Broker;
use operator::names::ANNOTATION_SWITCHOVER;
use serde_json::json;

use crate::NS;
use crate::broker_flow::Cluster;

fn replicas(c: &Cluster, sts: &str) -> i32 {
    c.api
        .get::<StatefulSet>(NS, sts)
        .unwrap()
        .spec
        .unwrap()
        .replicas
        .unwrap()
}

/// Records `pod` as the master of group 0 (a switchover happened earlier).
fn master_of_group_0(c: &Cluster, pod: &str) {
    let mut status = serde_json::to_value(c.status()).unwrap();
    status["groups"][0]["masterPod"] = json!(pod);
    c.api.set_status::<Broker>(NS, "rmq-ha", status);
}

#[tokio::test]
async fn a_shrink_that_would_remove_a_master_is_held_with_a_reason() {
    let c = Cluster::started().await;
    c.reconcile().await;
    master_of_group_0(&c, "rmq-ha-0-1");
    c.api
        .edit::<Broker>(NS, "rmq-ha", json!({"spec": {"replicasPerGroup": 1}}));
    c.reconcile().await;

    // Before the fix the StatefulSet went to 1 replica, deleting the master pod.
    assert_eq!(replicas(&c, "rmq-ha-0"), 2);
    let status = c.status();
    let progressing = conditions::find(&status.conditions, conditions::PROGRESSING).unwrap();
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("False", "ScaleDownBlocked")
    );
    assert!(
        progressing
            .message
            .contains("rmq-ha-0-1 is master of rmq-ha-0"),
        "{}",
        progressing.message
    );
    assert!(progressing.message.contains(ANNOTATION_SWITCHOVER));
    assert!(
        c.api
            .events()
            .iter()
            .any(|(t, r, _)| t == "Warning" && r == "ScaleDownBlocked")
    );
    // The member keeps its role: its configuration still says master.
    let cm = c.api.get::<ConfigMap>(NS, "rmq-ha-0-config").unwrap();
    assert!(cm.data.unwrap()["rmq-ha-0-1.conf"].contains("brokerId=0\n"));

    // Once mastership is back on a kept ordinal, the shrink goes through.
    master_of_group_0(&c, "rmq-ha-0-0");
    c.reconcile().await;
    assert_eq!(replicas(&c, "rmq-ha-0"), 1);
    assert_eq!(replicas(&c, "rmq-ha-1"), 1);
    let cm = c.api.get::<ConfigMap>(NS, "rmq-ha-0-config").unwrap();
    let data = cm.data.unwrap();
    assert!(data["rmq-ha-0-0.conf"].contains("brokerId=0\n"));
    assert!(!data.contains_key("rmq-ha-0-1.conf"));
}

#[tokio::test]
async fn a_single_replica_group_refuses_a_switchover_with_a_reason() {
    let c = Cluster::started().await;
    c.api
        .edit::<Broker>(NS, "rmq-ha", json!({"spec": {"replicasPerGroup": 1}}));
    c.reconcile().await;
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"metadata": {"annotations": {ANNOTATION_SWITCHOVER: "rmq-ha-0-0"}}}),
    );
    c.reconcile().await;
    let broker = c.api.get::<Broker>(NS, "rmq-ha").unwrap();
    assert!(
        !broker
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ANNOTATION_SWITCHOVER),
        "the request is cleared"
    );
    assert!(c.api.events().iter().any(|(t, r, note)| t == "Warning"
        && r == "SwitchoverRejected"
        && note.contains("replicasPerGroup is 1")));
}
