//! Names, labels and DNS addresses of everything the operator creates, derived only from
//! the object being reconciled (no shared state between clusters or namespaces).

use std::collections::BTreeMap;

use crate::crd::{Broker, NameServer};

pub const NAMESERVER_PORT: i32 = 9876;
pub const BROKER_PORT: i32 = 10911;
/// RocketMQ's default `haListenPort` is `listenPort + 1`.
pub const BROKER_HA_PORT: i32 = 10912;

pub const MANAGER: &str = "rmq-operator";

pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_PART_OF: &str = "app.kubernetes.io/part-of";
/// Broker group (brokerName) of a broker pod.
pub const LABEL_GROUP: &str = "rmq-rs.dev/broker-name";
/// `master` or `slave`, kept on broker pods by the operator; the group Service selects
/// `master`.
pub const LABEL_ROLE: &str = "rmq-rs.dev/role";
/// Set by the StatefulSet controller on every pod it creates.
pub const LABEL_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
pub const LABEL_REVISION: &str = "controller-revision-hash";
/// `headless` on the Service that publishes every pod; ServiceMonitors select it so each
/// pod is scraped once.
pub const LABEL_SERVICE: &str = "rmq-rs.dev/service";

/// Hash of a pod's configuration, in its template; a change rolls the pods.
pub const ANNOTATION_CONFIG_HASH: &str = "rmq-rs.dev/config-hash";
/// Any new value on a Broker or NameServer restarts its pods one at a time.
pub const ANNOTATION_RESTART: &str = "rmq-rs.dev/restart";
/// `"true"`: the operator leaves the object alone (status shows ReconciliationPaused).
pub const ANNOTATION_PAUSE: &str = "rmq-rs.dev/pause-reconciliation";
/// On a Broker: a pod name; the operator switches that pod's group over to it and removes
/// the annotation when done.
pub const ANNOTATION_SWITCHOVER: &str = "rmq-rs.dev/switchover";
/// On a broker pod: hand its mastership over so it can be evicted (what a drain tool sets
/// before `kubectl drain`; a cordoned node has the same effect).
pub const ANNOTATION_DRAIN: &str = "rmq-rs.dev/drain";
/// `"false"` on a Topic: stop managing the topic; deletion leaves it on the brokers.
pub const ANNOTATION_MANAGED: &str = "rmq-rs.dev/managed";

pub const TOPIC_FINALIZER: &str = "rmq-rs.dev/topic";

pub const COMPONENT_NAMESERVER: &str = "nameserver";
pub const COMPONENT_BROKER: &str = "broker";

/// Names and addresses of one NameServer's objects.
#[derive(Debug, Clone)]
pub struct NameServerNames {
    pub instance: String,
    pub namespace: String,
    pub statefulset: String,
    pub headless_service: String,
    pub client_service: String,
    pub config_map: String,
}

impl NameServerNames {
    pub fn new(name: &str, namespace: &str) -> Self {
        let base = format!("{name}-nameserver");
        Self {
            instance: name.to_owned(),
            namespace: namespace.to_owned(),
            headless_service: format!("{base}-headless"),
            client_service: base.clone(),
            config_map: format!("{base}-config"),
            statefulset: base,
        }
    }

    pub fn of(ns: &NameServer) -> Self {
        Self::new(
            ns.metadata.name.as_deref().unwrap_or_default(),
            ns.metadata.namespace.as_deref().unwrap_or_default(),
        )
    }

    /// Stable DNS `host:port` of replica `ordinal`, through the headless Service.
    pub fn address(&self, ordinal: i32, cluster_domain: &str) -> String {
        format!(
            "{}-{ordinal}.{}.{}.svc.{cluster_domain}:{NAMESERVER_PORT}",
            self.statefulset, self.headless_service, self.namespace
        )
    }

    pub fn addresses(&self, replicas: i32, cluster_domain: &str) -> Vec<String> {
        (0..replicas.max(0))
            .map(|i| self.address(i, cluster_domain))
            .collect()
    }

    pub fn selector(&self) -> BTreeMap<String, String> {
        selector(COMPONENT_NAMESERVER, &self.instance)
    }

    /// The Secret holding the nameservers' `adminSecret` (key `adminSecret`), generated
    /// when missing: registrations and other state changes must be signed with it, by
    /// the brokers of every Broker naming this NameServer and by the operator.
    pub fn admin_secret(&self) -> String {
        format!("{}-admin-secret", self.statefulset)
    }
}

/// Names and addresses of one Broker's objects.
#[derive(Debug, Clone)]
pub struct BrokerNames {
    /// The Broker's name, also its `brokerClusterName`.
    pub cluster: String,
    pub namespace: String,
    pub headless_service: String,
}

impl BrokerNames {
    pub fn new(name: &str, namespace: &str) -> Self {
        Self {
            cluster: name.to_owned(),
            namespace: namespace.to_owned(),
            headless_service: format!("{name}-broker-headless"),
        }
    }

    pub fn of(broker: &Broker) -> Self {
        Self::new(
            broker.metadata.name.as_deref().unwrap_or_default(),
            broker.metadata.namespace.as_deref().unwrap_or_default(),
        )
    }

    /// `brokerName` of group `group`; also the name of its StatefulSet and master Service.
    pub fn broker_name(&self, group: i32) -> String {
        format!("{}-{group}", self.cluster)
    }

    pub fn config_map(&self, group: i32) -> String {
        format!("{}-{group}-config", self.cluster)
    }

    pub fn pdb(&self, group: i32) -> String {
        self.broker_name(group)
    }

    /// The Secret the operator generates for the HA handshake when the spec names none.
    pub fn ha_secret(&self) -> String {
        format!("{}-ha-secret", self.cluster)
    }

    /// The Secret holding the Broker's `adminSecret`, generated when missing: its pods
    /// take it as `RMQ_ADMIN_SECRET` and the operator signs role changes and config pushes
    /// with it when the Broker has no `acl`.
    pub fn admin_secret(&self) -> String {
        format!("{}-admin-secret", self.cluster)
    }

    pub fn master_pdb(&self, group: i32) -> String {
        format!("{}-master", self.broker_name(group))
    }

    pub fn pod(&self, group: i32, ordinal: i32) -> String {
        format!("{}-{ordinal}", self.broker_name(group))
    }

    /// The store PVC of a pod (`<volumeClaimTemplate>-<statefulset>-<ordinal>`).
    pub fn store_claim(&self, group: i32, ordinal: i32) -> String {
        format!("store-{}", self.pod(group, ordinal))
    }

    /// Stable DNS host of a broker pod, used as its `brokerIP1`.
    pub fn pod_host(&self, group: i32, ordinal: i32, cluster_domain: &str) -> String {
        format!(
            "{}.{}.{}.svc.{cluster_domain}",
            self.pod(group, ordinal),
            self.headless_service,
            self.namespace
        )
    }

    pub fn selector(&self) -> BTreeMap<String, String> {
        selector(COMPONENT_BROKER, &self.cluster)
    }

    pub fn group_selector(&self, group: i32) -> BTreeMap<String, String> {
        let mut s = self.selector();
        s.insert(LABEL_GROUP.to_owned(), self.broker_name(group));
        s
    }
}

/// Labels that identify the pods of one component instance.
fn selector(component: &str, instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.to_owned(), "rocketmq".to_owned()),
        (LABEL_COMPONENT.to_owned(), component.to_owned()),
        (LABEL_INSTANCE.to_owned(), instance.to_owned()),
    ])
}

/// Selector labels plus the bookkeeping labels every created object carries.
pub fn object_labels(selector: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut labels = selector.clone();
    labels.insert(LABEL_MANAGED_BY.to_owned(), MANAGER.to_owned());
    labels.insert(LABEL_PART_OF.to_owned(), "rmq-rs".to_owned());
    labels
}

/// A selector narrowed to the headless Service of a component.
pub fn headless_selector(mut selector: BTreeMap<String, String>) -> BTreeMap<String, String> {
    selector.insert(LABEL_SERVICE.to_owned(), "headless".to_owned());
    selector
}

/// `k=v,k2=v2` for list calls.
pub fn selector_string(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether an annotation is set to a value (case-insensitive).
pub fn annotation_is(
    annotations: Option<&BTreeMap<String, String>>,
    key: &str,
    value: &str,
) -> bool {
    annotations
        .and_then(|a| a.get(key))
        .is_some_and(|v| v.eq_ignore_ascii_case(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nameserver_addresses_are_dns_names_per_replica() {
        let n = NameServerNames::new("ns", "prod");
        assert_eq!(
            n.addresses(2, "cluster.local"),
            vec![
                "ns-nameserver-0.ns-nameserver-headless.prod.svc.cluster.local:9876",
                "ns-nameserver-1.ns-nameserver-headless.prod.svc.cluster.local:9876",
            ]
        );
    }

    #[test]
    fn broker_names_follow_groups_and_ordinals() {
        let b = BrokerNames::new("orders", "prod");
        assert_eq!(b.broker_name(1), "orders-1");
        assert_eq!(b.pod(1, 2), "orders-1-2");
        assert_eq!(
            b.pod_host(0, 1, "example.org"),
            "orders-0-1.orders-broker-headless.prod.svc.example.org"
        );
        assert_eq!(
            selector_string(&b.group_selector(0)),
            "app.kubernetes.io/component=broker,app.kubernetes.io/instance=orders,\
             app.kubernetes.io/name=rocketmq,rmq-rs.dev/broker-name=orders-0"
        );
    }
}
