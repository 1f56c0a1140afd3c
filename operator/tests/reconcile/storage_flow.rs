//! Growing `spec.storage.size` against the strict fake: `volumeClaimTemplates` are
//! immutable (422), PVCs grow only when their StorageClass allows it.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use operator::conditions;
use operator::crd::Broker;
use serde_json::json;

use crate::NS;
use crate::broker_flow::Cluster;

fn storage_class(name: &str, expandable: bool) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        provisioner: "csi.example".to_owned(),
        allow_volume_expansion: Some(expandable),
        ..StorageClass::default()
    }
}

fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NS.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: Some(class.to_owned()),
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some([("storage".to_owned(), Quantity(size.to_owned()))].into()),
                limits: None,
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

fn claim_size(c: &Cluster, name: &str) -> String {
    c.api
        .get::<PersistentVolumeClaim>(NS, name)
        .unwrap()
        .spec
        .unwrap()
        .resources
        .unwrap()
        .requests
        .unwrap()["storage"]
        .0
        .clone()
}

fn template_size(c: &Cluster, sts: &str) -> String {
    c.api
        .get::<StatefulSet>(NS, sts)
        .unwrap()
        .spec
        .unwrap()
        .volume_claim_templates
        .unwrap()[0]
        .spec
        .clone()
        .unwrap()
        .resources
        .unwrap()
        .requests
        .unwrap()["storage"]
        .0
        .clone()
}

/// The started cluster with its claims provisioned by `class` (the default class: the
/// Broker names none).
async fn grown(class: &str, expandable: bool) -> Cluster {
    let c = Cluster::started().await;
    c.api.insert_cluster(&storage_class(class, expandable));
    for g in 0..2 {
        for o in 0..2 {
            c.api
                .insert(&claim(&format!("store-rmq-ha-{g}-{o}"), class, "50Gi"));
        }
    }
    c
}

#[tokio::test]
async fn the_strict_fake_refuses_a_changed_volume_claim_template() {
    let c = Cluster::started().await;
    let mut sts = c.api.get::<StatefulSet>(NS, "rmq-ha-0").unwrap();
    sts.spec
        .as_mut()
        .unwrap()
        .volume_claim_templates
        .as_mut()
        .unwrap()[0]
        .spec
        .as_mut()
        .unwrap()
        .resources = Some(VolumeResourceRequirements {
        requests: Some([("storage".to_owned(), Quantity("99Gi".to_owned()))].into()),
        limits: None,
    });
    sts.metadata.managed_fields = None;
    let api: kube::Api<StatefulSet> = kube::Api::namespaced(c.api.client(), NS);
    let err = api
        .patch(
            "rmq-ha-0",
            &kube::api::PatchParams::apply("test").force(),
            &kube::api::Patch::Apply(&sts),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422),
        "{err}"
    );
}

#[tokio::test]
async fn growing_storage_patches_claims_and_recreates_the_statefulset_keeping_pods() {
    let c = grown("fast", true).await;
    let uid_before = c
        .api
        .get::<StatefulSet>(NS, "rmq-ha-0")
        .unwrap()
        .metadata
        .uid;
    c.api
        .edit::<Broker>(NS, "rmq-ha", json!({"spec": {"storage": {"size": "80Gi"}}}));
    // Fails with 422 on every reconcile before the fix.
    c.reconcile().await;

    for g in 0..2 {
        for o in 0..2 {
            assert_eq!(claim_size(&c, &format!("store-rmq-ha-{g}-{o}")), "80Gi");
            // Orphan deletion: the pods keep running.
            assert!(c.api.get::<Pod>(NS, &format!("rmq-ha-{g}-{o}")).is_some());
        }
        assert_eq!(template_size(&c, &format!("rmq-ha-{g}")), "80Gi");
    }
    let uid_after = c
        .api
        .get::<StatefulSet>(NS, "rmq-ha-0")
        .unwrap()
        .metadata
        .uid;
    assert_ne!(uid_before, uid_after, "the StatefulSet was re-created");
    let status = c.status();
    assert!(conditions::is_true(
        &status.conditions,
        conditions::STORAGE_RESIZED
    ));
    assert!(
        c.api
            .events()
            .iter()
            .any(|(_, r, _)| r == "VolumesExpanded")
    );

    // Steady afterwards: nothing re-created again.
    c.reconcile().await;
    assert_eq!(
        c.api
            .get::<StatefulSet>(NS, "rmq-ha-0")
            .unwrap()
            .metadata
            .uid,
        uid_after
    );
}

#[tokio::test]
async fn a_class_without_expansion_is_reported_and_reconciling_goes_on() {
    let c = grown("fixed", false).await;
    c.api
        .edit::<Broker>(NS, "rmq-ha", json!({"spec": {"storage": {"size": "80Gi"}}}));
    c.reconcile().await;
    assert_eq!(claim_size(&c, "store-rmq-ha-0-0"), "50Gi");
    assert_eq!(template_size(&c, "rmq-ha-0"), "50Gi");
    let status = c.status();
    let cond = status
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::STORAGE_RESIZED)
        .unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "ResizeRefused")
    );
    assert!(
        cond.message.contains("allowVolumeExpansion"),
        "{}",
        cond.message
    );
    // The rest of the reconcile still works: a config change still reaches the ConfigMap.
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"config": {"fileReservedTime": "24"}}}),
    );
    c.reconcile().await;
    let cm = c
        .api
        .get::<k8s_openapi::api::core::v1::ConfigMap>(NS, "rmq-ha-0-config")
        .unwrap();
    assert!(cm.data.unwrap()["rmq-ha-0-0.conf"].contains("fileReservedTime=24\n"));
}
