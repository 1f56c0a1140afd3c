//! The `NameServer` kind: a set of `rmq-nameserver` replicas.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ImageSpec, MetricsSpec, PdbSpec, PodOverrides, default_one};
use super::security::{SecretKeyRef, SecretRef, TlsSpec};

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
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.readyReplicas"
    ),
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
    /// The volume of each nameserver's KV config (`kvConfigPath`: ORDER_TOPIC_CONFIG and
    /// other namespaced KV entries), so it survives restarts.
    #[serde(default)]
    pub storage: NameServerStorage,
    /// Secrets the nameserver pods mount (never copied into a ConfigMap or the status).
    #[serde(default)]
    pub security: NameServerSecurity,
}

/// The nameserver's ACL and TLS, from Secrets in its namespace, mounted exactly as a
/// Broker's are.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NameServerSecurity {
    /// A Secret holding `plain_acl.yml` (key `plain_acl.yml` unless named): mounted
    /// read-only and turned on with `aclEnable=true`. Every state-changing request then
    /// needs an admin account's signature, broker registrations included: the file must
    /// hold the account of each Broker's `spec.security.brokerCredentials` with
    /// `admin: true`. Edits reach the pods through the kubelet and are hot-reloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<SecretKeyRef>,
    /// TLS on the remoting port (`permissive`: TLS and plaintext) from a
    /// cert-manager-style Secret (`tls.crt`, `tls.key`, `ca.crt`), mounted read-only; the
    /// nameserver re-reads rotated files by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// The account the operator signs its requests to these nameservers with (a Topic's
    /// cluster lookups and its deletion from the routes): a Secret with keys `accessKey`
    /// and `secretKey`, read (GET, in this namespace) at every reconcile that calls a
    /// nameserver. Needed when `acl` is set, since the nameserver then refuses unsigned
    /// state-changing requests; the account needs `admin: true` in that file. A missing
    /// Secret or key stops the Topic reconcile with a condition naming it; no unsigned
    /// request is sent meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_credentials: Option<SecretRef>,
}

/// Persistent volume of a nameserver pod (its KV config).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "quantity(self.size).compareTo(quantity(oldSelf.size)) >= 0",
        "message": "storage.size may only grow"
    },
    {
        "rule": "has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
        "message": "storage.storageClassName is immutable"
    }
]))]
pub struct NameServerStorage {
    /// Size of each pod's claim (Kubernetes quantity); the KV config is small.
    #[serde(default = "default_kv_size")]
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"))]
    pub size: String,
    /// Storage class of the claims; the cluster default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

impl Default for NameServerStorage {
    fn default() -> Self {
        Self {
            size: default_kv_size(),
            storage_class_name: None,
        }
    }
}

fn default_kv_size() -> String {
    "1Gi".to_owned()
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NameServerStatus {
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` and `Progressing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
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
