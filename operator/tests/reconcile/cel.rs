//! The CRDs' CEL rules evaluated offline (kube-cel, the evaluator behind kube's `cel`
//! feature) on the generated schemas, for creation and for updates (`oldSelf`).

use kube::CustomResourceExt;
use operator::crd::{Broker, NameServer, OPERATOR_OWNED_KEYS, Topic};
use serde_json::{Value, json};

fn schema<K: CustomResourceExt>() -> Value {
    let crd = K::crd();
    serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap()
}

/// Messages of the rules `object` violates (creation when `old` is None).
fn violations<K: CustomResourceExt>(object: &Value, old: Option<&Value>) -> Vec<String> {
    match kube_cel::validate(&schema::<K>(), object, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.into_vec().into_iter().map(|e| e.message).collect(),
    }
}

fn broker(spec: Value) -> Value {
    let mut base = json!({
        "apiVersion": "rmq-rs.dev/v1alpha1", "kind": "Broker",
        "metadata": {"name": "b"},
        "spec": {
            "nameServerRef": {"name": "ns"}, "groups": 2, "replicasPerGroup": 2,
            "replication": {"ackMode": "Async"}, "flushDiskType": "AsyncFlush",
            "failover": {"policy": "Manual", "unavailableFor": "30s", "maxLagBytes": 0, "allowUnclean": false},
            "storage": {"size": "10Gi", "storageClassName": "fast", "deleteClaim": false},
            "config": {}, "metrics": {"port": 8080, "serviceMonitor": false, "prometheusRule": false, "interval": "30s"},
            "pod": {}, "pdb": {"enabled": true, "maxUnavailable": 1}, "image": {}
        }
    });
    operator_merge(&mut base["spec"], &spec);
    base
}

fn operator_merge(target: &mut Value, patch: &Value) {
    if let (Some(t), Some(p)) = (target.as_object_mut(), patch.as_object()) {
        for (k, v) in p {
            if v.is_object() && t.get(k).is_some_and(Value::is_object) {
                operator_merge(t.get_mut(k).unwrap(), v);
            } else {
                t.insert(k.clone(), v.clone());
            }
        }
    }
}

#[test]
fn valid_broker_passes_create_and_update() {
    let b = broker(json!({}));
    assert_eq!(violations::<Broker>(&b, None), Vec::<String>::new());
    let grown = broker(json!({"groups": 3, "storage": {"size": "20Gi"}}));
    assert_eq!(violations::<Broker>(&grown, Some(&b)), Vec::<String>::new());
}

#[test]
fn every_operator_owned_broker_key_is_rejected() {
    for key in OPERATOR_OWNED_KEYS {
        let b = broker(json!({"config": {*key: "x"}}));
        let v = violations::<Broker>(&b, None);
        assert!(
            v.iter().any(|m| m.contains("operator owns")),
            "{key} accepted: {v:?}"
        );
    }
    assert!(
        violations::<Broker>(&broker(json!({"config": {"maxMessageSize": "1"}})), None).is_empty()
    );
}

#[test]
fn sync_replication_needs_a_slave() {
    let b = broker(json!({"replicasPerGroup": 1, "replication": {"ackMode": "Sync"}}));
    let v = violations::<Broker>(&b, None);
    assert!(v.iter().any(|m| m.contains("SYNC_MASTER")), "{v:?}");
}

#[test]
fn groups_and_storage_only_grow_and_class_is_immutable() {
    let old = broker(json!({}));
    let v = violations::<Broker>(&broker(json!({"groups": 1})), Some(&old));
    assert!(
        v.iter().any(|m| m.contains("groups cannot shrink")),
        "{v:?}"
    );
    let v = violations::<Broker>(&broker(json!({"storage": {"size": "5Gi"}})), Some(&old));
    assert!(v.iter().any(|m| m.contains("may only grow")), "{v:?}");
    let v = violations::<Broker>(
        &broker(json!({"storage": {"storageClassName": "slow"}})),
        Some(&old),
    );
    assert!(v.iter().any(|m| m.contains("immutable")), "{v:?}");
}

#[test]
fn nameserver_config_cannot_set_owned_keys() {
    let ns = |config: Value| {
        json!({"apiVersion": "rmq-rs.dev/v1alpha1", "kind": "NameServer", "metadata": {"name": "n"},
               "spec": {"replicas": 1, "config": config}})
    };
    assert!(violations::<NameServer>(&ns(json!({"orderMessageEnable": "true"})), None).is_empty());
    for key in ["listenPort", "metricsPort", "kvConfigPath"] {
        assert!(
            !violations::<NameServer>(&ns(json!({key: "1"})), None).is_empty(),
            "{key}"
        );
    }
}

#[test]
fn topic_name_and_broker_ref_are_immutable() {
    let topic = |name: &str, broker: &str| {
        json!({"apiVersion": "rmq-rs.dev/v1alpha1", "kind": "Topic", "metadata": {"name": "t"},
               "spec": {"topicName": name, "brokerRef": {"name": broker}, "readQueues": 8,
                        "writeQueues": 8, "perm": "ReadWrite", "order": false}})
    };
    let old = topic("A_B", "c");
    assert!(violations::<Topic>(&topic("A_B", "c"), Some(&old)).is_empty());
    let v = violations::<Topic>(&topic("A_C", "c"), Some(&old));
    assert!(
        v.iter().any(|m| m.contains("topicName is immutable")),
        "{v:?}"
    );
    let v = violations::<Topic>(&topic("A_B", "d"), Some(&old));
    assert!(
        v.iter().any(|m| m.contains("brokerRef is immutable")),
        "{v:?}"
    );
}

#[test]
fn a_topic_name_rocketmq_cannot_hold_needs_spec_topic_name() {
    let crd = operator::crd::topic_crd();
    let schema = serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap();
    let topic = |name: &str, spec: Value| {
        let mut t = json!({
            "apiVersion": "rmq-rs.dev/v1alpha1", "kind": "Topic",
            "metadata": {"name": name},
            "spec": {"brokerRef": {"name": "b"}, "readQueues": 4, "writeQueues": 4}
        });
        operator_merge(&mut t["spec"], &spec);
        t
    };
    let check = |t: &Value| match kube_cel::validate(&schema, t, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .into_vec()
            .into_iter()
            .map(|e| e.message)
            .collect::<Vec<_>>(),
    };
    assert!(check(&topic("payments", json!({}))).is_empty());
    let dotted = check(&topic("payments.eu", json!({})));
    assert!(
        dotted.iter().any(|m| m.contains("spec.topicName")),
        "{dotted:?}"
    );
    assert!(check(&topic("payments.eu", json!({"topicName": "PAYMENTS_EU"}))).is_empty());
}

#[test]
fn a_nodeport_listener_needs_an_advertised_host() {
    let without = broker(json!({"listener": {"type": "nodeport"}}));
    let errors = violations::<Broker>(&without, None);
    assert!(
        errors.iter().any(|e| e.contains("advertisedHost")),
        "{errors:?}"
    );
    let with =
        broker(json!({"listener": {"type": "nodeport", "advertisedHost": "nodes.example.com"}}));
    assert!(violations::<Broker>(&with, None).is_empty());
    let lb = broker(json!({"listener": {"type": "loadbalancer"}}));
    assert!(violations::<Broker>(&lb, None).is_empty());
}
