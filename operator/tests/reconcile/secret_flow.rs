//! Secrets of a Broker: the generated HA secret and the Secrets
//! a spec names are referenced from the pods, never copied anywhere the operator writes.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Secret};
use operator::crd::Broker;
use serde_json::json;

use crate::NS;
use crate::broker_flow::Cluster;
use crate::fake_api::FakeApi;

fn broker_container(sts: &StatefulSet) -> Container {
    sts.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .clone()
}

/// `(secret, key)` the container's env var `var` comes from.
fn env_secret(c: &Container, var: &str) -> Option<(String, String)> {
    let e = c.env.as_ref()?.iter().find(|e| e.name == var)?;
    assert!(e.value.is_none(), "{var} must not carry a literal value");
    let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
    Some((r.name.clone(), r.key.clone()))
}

fn ha_secret_value(c: &Cluster) -> String {
    let secret = c
        .api
        .get::<Secret>(NS, "rmq-ha-ha-secret")
        .expect("generated");
    let bytes = secret.data.unwrap()["haSecret"].0.clone();
    String::from_utf8(bytes).unwrap()
}

/// Everything the operator wrote that is not a Secret, as text: ConfigMaps, the Broker
/// with its status, StatefulSets and Events.
fn everything_but_secrets(c: &Cluster) -> String {
    let mut out = String::new();
    for cm in c.api.list::<ConfigMap>(NS) {
        out.push_str(&serde_json::to_string(&cm).unwrap());
    }
    for sts in c.api.list::<StatefulSet>(NS) {
        out.push_str(&serde_json::to_string(&sts).unwrap());
    }
    out.push_str(&serde_json::to_string(&c.api.get::<Broker>(NS, "rmq-ha").unwrap()).unwrap());
    for (t, r, note) in c.api.events() {
        out.push_str(&format!("{t} {r} {note}\n"));
    }
    out
}

#[tokio::test]
async fn a_broker_without_an_ha_secret_gets_a_generated_one_that_is_never_rotated() {
    let c = Cluster::started().await;
    let value = ha_secret_value(&c);
    assert!(
        value.len() >= 64,
        "32 random bytes, hex: {} chars",
        value.len()
    );
    let secret = c.api.get::<Secret>(NS, "rmq-ha-ha-secret").unwrap();
    let owner = &secret.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Broker", "rmq-ha")
    );
    assert_eq!(secret.immutable, Some(true));

    // Every broker container takes it through a secretKeyRef.
    for g in 0..2 {
        let sts = c
            .api
            .get::<StatefulSet>(NS, &format!("rmq-ha-{g}"))
            .unwrap();
        assert_eq!(
            env_secret(&broker_container(&sts), "RMQ_HA_SECRET"),
            Some(("rmq-ha-ha-secret".to_owned(), "haSecret".to_owned()))
        );
    }
    assert!(
        c.api
            .events()
            .iter()
            .any(|(_, r, _)| r == "HaSecretGenerated")
    );

    // Later reconciles leave it exactly as it is.
    let rv = c
        .api
        .get::<Secret>(NS, "rmq-ha-ha-secret")
        .unwrap()
        .metadata
        .resource_version;
    for _ in 0..3 {
        c.reconcile().await;
    }
    assert_eq!(ha_secret_value(&c), value);
    assert_eq!(
        c.api
            .get::<Secret>(NS, "rmq-ha-ha-secret")
            .unwrap()
            .metadata
            .resource_version,
        rv
    );

    // The value (or its base64 form) is nowhere but in the Secret.
    let written = everything_but_secrets(&c);
    let b64 = base64_of(value.as_bytes());
    assert!(!written.contains(&value));
    assert!(!written.contains(&b64));
}

#[tokio::test]
async fn a_named_ha_secret_is_referenced_and_none_is_generated() {
    let c = Cluster::started().await;
    c.api.remove::<Secret>(NS, "rmq-ha-ha-secret");
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"security": {"haSecret": {"name": "team-ha", "key": "secret"}}}}),
    );
    c.reconcile().await;
    assert!(c.api.get::<Secret>(NS, "rmq-ha-ha-secret").is_none());
    let sts = c.api.get::<StatefulSet>(NS, "rmq-ha-0").unwrap();
    assert_eq!(
        env_secret(&broker_container(&sts), "RMQ_HA_SECRET"),
        Some(("team-ha".to_owned(), "secret".to_owned()))
    );
}

pub fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Stores Secret `name` in the test namespace with `data` (key, plain value).
pub fn insert_secret(api: &FakeApi, name: &str, data: &[(&str, &str)]) {
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(base64_of(v.as_bytes()))))
        .collect();
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": data,
    }))
    .unwrap();
    api.insert(&secret);
}

/// A `kubernetes.io/tls` Secret `name` as cert-manager writes it: a CA, and a certificate
/// it signed for the pods' DNS names. Returns the private key's PEM.
pub fn insert_tls_secret(api: &FakeApi, name: &str) -> String {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![format!(
        "*.rmq-ha-broker-headless.{NS}.svc.cluster.local"
    )])
    .unwrap()
    .signed_by(&key, &ca, &ca_key)
    .unwrap();
    let key_pem = key.serialize_pem();
    insert_secret(
        api,
        name,
        &[
            ("tls.crt", &cert.pem()),
            ("tls.key", &key_pem),
            ("ca.crt", &ca.pem()),
        ],
    );
    key_pem
}

#[tokio::test]
async fn acl_and_tls_secrets_are_mounted_and_their_values_copied_nowhere() {
    let c = Cluster::started().await;
    let acl_text = "accounts:\n- accessKey: shop\n  secretKey: acl-value-7f3a9c\n";
    insert_secret(&c.api, "team-acl", &[("plain_acl.yml", acl_text)]);
    let key_pem = insert_tls_secret(&c.api, "team-tls");
    // A line of the key's base64 body: found anywhere, the key leaked.
    let key_line = key_pem.lines().nth(1).unwrap().to_owned();
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"security": {
            "acl": {"name": "team-acl"},
            "tls": {"secretName": "team-tls", "requireClientCertificates": true},
        }}}),
    );
    c.reconcile().await;

    let sts = c.api.get::<StatefulSet>(NS, "rmq-ha-0").unwrap();
    let pod = sts.spec.as_ref().unwrap().template.spec.clone().unwrap();
    let volume = |name: &str| {
        pod.volumes
            .as_ref()
            .unwrap()
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.secret.clone())
            .unwrap_or_else(|| panic!("secret volume {name}"))
    };
    assert_eq!(volume("acl").secret_name.as_deref(), Some("team-acl"));
    assert_eq!(volume("tls").secret_name.as_deref(), Some("team-tls"));
    let mounts = broker_container(&sts).volume_mounts.unwrap();
    for (name, path) in [("acl", "/etc/rocketmq-acl"), ("tls", "/etc/rocketmq-tls")] {
        let m = mounts.iter().find(|m| m.name == name).unwrap();
        assert_eq!((m.mount_path.as_str(), m.read_only), (path, Some(true)));
    }
    // broker.conf names the mounted paths, nothing more.
    let cm = c.api.get::<ConfigMap>(NS, "rmq-ha-0-config").unwrap();
    let conf = &cm.data.unwrap()["rmq-ha-0-0.conf"];
    for line in [
        "aclEnable=true",
        "aclFile=/etc/rocketmq-acl/plain_acl.yml",
        "tls.server.mode=permissive",
        "tls.server.keyPath=/etc/rocketmq-tls/tls.key",
        "tls.server.need.client.auth=require",
    ] {
        assert!(conf.contains(line), "{line} in {conf}");
    }
    let written = everything_but_secrets(&c);
    for value in ["acl-value-7f3a9c", key_line.as_str()] {
        assert!(!written.contains(value), "{value} leaked");
    }
    // The generated HA secret's value is not among them either.
    assert!(!written.contains(&ha_secret_value(&c)));
}

#[tokio::test]
async fn each_group_gets_a_network_policy_that_follows_the_spec() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let c = Cluster::started().await;
    for g in 0..2 {
        let np = c
            .api
            .get::<NetworkPolicy>(NS, &format!("rmq-ha-{g}"))
            .expect("one per group");
        let spec = np.spec.unwrap();
        let ha = &spec.ingress.unwrap()[0];
        let from = ha.from.as_ref().unwrap();
        assert_eq!(
            from[0]
                .pod_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()["rmq-rs.dev/broker-name"],
            format!("rmq-ha-{g}")
        );
    }
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"security": {"networkPolicy": {"enabled": false}}}}),
    );
    c.reconcile().await;
    assert!(c.api.get::<NetworkPolicy>(NS, "rmq-ha-0").is_none());
}
