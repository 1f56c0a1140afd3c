//! `rmq-operator crd apply` (what the chart's pre-upgrade hook runs)
//! against the fake API server: creation, the upgrade of an older schema owned by another
//! field manager, idempotence, dry runs, and CRDs that never become Established.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use operator::crd_apply::{ApplyOptions, Change, CrdApplyError, FIELD_MANAGER, apply_all};
use serde_json::{Value, json};

use crate::fake_api::FakeApi;

const NAMESERVERS: &str = "nameservers.rmq-rs.dev";

fn fast() -> ApplyOptions {
    ApplyOptions {
        dry_run: false,
        timeout: Duration::from_millis(300),
        poll_interval: Duration::from_millis(10),
    }
}

fn changes(applied: &[operator::crd_apply::Applied]) -> Vec<(&str, Change)> {
    applied
        .iter()
        .map(|a| (a.name.as_str(), a.change))
        .collect()
}

fn established(api: &FakeApi, name: &str) -> bool {
    api.get_cluster::<CustomResourceDefinition>(name)
        .and_then(|c| c.status)
        .and_then(|s| s.conditions)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

fn nameserver_spec_properties(crd: &CustomResourceDefinition) -> Value {
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    schema["openAPIV3Schema"]["properties"]["spec"]["properties"].clone()
}

/// The NameServer CRD of the release before `spec.security` existed.
fn previous_nameserver_crd() -> CustomResourceDefinition {
    let current = operator::crd::all()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(NAMESERVERS))
        .unwrap();
    let mut old = serde_json::to_value(&current).unwrap();
    let props =
        old["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            .as_object_mut()
            .unwrap();
    assert!(props.remove("security").is_some());
    serde_json::from_value(old).unwrap()
}

/// `helm install` (Helm 4 applies server-side as manager `helm`) of the older release.
async fn installed_by_helm(api: &FakeApi) {
    let crds: Api<CustomResourceDefinition> = Api::all(api.client());
    crds.patch(
        NAMESERVERS,
        &PatchParams::apply("helm"),
        &Patch::Apply(&previous_nameserver_crd()),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_fresh_cluster_gets_every_crd_created_and_established() {
    let api = FakeApi::new();
    let applied = apply_all(&api.client(), &operator::crd::all(), &fast())
        .await
        .unwrap();
    assert_eq!(
        changes(&applied),
        [
            (NAMESERVERS, Change::Created),
            ("brokers.rmq-rs.dev", Change::Created),
            ("topics.rmq-rs.dev", Change::Created),
        ]
    );
    for crd in operator::crd::all() {
        let name = crd.metadata.name.clone().unwrap();
        let stored = api.get_cluster::<CustomResourceDefinition>(&name).unwrap();
        assert_eq!(stored.spec, crd.spec, "{name}");
        assert!(established(&api, &name), "{name}");
    }
}

#[tokio::test]
async fn an_older_crd_owned_by_helm_is_taken_over_and_a_second_run_changes_nothing() {
    let api = FakeApi::new();
    installed_by_helm(&api).await;
    let crds: Api<CustomResourceDefinition> = Api::all(api.client());
    let new = operator::crd::all().remove(0);

    // Helm owns the versions it applied: an apply that does not force is refused.
    let err = crds
        .patch(
            NAMESERVERS,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&new),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.message.contains("\"helm\"")),
        "{err}"
    );

    let applied = apply_all(&api.client(), &operator::crd::all(), &fast())
        .await
        .unwrap();
    assert_eq!(
        changes(&applied),
        [
            (NAMESERVERS, Change::Configured),
            ("brokers.rmq-rs.dev", Change::Created),
            ("topics.rmq-rs.dev", Change::Created),
        ]
    );
    let stored = api
        .get_cluster::<CustomResourceDefinition>(NAMESERVERS)
        .unwrap();
    assert!(
        nameserver_spec_properties(&stored)
            .get("security")
            .is_some(),
        "the new field is in the stored schema"
    );
    assert_eq!(stored.spec, new.spec);
    assert!(established(&api, NAMESERVERS));

    // The fields changed hands: now Helm re-applying its old schema is what conflicts.
    let err = crds
        .patch(
            NAMESERVERS,
            &PatchParams::apply("helm"),
            &Patch::Apply(&previous_nameserver_crd()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.message.contains(FIELD_MANAGER)),
        "{err}"
    );

    api.take_mutations();
    let again = apply_all(&api.client(), &operator::crd::all(), &fast())
        .await
        .unwrap();
    assert!(
        again.iter().all(|a| a.change == Change::Unchanged),
        "{again:?}"
    );
    assert_eq!(api.take_mutations(), 0, "an idempotent run writes nothing");
}

#[tokio::test]
async fn a_dry_run_reports_what_would_change_and_stores_nothing() {
    let api = FakeApi::new();
    installed_by_helm(&api).await;
    let before = api
        .get_cluster::<CustomResourceDefinition>(NAMESERVERS)
        .unwrap();
    api.take_mutations();
    let opts = ApplyOptions {
        dry_run: true,
        ..fast()
    };
    let applied = apply_all(&api.client(), &operator::crd::all(), &opts)
        .await
        .unwrap();
    assert_eq!(
        changes(&applied),
        [
            (NAMESERVERS, Change::Configured),
            ("brokers.rmq-rs.dev", Change::Created),
            ("topics.rmq-rs.dev", Change::Created),
        ]
    );
    assert_eq!(api.take_mutations(), 0);
    assert!(
        api.get_cluster::<CustomResourceDefinition>("brokers.rmq-rs.dev")
            .is_none()
    );
    assert_eq!(
        api.get_cluster::<CustomResourceDefinition>(NAMESERVERS),
        Some(before)
    );
}

#[tokio::test]
async fn a_crd_that_is_never_established_fails_naming_it_and_why() {
    let api = FakeApi::new();
    api.hold_crds_unestablished();
    installed_by_helm(&api).await;
    api.set_status_cluster::<CustomResourceDefinition>(
        NAMESERVERS,
        json!({"conditions": [{
            "type": "NamesAccepted", "status": "False", "reason": "NameConflict",
            "message": "\"rmqns\" is already in use", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}),
    );
    let err = apply_all(&api.client(), &operator::crd::all(), &fast())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CrdApplyError::NotEstablished { name, .. } if name == NAMESERVERS),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains("NameConflict"), "{message}");
    assert!(message.contains("already in use"), "{message}");

    // Without any condition reported the message says so.
    let fresh = FakeApi::new();
    fresh.hold_crds_unestablished();
    let err = apply_all(&fresh.client(), &operator::crd::all(), &fast())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not reported it Established"),
        "{err}"
    );
}

#[tokio::test]
async fn a_refused_apply_names_the_crd() {
    let api = FakeApi::new();
    api.inject_error(
        http::Method::PATCH,
        "/customresourcedefinitions/brokers.rmq-rs.dev",
        403,
        1,
    );
    let err = apply_all(&api.client(), &operator::crd::all(), &fast())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CrdApplyError::Apply { name, .. } if name == "brokers.rmq-rs.dev"),
        "{err}"
    );
}
