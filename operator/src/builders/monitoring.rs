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

/// The labels of a monitoring object: the configured extra labels, then the operator's own
/// (which win, so an extra label can never detach the object from its owner's selectors).
pub fn monitoring_labels(
    own: &BTreeMap<String, String>,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = extra.clone();
    out.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
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

/// Alerts scoped to one Broker cluster. Only what the chart's cluster-wide PrometheusRule
/// cannot say: the chart holds the failover, lag, dispatch and disk alerts (one set of
/// thresholds, configured in its values), so nothing here duplicates them.
pub fn broker_rules(
    name: &str,
    namespace: &str,
    headless_service: &str,
    labels: &BTreeMap<String, String>,
    owner: Option<OwnerReference>,
    runbook_base_url: &str,
) -> DynamicObject {
    let mut obj = DynamicObject::new(name, &prometheus_rule_resource()).within(namespace);
    obj.metadata = meta(name, namespace, labels, owner);
    let sel = format!(r#"namespace="{namespace}",service="{headless_service}""#);
    let runbooks = runbook_base_url.trim_end_matches('/');
    obj.data = json!({
        "spec": {
            "groups": [{
                "name": format!("rmq-broker-{name}"),
                "rules": [
                    {
                        "alert": "RocketMQBrokerDown",
                        "expr": format!(r#"up{{{sel}}} == 0"#),
                        "for": "2m",
                        "labels": { "severity": "critical" },
                        "annotations": {
                            "summary": "Broker {{ $labels.pod }} is not scrapeable",
                            "runbook_url": format!("{runbooks}/broker-down.md"),
                        }
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
