//! Offline rendering of everything the operator would create for a set of custom
//! resources (`rmq-operator render`): a dry run for users, and the input of the CI check
//! that validates builder output against the Kubernetes OpenAPI schemas.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::builders::broker::{self, BrokerInputs};
use crate::builders::monitoring::{broker_rules, service_monitor};
use crate::builders::{Settings, listener, nameserver};
use crate::crd::{Broker, NameServer, Topic};
use crate::names::{BrokerNames, NameServerNames, headless_selector, object_labels};

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("invalid YAML document: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("document {index}: unsupported kind {kind:?} (expected NameServer, Broker or Topic)")]
    UnsupportedKind { index: usize, kind: String },
    #[error("Broker {broker} references NameServer {nameserver}, which is not in the input")]
    MissingNameServer { broker: String, nameserver: String },
}

/// Renders the objects for every NameServer and Broker in `input` (a multi-document YAML
/// stream); Topics are accepted and produce nothing (they live on the brokers).
pub fn render(input: &str, settings: &Settings) -> Result<String, RenderError> {
    let mut nameservers = Vec::new();
    let mut brokers = Vec::new();
    for (index, doc) in serde_yaml::Deserializer::from_str(input).enumerate() {
        let value = serde_yaml::Value::deserialize(doc)?;
        if value.is_null() {
            continue;
        }
        let kind = value
            .get("kind")
            .and_then(serde_yaml::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "NameServer" => {
                nameservers.push(with_namespace(serde_yaml::from_value::<NameServer>(value)?))
            }
            "Broker" => brokers.push(with_namespace(serde_yaml::from_value::<Broker>(value)?)),
            "Topic" => {
                serde_yaml::from_value::<Topic>(value)?;
            }
            _ => return Err(RenderError::UnsupportedKind { index, kind }),
        }
    }

    let mut docs: Vec<serde_yaml::Value> = Vec::new();
    let mut addrs = BTreeMap::new();
    for ns in &nameservers {
        let names = NameServerNames::of(ns);
        addrs.insert(
            (names.namespace.clone(), names.instance.clone()),
            names
                .addresses(ns.spec.replicas, &settings.cluster_domain)
                .join(";"),
        );
        // Rendered as it runs once its Brokers sign registrations.
        let o = nameserver::build(ns, settings, true);
        docs.push(serde_yaml::to_value(&o.config_map)?);
        docs.push(serde_yaml::to_value(&o.headless_service)?);
        docs.push(serde_yaml::to_value(&o.client_service)?);
        docs.push(serde_yaml::to_value(&o.statefulset)?);
        if let Some(pdb) = &o.pdb {
            docs.push(serde_yaml::to_value(pdb)?);
        }
        if ns.spec.metrics.service_monitor {
            docs.push(serde_yaml::to_value(service_monitor(
                &names.statefulset,
                &names.namespace,
                &object_labels(&names.selector()),
                &headless_selector(names.selector()),
                &ns.spec.metrics.interval,
                None,
            ))?);
        }
    }
    for b in &brokers {
        let names = BrokerNames::of(b);
        let key = (names.namespace.clone(), b.spec.name_server_ref.name.clone());
        let namesrv_addr =
            addrs
                .get(&key)
                .cloned()
                .ok_or_else(|| RenderError::MissingNameServer {
                    broker: names.cluster.clone(),
                    nameserver: key.1.clone(),
                })?;
        let inputs = BrokerInputs {
            namesrv_addr,
            master_ordinals: vec![0; b.spec.groups.max(0) as usize],
            fenced: Vec::new(),
            ..BrokerInputs::default()
        };
        let o = broker::build(b, &inputs, settings);
        docs.push(serde_yaml::to_value(&o.headless_service)?);
        for (i, g) in o.groups.iter().enumerate() {
            docs.push(serde_yaml::to_value(&g.config_map)?);
            docs.push(serde_yaml::to_value(&g.statefulset)?);
            docs.push(serde_yaml::to_value(&g.master_service)?);
            // Before any address is known: the Services, and no pod started yet.
            for svc in listener::external_services(b, &names, i as i32, &BTreeMap::new()) {
                docs.push(serde_yaml::to_value(&svc)?);
            }
            for pdb in [&g.pdb, &g.master_pdb].into_iter().flatten() {
                docs.push(serde_yaml::to_value(pdb)?);
            }
            if let Some(np) = &g.network_policy {
                docs.push(serde_yaml::to_value(np)?);
            }
        }
        let labels = object_labels(&names.selector());
        if b.spec.metrics.service_monitor {
            docs.push(serde_yaml::to_value(service_monitor(
                &format!("{}-broker", names.cluster),
                &names.namespace,
                &labels,
                &headless_selector(names.selector()),
                &b.spec.metrics.interval,
                None,
            ))?);
        }
        if b.spec.metrics.prometheus_rule {
            docs.push(serde_yaml::to_value(broker_rules(
                &format!("{}-broker", names.cluster),
                &names.namespace,
                &names.headless_service,
                &labels,
                None,
                &settings.runbook_base_url,
            ))?);
        }
    }
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&d)?);
    }
    Ok(out)
}

/// Objects without a namespace render into `default`, as `kubectl apply` would put them.
fn with_namespace<K: kube::Resource>(mut obj: K) -> K {
    let meta = obj.meta_mut();
    if meta.namespace.is_none() {
        meta.namespace = Some("default".to_owned());
    }
    // Owner references need a uid; rendered objects get a placeholder so the output has
    // the same shape as in a cluster.
    if meta.uid.is_none() {
        meta.uid = Some("00000000-0000-0000-0000-000000000000".to_owned());
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_unknown_kinds_and_dangling_references() {
        let err = render(
            "kind: ConfigMap\nmetadata: {name: x}\n",
            &Settings::default(),
        )
        .unwrap_err();
        assert!(
            matches!(err, RenderError::UnsupportedKind { index: 0, .. }),
            "{err}"
        );
        let broker = "apiVersion: rmq-rs.dev/v1alpha1\nkind: Broker\nmetadata: {name: b}\n\
                      spec: {nameServerRef: {name: nope}}\n";
        let err = render(broker, &Settings::default()).unwrap_err();
        assert!(
            matches!(err, RenderError::MissingNameServer { .. }),
            "{err}"
        );
        assert!(render(": : :", &Settings::default()).is_err());
    }

    #[test]
    fn defaults_fill_a_bare_resource() {
        let input = "apiVersion: rmq-rs.dev/v1alpha1\nkind: NameServer\nmetadata: {name: n}\nspec: {}\n---\n\
                     apiVersion: rmq-rs.dev/v1alpha1\nkind: Broker\nmetadata: {name: b}\n\
                     spec: {nameServerRef: {name: n}}\n";
        let out = render(input, &Settings::default()).unwrap();
        assert!(out.contains("kind: StatefulSet"));
        assert!(out.contains(
            "namesrvAddr=n-nameserver-0.n-nameserver-headless.default.svc.cluster.local:9876"
        ));
        assert!(out.contains("storage: 10Gi"));
    }
}
