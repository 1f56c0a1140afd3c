//! Optional Prometheus-operator objects (`monitoring.coreos.com/v1` ServiceMonitor and
//! PrometheusRule), built as dynamic objects so the operator needs no compile-time
//! dependency on those CRDs and creates them only when the cluster has them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

pub fn service_monitor_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    )
}

pub fn prometheus_rule_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "PrometheusRule"),
        "prometheusrules",
    )
}

/// A ServiceMonitor scraping the `http` port of Services matching `selector`.
pub fn service_monitor(
    name: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    selector: &BTreeMap<String, String>,
    interval: &str,
    owner: Option<OwnerReference>,
) -> DynamicObject {
    let mut obj = DynamicObject::new(name, &service_monitor_resource()).within(namespace);
    obj.metadata = meta(name, namespace, labels, owner);
    obj.data = json!({
        "spec": {
            "selector": { "matchLabels": selector },
            "namespaceSelector": { "matchNames": [namespace] },
            "endpoints": [{ "port": "http", "path": "/metrics", "interval": interval }],
        }
    });
    obj
}

/// Default alerts for one Broker cluster: a broker down, dispatch falling behind, and a
/// slave lagging its master. Broker metric names follow RocketMQ 5.x so existing
/// dashboards carry over; the lag comes from the operator's own metrics.
pub fn broker_rules(
    name: &str,
    namespace: &str,
    cluster: &str,
    headless_service: &str,
    labels: &BTreeMap<String, String>,
    owner: Option<OwnerReference>,
) -> DynamicObject {
    let mut obj = DynamicObject::new(name, &prometheus_rule_resource()).within(namespace);
    obj.metadata = meta(name, namespace, labels, owner);
    let sel = format!(r#"namespace="{namespace}",service="{headless_service}""#);
    let op_sel = format!(r#"resource_namespace="{namespace}",broker="{cluster}""#);
    obj.data = json!({
        "spec": {
            "groups": [{
                "name": format!("rmq-broker-{cluster}"),
                "rules": [
                    {
                        "alert": "RocketMQBrokerDown",
                        "expr": format!(r#"up{{{sel}}} == 0"#),
                        "for": "2m",
                        "labels": { "severity": "critical" },
                        "annotations": { "summary": "Broker {{ $labels.pod }} is not scrapeable" }
                    },
                    {
                        "alert": "RocketMQDispatchBehind",
                        "expr": format!(r#"rocketmq_storage_dispatch_behind_bytes{{{sel}}} > 104857600"#),
                        "for": "10m",
                        "labels": { "severity": "warning" },
                        "annotations": { "summary": "Broker {{ $labels.pod }} dispatch is more than 100 MiB behind" }
                    },
                    {
                        "alert": "RocketMQReplicationLag",
                        "expr": format!(r#"rmq_operator_replication_lag_bytes{{{op_sel}}} > 104857600"#),
                        "for": "10m",
                        "labels": { "severity": "warning" },
                        "annotations": { "summary": "Slave {{ $labels.pod }} is more than 100 MiB behind its master" }
                    }
                ]
            }]
        }
    });
    obj
}

fn meta(
    name: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    owner: Option<OwnerReference>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels.clone()),
        owner_references: owner.map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}
