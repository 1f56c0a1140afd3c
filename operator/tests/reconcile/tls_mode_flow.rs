//! `spec.security.tls.mode: enforcing`: a Broker and its NameServer reconcile into
//! configs that refuse plaintext (`tls.server.mode=enforcing`), the brokers dial their
//! nameservers and master over TLS (`tls.enable=true`), the probes stay on HTTP, and a
//! pair of specs that would leave the brokers unable to register is refused with
//! `Ready=False` `TlsPeerMismatch`, saying why.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::ConfigMap;
use operator::conditions;
use operator::crd::{Broker, NameServer};
use operator::reconcile::broker::reconcile as reconcile_broker;
use operator::reconcile::nameserver::reconcile as reconcile_nameserver;
use serde_json::json;

use crate::broker_flow::Cluster;
use crate::secret_flow::insert_tls_secret;
use crate::{NS, refetch};

fn ready(c: &Cluster) -> (String, String, String) {
    let status = c.status();
    let cond = conditions::find(&status.conditions, conditions::READY).unwrap();
    (
        cond.status.clone(),
        cond.reason.clone(),
        cond.message.clone(),
    )
}

async fn reconcile(c: &Cluster) {
    reconcile_broker(refetch(&c.api, &c.broker), c.ctx())
        .await
        .unwrap();
}

fn set_tls(c: &Cluster, kind: &str, tls: serde_json::Value) {
    let patch = json!({"spec": {"security": {"tls": tls}}});
    match kind {
        "Broker" => c.api.edit::<Broker>(NS, "rmq-ha", patch),
        _ => c.api.edit::<NameServer>(NS, "rmq-ha", patch),
    }
}

#[tokio::test]
async fn enforcing_pairs_render_tls_only_configs_and_mismatches_are_refused() {
    let c = Cluster::started().await;
    insert_tls_secret(&c.api, "team-tls");
    let enforcing = json!({"secretName": "team-tls", "mode": "enforcing"});

    // The NameServer enforces, the Broker does not: its registrations would be refused.
    set_tls(&c, "NameServer", enforcing.clone());
    reconcile(&c).await;
    let (status, reason, message) = ready(&c);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "TlsPeerMismatch")
    );
    assert!(
        message.contains("NameServer rmq-ha") && message.contains("enforcing"),
        "{message}"
    );
    assert!(
        c.api
            .events()
            .iter()
            .any(|(t, r, _)| t == "Warning" && r == "TlsPeerMismatch")
    );

    // Both enforce: TLS-only configs, brokers dial TLS, probes on HTTP.
    set_tls(&c, "Broker", enforcing.clone());
    reconcile(&c).await;
    assert_ne!(ready(&c).1, "TlsPeerMismatch");
    let cm = c.api.get::<ConfigMap>(NS, "rmq-ha-0-config").unwrap();
    let conf = &cm.data.unwrap()["rmq-ha-0-0.conf"];
    for line in [
        "tls.server.mode=enforcing",
        "tls.enable=true",
        "tls.client.trustCertPath=/etc/rocketmq-tls/ca.crt",
    ] {
        assert!(conf.lines().any(|l| l == line), "{line} in {conf}");
    }
    let sts = c.api.get::<StatefulSet>(NS, "rmq-ha-0").unwrap();
    let container = &sts.spec.unwrap().template.spec.unwrap().containers[0];
    for probe in [&container.liveness_probe, &container.readiness_probe] {
        let probe = probe.as_ref().expect("probe");
        assert!(probe.http_get.is_some(), "{probe:?}");
        assert_eq!(
            probe
                .http_get
                .as_ref()
                .unwrap()
                .scheme
                .as_deref()
                .unwrap_or("HTTP"),
            "HTTP"
        );
    }
    let ns = refetch(&c.api, &c.api.get::<NameServer>(NS, "rmq-ha").unwrap());
    reconcile_nameserver(ns, c.ctx()).await.unwrap();
    let cm = c
        .api
        .get::<ConfigMap>(NS, "rmq-ha-nameserver-config")
        .unwrap();
    let conf = &cm.data.unwrap()["namesrv.conf"];
    assert!(
        conf.lines().any(|l| l == "tls.server.mode=enforcing"),
        "{conf}"
    );

    // The Broker enforces, the NameServer serves no TLS: its brokers could not register.
    c.api
        .edit::<NameServer>(NS, "rmq-ha", json!({"spec": {"security": {"tls": null}}}));
    reconcile(&c).await;
    let (status, reason, message) = ready(&c);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "TlsPeerMismatch")
    );
    assert!(message.contains("serves no TLS"), "{message}");

    // Permissive on both sides is accepted as before.
    set_tls(
        &c,
        "Broker",
        json!({"secretName": "team-tls", "mode": "permissive"}),
    );
    reconcile(&c).await;
    assert_ne!(ready(&c).1, "TlsPeerMismatch");
    let cm = c.api.get::<ConfigMap>(NS, "rmq-ha-0-config").unwrap();
    let conf = &cm.data.unwrap()["rmq-ha-0-0.conf"];
    assert!(
        conf.lines().any(|l| l == "tls.server.mode=permissive"),
        "{conf}"
    );
    assert!(!conf.lines().any(|l| l == "tls.enable=true"), "{conf}");
}
