//! Draining a master's node: the master's PodDisruptionBudget holds the eviction while
//! the operator hands mastership to an in-sync slave.

use k8s_openapi::api::core::v1::{Node, NodeSpec, Pod, PodSpec};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ObjectMeta;
use operator::crd::{FailoverPhase, FailoverTrigger};
use operator::names::{ANNOTATION_DRAIN, LABEL_ROLE};

use crate::NS;
use crate::failover_flow::replicating;

fn pdb(c: &crate::broker_flow::Cluster, name: &str) -> (String, IntOrString) {
    let spec = c
        .api
        .get::<PodDisruptionBudget>(NS, name)
        .unwrap()
        .spec
        .unwrap();
    let role = spec.selector.unwrap().match_labels.unwrap()[LABEL_ROLE].clone();
    (role, spec.max_unavailable.unwrap())
}

fn role(c: &crate::broker_flow::Cluster, pod: &str) -> String {
    c.api.get::<Pod>(NS, pod).unwrap().metadata.labels.unwrap()[LABEL_ROLE].clone()
}

#[tokio::test]
async fn draining_a_masters_node_hands_mastership_over_before_the_eviction() {
    let c = replicating(5000).await;
    // Masters can never be evicted; slaves one at a time.
    assert_eq!(
        pdb(&c, "rmq-ha-0-master"),
        ("master".to_owned(), IntOrString::Int(0))
    );
    assert_eq!(
        pdb(&c, "rmq-ha-0"),
        ("slave".to_owned(), IntOrString::Int(1))
    );

    // `kubectl drain node-a` cordons it; the master of group 0 runs there.
    c.api.insert_cluster(&Node {
        metadata: ObjectMeta {
            name: Some("node-a".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: Some(true),
            ..NodeSpec::default()
        }),
        status: None,
    });
    let mut pod = c.api.get::<Pod>(NS, "rmq-ha-0-0").unwrap();
    pod.spec = Some(PodSpec {
        node_name: Some("node-a".to_owned()),
        ..PodSpec::default()
    });
    c.api.insert(&pod);
    c.reconcile().await;

    let status = c.status();
    let g = &status.groups[0];
    assert_eq!(g.master_pod.as_deref(), Some("rmq-ha-0-1"));
    assert_eq!(g.failover.trigger, Some(FailoverTrigger::Drain));
    assert_eq!(g.failover.phase, FailoverPhase::Completed);
    assert_eq!(g.epoch, 2);
    // The old master is a slave now: its eviction is allowed by the slaves' budget.
    assert_eq!(role(&c, "rmq-ha-0-0"), "slave");
    assert_eq!(role(&c, "rmq-ha-0-1"), "master");
    // The other group, not on that node, is untouched.
    assert_eq!(status.groups[1].master_pod.as_deref(), Some("rmq-ha-1-0"));
}

#[tokio::test]
async fn a_drain_annotation_on_the_master_pod_hands_over_too() {
    let c = replicating(5000).await;
    let mut pod = c.api.get::<Pod>(NS, "rmq-ha-1-0").unwrap();
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(ANNOTATION_DRAIN.to_owned(), "true".to_owned());
    c.api.insert(&pod);
    c.reconcile().await;
    let status = c.status();
    assert_eq!(status.groups[1].master_pod.as_deref(), Some("rmq-ha-1-1"));
    assert_eq!(status.groups[0].master_pod.as_deref(), Some("rmq-ha-0-0"));
}
