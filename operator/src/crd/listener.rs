//! How clients reach the brokers (`spec.listener`), in the manner of Strimzi's listener
//! types. RocketMQ 4.x clients connect to the `brokerIP1:listenPort` each broker
//! registers with the nameservers, so an external listener changes what every broker
//! advertises.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSpec {
    /// `internal`: brokers advertise their pod DNS names (reachable inside the cluster
    /// only). `loadbalancer`: one Service of type LoadBalancer per broker pod; each broker
    /// advertises its own load balancer's address, and a pod starts only once that address
    /// is known.
    #[serde(default, rename = "type")]
    pub type_: ListenerType,
    /// Annotations of the per-pod Services (cloud load balancer settings, e.g. internal
    /// load balancers).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ListenerType {
    #[default]
    Internal,
    #[serde(rename = "loadbalancer")]
    LoadBalancer,
}

impl ListenerSpec {
    /// Whether every pod gets its own externally reachable Service.
    pub fn external(&self) -> bool {
        self.type_ != ListenerType::Internal
    }
}
