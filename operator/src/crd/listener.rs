//! How clients reach the brokers (`spec.listener`), in the manner of Strimzi's listener
//! types. RocketMQ 4.x clients connect to the `brokerIP1:listenPort` each broker
//! registers with the nameservers, so an external listener changes what every broker
//! advertises.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.type != 'nodeport' || has(self.advertisedHost)",
    "message": "listener type nodeport needs advertisedHost: the node address clients connect to"
}]))]
pub struct ListenerSpec {
    /// `internal`: brokers advertise their pod DNS names (reachable inside the cluster
    /// only). `loadbalancer`: one Service of type LoadBalancer per broker pod; each broker
    /// advertises its own load balancer's address. `nodeport`: one Service of type
    /// NodePort per broker pod; each broker advertises `advertisedHost` and its node port.
    /// A pod starts only once its address is known.
    #[serde(default, rename = "type")]
    pub type_: ListenerType,
    /// `nodeport`: the host clients reach the nodes at (a node's address, or a name that
    /// resolves to the nodes); every node forwards its node ports to the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertised_host: Option<String>,
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
    #[serde(rename = "nodeport")]
    NodePort,
    #[serde(rename = "loadbalancer")]
    LoadBalancer,
}

impl ListenerSpec {
    /// Whether every pod gets its own externally reachable Service.
    pub fn external(&self) -> bool {
        self.type_ != ListenerType::Internal
    }
}
