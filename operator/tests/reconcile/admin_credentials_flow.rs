//! The account the operator signs its own admin requests with (issues 16 and 18):
//! `spec.security.adminCredentials`, read from a Secret by name at each reconcile, signs
//! every call to that Broker's pods and the Topic reconcile's calls to its masters; a
//! NameServer's signs the Topic reconcile's calls to the nameservers; the values go
//! nowhere else.

use operator::admin::RemotingAdmin;
use operator::conditions;
use operator::crd::{Broker, NameServer, Topic};
use operator::names::ANNOTATION_SWITCHOVER;
use operator::reconcile::admin_credentials::{REASON, TLS_REASON};
use security::sign::Credentials;
use serde_json::json;

use crate::failover_flow::replicating;
use crate::fake_admin::FakeAdmin;
use crate::fake_api::FakeApi;
use crate::{NS, context, example, refetch, seed};

const SECRET_NAME: &str = "rmq-admin";
const ACCESS: &str = "operator-admin";
/// Distinctive enough that finding it anywhere means it leaked.
const SECRET_VALUE: &str = "admin-sk-5e81d2c0";

fn credentials() -> Credentials {
    Credentials::new(ACCESS, SECRET_VALUE)
}

const NS_SECRET_NAME: &str = "rmq-ns-admin";
const NS_SECRET_VALUE: &str = "ns-admin-sk-9c40e7a1";

/// The NameServer's own admin account: its ACL file is not the brokers'.
fn namesrv_credentials() -> Credentials {
    Credentials::new("namesrv-admin", NS_SECRET_VALUE)
}

/// The admin Secret with `keys` (a subset of accessKey and secretKey).
fn admin_secret(api: &FakeApi, keys: &[&str]) {
    account_secret(api, SECRET_NAME, &credentials(), keys);
}

/// Secret `name` holding `keys` of `account`.
fn account_secret(api: &FakeApi, name: &str, account: &Credentials, keys: &[&str]) {
    let data: Vec<(&str, &str)> = keys
        .iter()
        .map(|key| match *key {
            "accessKey" => (*key, account.access_key.as_str()),
            _ => (*key, account.secret_key().expose()),
        })
        .collect();
    crate::secret_flow::insert_secret(api, name, &data);
}

/// `adminCredentials` sign when the Broker has an `acl` (without one, its brokers check
/// the generated admin secret instead, which `admin_secret_flow` covers).
fn use_admin_credentials(api: &FakeApi) {
    api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"security": {
            "acl": {"name": "team-acl"},
            "adminCredentials": {"secretName": SECRET_NAME},
        }}}),
    );
}

fn base64(text: &str) -> String {
    crate::secret_flow::base64_of(text.as_bytes())
}

/// Neither the value nor its base64 form is stored anywhere but in the Secret.
fn assert_not_leaked(api: &FakeApi) {
    let stored = api.dump_except_secrets();
    for value in [SECRET_VALUE, NS_SECRET_VALUE] {
        assert!(!stored.contains(value), "secret value stored");
        assert!(!stored.contains(&base64(value)), "secret value stored");
    }
}

/// Every recorded call whose target is not a nameserver, with how it was signed.
fn broker_calls(admin: &FakeAdmin) -> Vec<(String, Option<Credentials>)> {
    admin
        .signed_calls()
        .into_iter()
        .filter(|(call, _)| !call.contains(":9876"))
        .collect()
}

/// Deletes the Topic `payments` and runs the reconcile that finalizes it, with only its
/// calls recorded.
async fn delete_and_reconcile(
    api: &FakeApi,
    admin: &FakeAdmin,
    topic: &Topic,
    ctx: std::sync::Arc<operator::reconcile::Context>,
) {
    kube::Api::<Topic>::namespaced(api.client(), NS)
        .delete("payments", &Default::default())
        .await
        .unwrap();
    admin.take_calls();
    operator::reconcile::topic::reconcile(refetch(api, topic), ctx)
        .await
        .unwrap();
}

#[tokio::test]
async fn every_admin_call_to_the_brokers_pods_is_signed_with_its_credentials() {
    let c = replicating(7000).await;
    admin_secret(&c.api, &["accessKey", "secretKey"]);
    use_admin_credentials(&c.api);
    c.api.take_log();
    c.admin.take_calls();

    // Status probes, then a switchover (role changes), then a new nameserver list
    // (a live config push).
    c.reconcile().await;
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
    for kind in [
        "ha_status",
        "runtime_info",
        "notify_role_changed",
        "update_broker_config",
    ] {
        assert!(
            calls.iter().any(|(call, _)| call.starts_with(kind)),
            "{kind} in {calls:?}"
        );
    }
    for (call, signed) in &calls {
        assert_eq!(signed.as_ref(), Some(&credentials()), "{call}");
    }

    // The Secret is read by name, never listed or watched (the POSTs are the generated
    // HA secret's create-if-missing).
    let secret_requests: Vec<String> = c
        .api
        .take_log()
        .into_iter()
        .filter(|r| r.contains("/secrets"))
        .collect();
    let read = format!("GET /api/v1/namespaces/{NS}/secrets/{SECRET_NAME}");
    assert!(secret_requests.contains(&read), "{secret_requests:?}");
    for r in &secret_requests {
        assert!(*r == read || r.starts_with("POST "), "{r}");
    }
    assert_not_leaked(&c.api);
    // Nor in the Debug output of the credentials or of a client signing with them.
    for debug in [
        format!("{:?}", credentials()),
        format!(
            "{:?}",
            RemotingAdmin::with_credentials(std::time::Duration::from_secs(1), Some(credentials()))
        ),
    ] {
        assert!(!debug.contains(SECRET_VALUE), "{debug}");
    }
}

#[tokio::test]
async fn a_missing_secret_or_key_stops_the_reconcile_before_any_unsigned_call() {
    let c = replicating(7000).await;
    use_admin_credentials(&c.api);
    c.admin.take_calls();
    let ctx = c.ctx();

    let err = c.reconcile_in(&ctx).await.unwrap_err();
    assert!(err.to_string().contains(SECRET_NAME), "{err}");
    assert!(c.admin.calls().is_empty(), "{:?}", c.admin.calls());
    let ready = |c: &crate::broker_flow::Cluster| {
        let status = c.status();
        let cond = conditions::find(&status.conditions, conditions::READY).unwrap();
        (
            cond.status.clone(),
            cond.reason.clone(),
            cond.message.clone(),
        )
    };
    let (status, reason, message) = ready(&c);
    assert_eq!((status.as_str(), reason.as_str()), ("False", REASON));
    assert!(message.contains(SECRET_NAME), "{message}");
    let warnings: Vec<_> = c
        .api
        .events()
        .into_iter()
        .filter(|(t, r, _)| t == "Warning" && r == REASON)
        .collect();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].2.contains(SECRET_NAME));

    // The Secret appears without secretKey: the condition names the key.
    admin_secret(&c.api, &["accessKey"]);
    let err = c.reconcile_in(&ctx).await.unwrap_err();
    assert!(err.to_string().contains("secretKey"), "{err}");
    assert!(c.admin.calls().is_empty());
    let (_, reason, message) = ready(&c);
    assert_eq!(reason, REASON);
    assert!(message.contains(SECRET_NAME) && message.contains("secretKey"));

    // Fixed: the reconcile goes on, signed.
    admin_secret(&c.api, &["accessKey", "secretKey"]);
    c.reconcile_in(&ctx).await.unwrap();
    let calls = c.admin.signed_calls();
    assert!(!calls.is_empty());
    assert!(
        calls
            .iter()
            .all(|(_, s)| s.as_ref() == Some(&credentials()))
    );
    assert_ne!(ready(&c).1, REASON);
    assert_not_leaked(&c.api);
}

#[tokio::test]
async fn a_topic_signs_its_calls_to_the_masters_with_its_brokers_credentials() {
    let (api, admin) = crate::topic_flow::cluster();
    let ctx = context(&api, &admin);
    use_admin_credentials(&api);
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));

    // No Secret yet: the Topic says why and no master is called.
    assert!(
        operator::reconcile::topic::reconcile(topic.clone(), ctx.clone())
            .await
            .is_err()
    );
    assert!(broker_calls(&admin).is_empty(), "{:?}", admin.calls());
    let stored = refetch(&api, &*topic);
    let cond = conditions::find(
        &stored.status.as_ref().unwrap().conditions,
        conditions::READY,
    )
    .unwrap();
    assert_eq!(cond.reason, REASON);
    assert!(cond.message.contains(SECRET_NAME));

    admin_secret(&api, &["accessKey", "secretKey"]);
    operator::reconcile::topic::reconcile(refetch(&api, &*topic), ctx.clone())
        .await
        .unwrap();
    let calls = broker_calls(&admin);
    assert!(calls.iter().any(|(c, _)| c.starts_with("topic_configs")));
    assert!(calls.iter().any(|(c, _)| c.starts_with("create_topic")));
    for (call, signed) in &calls {
        assert_eq!(signed.as_ref(), Some(&credentials()), "{call}");
    }

    // Deleting it signs the deletes on the masters too.
    delete_and_reconcile(&api, &admin, &topic, ctx).await;
    let deletes: Vec<_> = broker_calls(&admin)
        .into_iter()
        .filter(|(c, _)| c.starts_with("delete_topic_in_broker"))
        .collect();
    assert_eq!(deletes.len(), 2);
    assert!(
        deletes
            .iter()
            .all(|(_, s)| s.as_ref() == Some(&credentials()))
    );
    assert_not_leaked(&api);
}

#[tokio::test]
async fn a_topic_signs_its_calls_to_the_nameservers_with_the_nameservers_credentials() {
    let (api, admin) = crate::topic_flow::cluster();
    let ctx = context(&api, &admin);
    api.edit::<NameServer>(
        NS,
        "rmq-ha",
        json!({"spec": {"security": {
            "acl": {"name": "ns-acl"},
            "adminCredentials": {"secretName": NS_SECRET_NAME},
        }}}),
    );
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    let namesrv_calls = |admin: &FakeAdmin| -> Vec<(String, Option<Credentials>)> {
        admin
            .signed_calls()
            .into_iter()
            .filter(|(call, _)| call.contains(":9876"))
            .collect()
    };

    // No Secret yet: the Topic names it and nothing is sent, to nameservers or brokers.
    assert!(
        operator::reconcile::topic::reconcile(topic.clone(), ctx.clone())
            .await
            .is_err()
    );
    assert!(admin.calls().is_empty(), "{:?}", admin.calls());
    let stored = refetch(&api, &*topic);
    let cond = conditions::find(
        &stored.status.as_ref().unwrap().conditions,
        conditions::READY,
    )
    .unwrap();
    assert_eq!(cond.reason, REASON);
    assert!(cond.message.contains(NS_SECRET_NAME), "{}", cond.message);

    // With it, every nameserver call is signed with the NameServer's account and the
    // brokers' calls are not (this Broker names no adminCredentials).
    account_secret(
        &api,
        NS_SECRET_NAME,
        &namesrv_credentials(),
        &["accessKey", "secretKey"],
    );
    operator::reconcile::topic::reconcile(refetch(&api, &*topic), ctx.clone())
        .await
        .unwrap();
    let calls = namesrv_calls(&admin);
    assert!(calls.iter().any(|(c, _)| c.starts_with("cluster_info")));
    for (call, signed) in &calls {
        assert_eq!(signed.as_ref(), Some(&namesrv_credentials()), "{call}");
    }
    assert!(broker_calls(&admin).iter().all(|(_, s)| s.is_none()));

    // Deleting it removes the topic from the nameservers' routes, signed.
    delete_and_reconcile(&api, &admin, &topic, ctx).await;
    let deletes: Vec<_> = namesrv_calls(&admin)
        .into_iter()
        .filter(|(c, _)| c.starts_with("delete_topic_in_namesrv"))
        .collect();
    assert!(!deletes.is_empty());
    assert!(
        deletes
            .iter()
            .all(|(_, s)| s.as_ref() == Some(&namesrv_credentials()))
    );
    assert_not_leaked(&api);
}

#[tokio::test]
async fn admin_calls_to_pods_serving_tls_go_over_tls_or_not_at_all() {
    let c = replicating(7000).await;
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"security": {"tls": {"secretName": "team-tls"}}}}),
    );
    c.admin.take_calls();
    let ctx = c.ctx();
    let reason = |c: &crate::broker_flow::Cluster| {
        let status = c.status();
        let cond = conditions::find(&status.conditions, conditions::READY).unwrap();
        (cond.reason.clone(), cond.message.clone())
    };

    // No Secret: the condition names it, and nothing goes to the pods in plaintext.
    let err = c.reconcile_in(&ctx).await.unwrap_err();
    assert!(err.to_string().contains("team-tls"), "{err}");
    assert!(c.admin.calls().is_empty(), "{:?}", c.admin.calls());
    let (why, message) = reason(&c);
    assert_eq!(why, TLS_REASON);
    assert!(
        message.contains("spec.security.tls") && message.contains("team-tls"),
        "{message}"
    );

    // A Secret without ca.crt: the condition names the key.
    crate::secret_flow::insert_secret(&c.api, "team-tls", &[("tls.crt", "x"), ("tls.key", "y")]);
    let err = c.reconcile_in(&ctx).await.unwrap_err();
    assert!(err.to_string().contains("ca.crt"), "{err}");
    assert!(c.admin.calls().is_empty());

    // One that does not parse: named, never quoted.
    crate::secret_flow::insert_secret(&c.api, "team-tls", &[("ca.crt", "not-a-ca-4d1e")]);
    let err = c.reconcile_in(&ctx).await.unwrap_err();
    assert!(err.to_string().contains("team-tls"), "{err}");
    assert!(!reason(&c).1.contains("not-a-ca-4d1e"));
    assert!(c.admin.calls().is_empty());

    // The real Secret: every call to the pods goes over TLS.
    crate::secret_flow::insert_tls_secret(&c.api, "team-tls");
    c.reconcile_in(&ctx).await.unwrap();
    let calls = c.admin.tls_calls();
    assert!(!calls.is_empty());
    for (call, tls) in &calls {
        assert!(*tls, "{call} in plaintext");
    }
    assert_ne!(reason(&c).0, TLS_REASON);
}

#[tokio::test]
async fn a_topic_reaches_tls_nameservers_over_tls_and_plaintext_brokers_in_plaintext() {
    let (api, admin) = crate::topic_flow::cluster();
    let ctx = context(&api, &admin);
    crate::secret_flow::insert_tls_secret(&api, "ns-tls");
    api.edit::<NameServer>(
        NS,
        "rmq-ha",
        json!({"spec": {"security": {"tls": {"secretName": "ns-tls"}}}}),
    );
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    operator::reconcile::topic::reconcile(topic, ctx)
        .await
        .unwrap();
    let calls = admin.tls_calls();
    assert!(calls.iter().any(|(c, _)| c.contains(":9876")), "{calls:?}");
    assert!(calls.iter().any(|(c, _)| !c.contains(":9876")), "{calls:?}");
    for (call, tls) in &calls {
        assert_eq!(*tls, call.contains(":9876"), "{call}");
    }
}
