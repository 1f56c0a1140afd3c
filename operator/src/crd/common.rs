//! Spec fragments shared by the NameServer and Broker kinds.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, Toleration, TopologySpreadConstraint,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default HTTP port of `/metrics`, `/healthz` and `/readyz` in nameserver and broker pods.
pub const DEFAULT_HTTP_PORT: i32 = 8080;

/// Reference to an object of a known kind in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalRef {
    /// `metadata.name` of the referenced object.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Container image and pull policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Image reference. Defaults to the image of the operator's own release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `Always`, `IfNotPresent` or `Never`; Kubernetes' default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<PullPolicy>,
    /// Secrets used to pull the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<LocalObjectReference>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// Scheduling and metadata overrides merged into every pod of the resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodOverrides {
    /// Extra labels on the pods. Labels the operator sets itself win on conflict.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Extra annotations on the pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Replaces the default affinity (which keeps a group's or the nameservers' pods on
    /// different nodes, preferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Seconds a pod gets to shut down; brokers flush and unregister in this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub termination_grace_period_seconds: Option<i64>,
}

/// Metrics exposure of the managed pods.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSpec {
    /// Port of the `/metrics`, `/healthz` and `/readyz` HTTP endpoint.
    #[serde(default = "default_http_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Creates a `monitoring.coreos.com/v1` ServiceMonitor when that CRD is installed.
    #[serde(default)]
    pub service_monitor: bool,
    /// Creates a `monitoring.coreos.com/v1` PrometheusRule with the default alerts when
    /// that CRD is installed.
    #[serde(default)]
    pub prometheus_rule: bool,
    /// Scrape interval written into the ServiceMonitor.
    #[serde(default = "default_scrape_interval")]
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h)$"))]
    pub interval: String,
}

impl Default for MetricsSpec {
    fn default() -> Self {
        Self {
            port: DEFAULT_HTTP_PORT,
            service_monitor: false,
            prometheus_rule: false,
            interval: default_scrape_interval(),
        }
    }
}

/// The PodDisruptionBudget created for each StatefulSet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PdbSpec {
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default = "default_one")]
    #[schemars(range(min = 1))]
    pub max_unavailable: i32,
}

impl Default for PdbSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            max_unavailable: 1,
        }
    }
}

pub(crate) fn default_http_port() -> i32 {
    DEFAULT_HTTP_PORT
}

fn default_scrape_interval() -> String {
    "30s".to_owned()
}

pub(crate) fn default_true() -> bool {
    true
}

pub(crate) fn default_one() -> i32 {
    1
}
