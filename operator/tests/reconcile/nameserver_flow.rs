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

/// For NameServers: the ACL and TLS Secrets are mounted read-only, namesrv.conf
/// names their paths, and no value reaches a ConfigMap, a StatefulSet, the status or an
/// Event.
#[tokio::test]
async fn acl_and_tls_secrets_are_mounted_and_their_values_copied_nowhere() {
    use crate::secret_flow::{base64_of, insert_secret};

    let api = FakeApi::new();
    let ctx = context(&api, &FakeAdmin::new());
    let acl_text =
        "accounts:\n- accessKey: broker\n  secretKey: ns-acl-value-4d1e\n  admin: true\n";
    let key_text = "-----BEGIN PRIVATE KEY-----ns-tls-key-value-c07a-----END PRIVATE KEY-----";
    insert_secret(&api, "ns-acl", &[("acl.yaml", acl_text)]);
    insert_secret(
        &api,
        "ns-tls",
        &[("tls.key", key_text), ("tls.crt", ""), ("ca.crt", "")],
    );
    let mut ns: NameServer = example("ha.yaml", "NameServer", "rmq-ha");
    ns.spec.security = serde_json::from_value(json!({
        "acl": {"name": "ns-acl", "key": "acl.yaml"},
        "tls": {"secretName": "ns-tls", "requireClientCertificates": true},
    }))
    .unwrap();
    let ns = seed(&api, &ns);
    reconcile(ns.clone(), ctx).await.unwrap();

    let sts = api.get::<StatefulSet>(NS, "rmq-ha-nameserver").unwrap();
    let pod = sts.spec.as_ref().unwrap().template.spec.clone().unwrap();
    let volume = |name: &str| {
        pod.volumes
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .and_then(|v| v.secret.clone())
            .unwrap_or_else(|| panic!("secret volume {name}"))
    };
    let acl = volume("acl");
    assert_eq!(acl.secret_name.as_deref(), Some("ns-acl"));
    assert_eq!(acl.items.unwrap()[0].key, "acl.yaml");
    assert_eq!(volume("tls").secret_name.as_deref(), Some("ns-tls"));
    let mounts = pod.containers[0].volume_mounts.clone().unwrap();
    for (name, path) in [("acl", "/etc/rocketmq-acl"), ("tls", "/etc/rocketmq-tls")] {
        let m = mounts.iter().find(|m| m.name == name).unwrap();
        assert_eq!((m.mount_path.as_str(), m.read_only), (path, Some(true)));
    }

    let cm = api
        .get::<ConfigMap>(NS, "rmq-ha-nameserver-config")
        .unwrap();
    let conf = &cm.data.unwrap()["namesrv.conf"];
    for line in [
        "aclEnable=true\n",
        "aclFile=/etc/rocketmq-acl/acl.yaml\n",
        "tls.server.mode=permissive\n",
        "tls.server.certPath=/etc/rocketmq-tls/tls.crt\n",
        "tls.server.keyPath=/etc/rocketmq-tls/tls.key\n",
        "tls.server.trustCertPath=/etc/rocketmq-tls/ca.crt\n",
        "tls.server.need.client.auth=require\n",
    ] {
        assert!(conf.contains(line), "{line} in {conf}");
    }
    // Client-side keys are the broker's; the nameserver dials nobody.
    assert!(!conf.contains("tls.client."), "{conf}");

    let mut written = String::new();
    for cm in api.list::<ConfigMap>(NS) {
        written.push_str(&serde_json::to_string(&cm).unwrap());
    }
    for sts in api.list::<StatefulSet>(NS) {
        written.push_str(&serde_json::to_string(&sts).unwrap());
    }
    written.push_str(&serde_json::to_string(&*refetch(&api, &*ns)).unwrap());
    for (t, r, note) in api.events() {
        written.push_str(&format!("{t} {r} {note}\n"));
    }
    for value in ["ns-acl-value-4d1e", "ns-tls-key-value-c07a"] {
        assert!(!written.contains(value), "{value} leaked");
        assert!(!written.contains(&base64_of(value.as_bytes())));
    }
}

/// Turning TLS on changes namesrv.conf and so the pod template's config hash: the
/// nameservers restart with the certificate instead of waiting for an unrelated change.
#[test]
fn security_changes_restart_the_nameservers() {
    use operator::builders::{Settings, nameserver};
    let hash = |ns: &NameServer| {
        nameserver::build(ns, &Settings::default(), true)
            .statefulset
            .spec
            .unwrap()
            .template
            .metadata
            .unwrap()
            .annotations
            .unwrap()["rmq-rs.dev/config-hash"]
            .clone()
    };
    let plain: NameServer = example("minimal.yaml", "NameServer", "rmq");
    let mut tls = plain.clone();
    tls.spec.security.tls = Some(operator::crd::TlsSpec {
        secret_name: "ns-tls".to_owned(),
        require_client_certificates: false,
        mode: operator::crd::TlsMode::Permissive,
    });
    assert_ne!(hash(&plain), hash(&tls));
}
