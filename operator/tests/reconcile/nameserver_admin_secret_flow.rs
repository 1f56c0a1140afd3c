//! The NameServer's generated admin secret: created on the first reconcile, enforced by
//! its pods only once every Broker naming it runs pods that sign registrations with it
//! (never before: restarted nameservers would drop the unsigned brokers' routes), and
//! kept enforced through later broker rollouts. The operator's own calls to the
//! nameservers are signed with it.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use operator::crd::{Broker, NameServer, Topic};
use operator::names::{BrokerNames, object_labels};
use operator::reconcile::nameserver::reconcile;
use security::admin_secret::ADMIN_ACCESS_KEY;
use security::sign::Credentials;
use serde_json::json;

use crate::fake_admin::FakeAdmin;
use crate::fake_api::FakeApi;
use crate::secret_flow::insert_secret;
use crate::{NS, context, example, refetch, seed};

const SECRET: &str = "rmq-ha-nameserver-admin-secret";

/// Env var names of the NameServer's pods.
fn nameserver_env(api: &FakeApi) -> Vec<(String, Option<String>)> {
    let sts = api.get::<StatefulSet>(NS, "rmq-ha-nameserver").unwrap();
    sts.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let from = e.value_from.and_then(|v| v.secret_key_ref).map(|r| r.name);
            (e.name, from)
        })
        .collect()
}

fn enforced(api: &FakeApi) -> bool {
    nameserver_env(api)
        .iter()
        .any(|(name, from)| name == "RMQ_ADMIN_SECRET" && from.as_deref() == Some(SECRET))
}

/// A StatefulSet of `broker` as an earlier operator (or this one) rendered it.
fn broker_sts(broker: &Broker, signs: bool) -> StatefulSet {
    let labels = object_labels(&BrokerNames::of(broker).selector());
    let env = if signs {
        json!([{"name": "RMQ_NAMESRV_ADMIN_SECRET",
                "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "adminSecret"}}}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({
        "metadata": {"name": "rmq-ha-0", "namespace": NS, "labels": labels},
        "spec": {
            "replicas": 2,
            "serviceName": "rmq-ha-headless",
            "selector": {"matchLabels": labels},
            "template": {"spec": {"containers": [{"name": "broker", "env": env}]}},
        },
    }))
    .unwrap()
}

fn rollout(api: &FakeApi, updated: i32, revision: &str) {
    api.set_status::<StatefulSet>(
        NS,
        "rmq-ha-0",
        json!({"replicas": 2, "observedGeneration": 1000, "updatedReplicas": updated,
               "currentRevision": "r1", "updateRevision": revision}),
    );
}

#[tokio::test]
async fn nameservers_enforce_their_admin_secret_once_every_broker_signs() {
    let api = FakeApi::new();
    let ctx = context(&api, &FakeAdmin::new());
    let ns = seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    let broker = seed(&api, &example::<Broker>("ha.yaml", "Broker", "rmq-ha"));
    // Pods from before this operator version: they register unsigned.
    api.insert(&broker_sts(&broker, false));
    rollout(&api, 2, "r1");

    reconcile(ns.clone(), ctx.clone()).await.unwrap();
    let secret = api.get::<Secret>(NS, SECRET).expect("generated");
    let value = String::from_utf8(secret.data.unwrap()["adminSecret"].0.clone()).unwrap();
    assert_eq!(value.len(), 64);
    assert!(
        api.events()
            .iter()
            .any(|(_, r, _)| r == "AdminSecretGenerated")
    );
    assert!(
        !enforced(&api),
        "enforced while a broker still registers unsigned"
    );

    // The broker's StatefulSet now signs, but its rollout is under way.
    api.insert(&broker_sts(&broker, true));
    rollout(&api, 1, "r2");
    reconcile(refetch(&api, &*ns), ctx.clone()).await.unwrap();
    assert!(!enforced(&api), "enforced before every broker pod signs");

    // Rolled out: every broker pod signs, so the nameservers enforce.
    api.set_status::<StatefulSet>(
        NS,
        "rmq-ha-0",
        json!({"replicas": 2, "observedGeneration": 1000, "updatedReplicas": 2,
               "currentRevision": "r2", "updateRevision": "r2"}),
    );
    reconcile(refetch(&api, &*ns), ctx.clone()).await.unwrap();
    assert!(enforced(&api), "{:?}", nameserver_env(&api));

    // A later broker rollout (an unrelated change) does not turn it off again.
    rollout(&api, 0, "r3");
    reconcile(refetch(&api, &*ns), ctx.clone()).await.unwrap();
    assert!(enforced(&api));
    // The Secret was generated once and is left as it is.
    let again = api.get::<Secret>(NS, SECRET).unwrap();
    assert_eq!(
        String::from_utf8(again.data.unwrap()["adminSecret"].0.clone()).unwrap(),
        value
    );
}

/// A NameServer without `acl` checks its admin secret: the Topic reconcile signs its
/// nameserver calls with it (as `rmq-admin`).
#[tokio::test]
async fn topics_sign_nameserver_calls_with_the_nameservers_admin_secret() {
    let (api, admin) = crate::topic_flow::cluster();
    let ctx = context(&api, &admin);
    let value = "ns-admin-secret-0123456789abcdef";
    insert_secret(&api, SECRET, &[("adminSecret", value)]);
    insert_secret(
        &api,
        "rmq-ha-admin-secret",
        &[("adminSecret", "broker-admin-secret-0123456789")],
    );
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    operator::reconcile::topic::reconcile(topic, ctx)
        .await
        .unwrap();
    let namesrv_calls: Vec<_> = admin
        .signed_calls()
        .into_iter()
        .filter(|(call, _)| call.contains(":9876"))
        .collect();
    assert!(!namesrv_calls.is_empty(), "{:?}", admin.calls());
    for (call, signed) in &namesrv_calls {
        assert_eq!(
            signed.as_ref(),
            Some(&Credentials::new(ADMIN_ACCESS_KEY, value)),
            "{call}"
        );
    }
}

/// A Broker with its own ACL account also signs with the NameServer's admin secret (its
/// brokers try that first), so its NameServer enforces once its pods sign.
#[tokio::test]
async fn a_broker_with_its_own_account_counts_as_signing() {
    let api = FakeApi::new();
    let ctx = context(&api, &FakeAdmin::new());
    let ns = seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    let mut broker = example::<Broker>("ha.yaml", "Broker", "rmq-ha");
    broker.spec.security.broker_credentials =
        Some(serde_json::from_value(json!({"secretName": "broker-account"})).unwrap());
    let broker = seed(&api, &broker);
    api.insert(&broker_sts(&broker, true));
    api.set_status::<StatefulSet>(
        NS,
        "rmq-ha-0",
        json!({"replicas": 2, "observedGeneration": 1000, "updatedReplicas": 2,
               "currentRevision": "r2", "updateRevision": "r2"}),
    );
    reconcile(ns, ctx).await.unwrap();
    assert!(api.get::<Secret>(NS, SECRET).is_some());
    assert!(enforced(&api), "{:?}", nameserver_env(&api));
}
