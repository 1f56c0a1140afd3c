//! The `NameServer` kind: a set of `rmq-nameserver` replicas.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ImageSpec, MetricsSpec, PdbSpec, PodOverrides, default_one};

/// Desired state of a nameserver ensemble. Nameservers share no state; brokers register
/// with every one of them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "rmq-rs.dev",
    version = "v1alpha1",
    kind = "NameServer",
    namespaced,
    status = "NameServerStatus",
    shortname = "rmqns",
    category = "rmq",
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NameServerSpec {
    /// Number of nameserver pods.
    #[serde(default = "default_one")]
    #[schemars(range(min = 1, max = 32))]
    pub replicas: i32,
    #[serde(default)]
    pub image: ImageSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Extra `namesrv.conf` keys. `listenPort`, `metricsPort` and `kvConfigPath` are owned
    /// by the operator.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.all(k, !(k in ['listenPort', 'metricsPort', 'kvConfigPath']))",
        "message": "config may not set listenPort, metricsPort or kvConfigPath: the operator owns them"
    }]))]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub pod: PodOverrides,
    #[serde(default)]
    pub metrics: MetricsSpec,
    #[serde(default)]
    pub pdb: PdbSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NameServerStatus {
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` and `Progressing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    /// Stable DNS names (`host:port`) of every replica; never pod IPs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// The addresses joined the way `namesrvAddr` expects them (`a:9876;b:9876`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namesrv_addr: Option<String>,
}
