//! The brokers' admin secret: every Broker gets a generated `<name>-admin-secret`, its
//! pods take it as `RMQ_ADMIN_SECRET`, and without an `acl` the operator signs every
//! admin call to its pods (role changes and config pushes included, which those brokers
//! refuse unsigned) with the first secret of the list, so editing it to `new,old` moves
//! the operator to the new secret at the next reconcile.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use operator::conditions;
use operator::crd::{Broker, NameServer};
use operator::names::ANNOTATION_SWITCHOVER;
use operator::reconcile::admin_credentials::REASON;
use security::admin_secret::ADMIN_ACCESS_KEY;
use security::sign::Credentials;
use serde_json::json;

use crate::NS;
use crate::failover_flow::replicating;
use crate::secret_flow::{base64_of, insert_secret};

const SECRET: &str = "rmq-ha-admin-secret";

fn admin_secret_value(api: &crate::fake_api::FakeApi) -> String {
    let secret = api.get::<Secret>(NS, SECRET).expect("generated");
    String::from_utf8(secret.data.unwrap()["adminSecret"].0.clone()).unwrap()
}

#[tokio::test]
async fn the_admin_secret_is_generated_mounted_and_signs_role_changes_and_config_pushes() {
    let c = replicating(7000).await;
    let value = admin_secret_value(&c.api);
    assert_eq!(value.len(), 64, "32 random bytes, hex");
    let secret = c.api.get::<Secret>(NS, SECRET).unwrap();
    let owner = &secret.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Broker", "rmq-ha")
    );
    // Editable: rotating it is editing it.
    assert_ne!(secret.immutable, Some(true));
    assert!(
        c.api
            .events()
            .iter()
            .any(|(_, r, _)| r == "AdminSecretGenerated")
    );
    for g in 0..2 {
        let sts = c
            .api
            .get::<StatefulSet>(NS, &format!("rmq-ha-{g}"))
            .unwrap();
        let container = &sts.spec.unwrap().template.spec.unwrap().containers[0];
        let env = container
            .env
            .as_ref()
            .unwrap()
            .iter()
            .find(|e| e.name == "RMQ_ADMIN_SECRET")
            .expect("RMQ_ADMIN_SECRET");
        assert!(env.value.is_none(), "no literal value");
        let r = env
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!((r.name.as_str(), r.key.as_str()), (SECRET, "adminSecret"));
        assert_eq!(r.optional, Some(false));
    }

    // A switchover (role changes) and a new nameserver list (a config push): all signed
    // with the generated secret as `rmq-admin`.
    c.admin.take_calls();
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"metadata": {"annotations": {ANNOTATION_SWITCHOVER: "rmq-ha-1-1"}}}),
    );
    c.reconcile().await;
    c.api
        .edit::<NameServer>(NS, "rmq-ha", json!({"spec": {"replicas": 4}}));
    c.reconcile().await;
    let calls = c.admin.signed_calls();
    for kind in ["notify_role_changed", "update_broker_config", "ha_status"] {
        assert!(
            calls.iter().any(|(call, _)| call.starts_with(kind)),
            "{kind} in {calls:?}"
        );
    }
    let generated = Credentials::new(ADMIN_ACCESS_KEY, value.clone());
    for (call, signed) in &calls {
        assert_eq!(signed.as_ref(), Some(&generated), "{call}");
    }

    // Rotation: `new,old` makes the operator sign with the new one from the next reconcile.
    let new = "rotated-admin-secret-4d7e0b19a3c2";
    insert_secret(
        &c.api,
        SECRET,
        &[("adminSecret", &format!("{new},{value}"))],
    );
    c.admin.take_calls();
    c.reconcile().await;
    let calls = c.admin.signed_calls();
    assert!(!calls.is_empty());
    for (call, signed) in &calls {
        assert_eq!(
            signed.as_ref(),
            Some(&Credentials::new(ADMIN_ACCESS_KEY, new)),
            "{call}"
        );
    }

    // The values are in nothing the operator stored but the Secret.
    let stored = c.api.dump_except_secrets();
    for v in [value.as_str(), new] {
        assert!(!stored.contains(v), "secret value stored");
        assert!(
            !stored.contains(&base64_of(v.as_bytes())),
            "secret value stored"
        );
    }
}

#[tokio::test]
async fn an_unusable_admin_secret_stops_the_reconcile_before_any_unsigned_call() {
    let c = replicating(7000).await;
    insert_secret(&c.api, SECRET, &[("adminSecret", "tiny-9")]);
    c.admin.take_calls();
    let err = c.reconcile_in(&c.ctx()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(SECRET) && text.contains("adminSecret"),
        "{text}"
    );
    assert!(!text.contains("tiny-9"), "{text}");
    assert!(c.admin.calls().is_empty(), "{:?}", c.admin.calls());
    let status = c.status();
    let ready = conditions::find(&status.conditions, conditions::READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", REASON)
    );
    assert!(ready.message.contains(SECRET), "{}", ready.message);
}
