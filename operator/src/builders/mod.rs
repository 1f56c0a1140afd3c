//! Desired-state builders: pure functions from a custom resource (plus what the reconciler
//! observed) to the Kubernetes objects that should exist. No I/O here; the reconcilers
//! server-side-apply whatever these return.

pub mod broker;
pub mod config_file;
pub mod listener;
pub mod monitoring;
pub mod nameserver;
pub mod network_policy;
pub mod pod;
pub mod secrets;
pub(crate) mod volumes;

use std::collections::BTreeMap;

/// Operator-wide settings the builders need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Cluster DNS domain used in the stable addresses (`cluster.local` by default).
    pub cluster_domain: String,
    /// Image used when a NameServer leaves `spec.image.image` unset.
    pub nameserver_image: String,
    /// Image used when a Broker leaves `spec.image.image` unset.
    pub broker_image: String,
    /// Base URL of `docs/runbooks`; alerts link to pages under it.
    pub runbook_base_url: String,
    /// Extra labels on the ServiceMonitors and PrometheusRules the operator creates, so a
    /// Prometheus that selects by label (kube-prometheus-stack's `release`) picks them up.
    pub monitoring_labels: BTreeMap<String, String>,
}

/// Where alerts' `runbook_url`s point unless configured (the chart's default too).
pub const DEFAULT_RUNBOOK_BASE_URL: &str =
    "https://github.com/rmq-rs/rmq-rs/blob/main/docs/runbooks";

impl Default for Settings {
    fn default() -> Self {
        let version = env!("CARGO_PKG_VERSION");
        Self {
            cluster_domain: "cluster.local".to_owned(),
            nameserver_image: format!("rmq-rs/rmq-nameserver:{version}"),
            broker_image: format!("rmq-rs/rmq-broker:{version}"),
            runbook_base_url: DEFAULT_RUNBOOK_BASE_URL.to_owned(),
            monitoring_labels: BTreeMap::new(),
        }
    }
}
