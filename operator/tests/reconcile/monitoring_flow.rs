//! Turning the ServiceMonitor / PrometheusRule off deletes them; the
//! per-Broker rule links runbooks and does not duplicate the chart's rules.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use operator::builders::Settings;
use operator::builders::monitoring::{prometheus_rule_resource, service_monitor_resource};
use operator::crd::Broker;
use operator::metrics::Metrics;
use operator::reconcile::Context;
use serde_json::json;

use crate::NS;
use crate::broker_flow::Cluster;

async fn exists(c: &Cluster, rule: bool) -> Option<DynamicObject> {
    let resource = if rule {
        prometheus_rule_resource()
    } else {
        service_monitor_resource()
    };
    let api: Api<DynamicObject> = Api::namespaced_with(c.api.client(), NS, &resource);
    api.get_opt("rmq-ha-broker").await.unwrap()
}

#[tokio::test]
async fn turning_monitoring_off_deletes_the_objects() {
    let c = Cluster::started().await;
    assert!(exists(&c, false).await.is_some());
    let rule = exists(&c, true).await.expect("PrometheusRule");
    let rules = &rule.data["spec"]["groups"][0]["rules"];
    for r in rules.as_array().unwrap() {
        assert!(
            r["annotations"]["runbook_url"]
                .as_str()
                .is_some_and(|u| u.ends_with(".md")),
            "{r}"
        );
    }
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"metrics": {"serviceMonitor": false, "prometheusRule": false}}}),
    );
    c.reconcile().await;
    assert!(exists(&c, false).await.is_none());
    assert!(exists(&c, true).await.is_none());
}

/// The configured extra labels (kube-prometheus-stack selects rules and
/// monitors by label) reach both objects, and cannot replace the operator's own labels.
#[tokio::test]
async fn monitoring_objects_carry_the_configured_extra_labels() {
    let c = Cluster::started().await;
    let settings = Settings {
        monitoring_labels: BTreeMap::from([
            ("release".to_owned(), "kube-prometheus".to_owned()),
            (
                "app.kubernetes.io/instance".to_owned(),
                "hijacked".to_owned(),
            ),
        ]),
        ..Settings::default()
    };
    let ctx = Arc::new(Context::new(
        c.api.client(),
        settings,
        Arc::new(c.admin.clone()),
        Arc::new(Metrics::default()),
        true,
    ));
    c.reconcile_in(&ctx).await.unwrap();
    for rule in [false, true] {
        let obj = exists(&c, rule).await.expect("object");
        let labels = obj.metadata.labels.unwrap();
        assert_eq!(
            labels.get("release").map(String::as_str),
            Some("kube-prometheus")
        );
        assert_eq!(
            labels.get("app.kubernetes.io/instance").map(String::as_str),
            Some("rmq-ha")
        );
    }
}
