use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use operator::conditions;
use operator::crd::NameServer;
use operator::reconcile::nameserver::reconcile;
use serde_json::json;

use crate::fake_admin::FakeAdmin;
use crate::fake_api::FakeApi;
use crate::{NS, context, example, refetch, seed};

#[tokio::test]
async fn creates_owned_objects_then_settles() {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    let ctx = context(&api, &admin);
    let ns: NameServer = example("ha.yaml", "NameServer", "rmq-ha");
    let ns = seed(&api, &ns);

    reconcile(ns.clone(), ctx.clone()).await.unwrap();
    let sts = api.get::<StatefulSet>(NS, "rmq-ha-nameserver").unwrap();
    assert_eq!(sts.spec.as_ref().unwrap().replicas, Some(3));
    let owner = &sts.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("NameServer", Some(true))
    );
    assert!(
        api.get::<Service>(NS, "rmq-ha-nameserver-headless")
            .is_some()
    );
    assert!(api.get::<Service>(NS, "rmq-ha-nameserver").is_some());
    assert!(
        api.get::<ConfigMap>(NS, "rmq-ha-nameserver-config")
            .is_some()
    );
    assert!(
        api.get::<PodDisruptionBudget>(NS, "rmq-ha-nameserver")
            .is_some()
    );

    let status = refetch(&api, &*ns).status.clone().unwrap();
    assert_eq!(status.addresses.len(), 3);
    assert_eq!(
        status.addresses[0],
        "rmq-ha-nameserver-0.rmq-ha-nameserver-headless.team-a.svc.cluster.local:9876"
    );
    assert!(!conditions::is_true(&status.conditions, conditions::READY));
    assert!(conditions::is_true(
        &status.conditions,
        conditions::PROGRESSING
    ));

    // The StatefulSet controller reports every replica ready.
    api.set_status::<StatefulSet>(
        NS,
        "rmq-ha-nameserver",
        json!({"replicas": 3, "readyReplicas": 3, "updatedReplicas": 3}),
    );
    api.take_mutations();
    reconcile(refetch(&api, &*ns), ctx.clone()).await.unwrap();
    let status = refetch(&api, &*ns).status.clone().unwrap();
    assert!(conditions::is_true(&status.conditions, conditions::READY));
    assert_eq!(status.ready_replicas, 3);
    assert!(api.events().iter().any(|(_, reason, _)| reason == "Ready"));

    // Nothing changed: a further reconcile writes nothing.
    api.take_mutations();
    reconcile(refetch(&api, &*ns), ctx).await.unwrap();
    assert_eq!(api.take_mutations(), 0);
}

#[tokio::test]
async fn paused_nameserver_is_left_alone() {
    let api = FakeApi::new();
    let ctx = context(&api, &FakeAdmin::new());
    let mut ns: NameServer = example("minimal.yaml", "NameServer", "rmq");
    ns.metadata.annotations = Some(
        [(
            "rmq-rs.dev/pause-reconciliation".to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    let ns = seed(&api, &ns);
    reconcile(ns.clone(), ctx).await.unwrap();
    assert!(api.get::<StatefulSet>(NS, "rmq-nameserver").is_none());
    let status = refetch(&api, &*ns).status.clone().unwrap();
    assert!(conditions::is_true(
        &status.conditions,
        conditions::RECONCILIATION_PAUSED
    ));
}

#[tokio::test]
async fn the_kv_config_moves_from_an_empty_dir_to_a_claim_without_a_stuck_reconcile() {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    let ctx = context(&api, &admin);
    let ns = seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    reconcile(ns.clone(), ctx.clone()).await.unwrap();
    let sts = api.get::<StatefulSet>(NS, "rmq-ha-nameserver").unwrap();
    let claims = sts.spec.unwrap().volume_claim_templates.unwrap();
    assert_eq!(claims[0].metadata.name.as_deref(), Some("data"));
    let mounts = sts.metadata.uid.clone();

    // A StatefulSet from an operator version that kept the KV config on an emptyDir.
    api.edit::<StatefulSet>(
        NS,
        "rmq-ha-nameserver",
        json!({"spec": {"volumeClaimTemplates": null}}),
    );
    // Applying the new template over it is a 422 (immutable field) without the re-create.
    reconcile(refetch(&api, &*ns), ctx.clone()).await.unwrap();
    let sts = api.get::<StatefulSet>(NS, "rmq-ha-nameserver").unwrap();
    assert_ne!(sts.metadata.uid, mounts, "re-created");
    assert!(sts.spec.unwrap().volume_claim_templates.is_some());
}
