//! Secrets a Broker's pods use. The operator only ever references or mounts them: their
//! values never go into a ConfigMap, the status, an Event or a log line.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Key of the generated HA Secret (and the default key of a named one).
pub const HA_SECRET_KEY: &str = "haSecret";
/// Key of the generated admin Secret (`<name>-admin-secret`): the brokers' `adminSecret`,
/// a comma-separated list whose first entry the operator signs with.
pub const ADMIN_SECRET_KEY: &str = "adminSecret";
/// Default key of the ACL Secret: the file name RocketMQ 4.9 reads (`plain_acl.yml`).
pub const ACL_SECRET_KEY: &str = "plain_acl.yml";
/// Keys of an account Secret (`brokerCredentials`, `adminCredentials`).
pub const ACCESS_KEY_KEY: &str = "accessKey";
pub const SECRET_KEY_KEY: &str = "secretKey";
/// Keys of a `kubernetes.io/tls` Secret (cert-manager writes all three).
pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_KEY_KEY: &str = "tls.key";
pub const CA_KEY: &str = "ca.crt";

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerSecurity {
    /// The group's shared HA handshake secret (the broker's `RMQ_HA_SECRET`; replicating
    /// roles refuse to start without it). Unset: the operator generates a random one per
    /// Broker into the Secret `<name>-ha-secret` (key `haSecret`) once, owns it, and never
    /// rotates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha_secret: Option<SecretKeyRef>,
    /// A Secret holding RocketMQ's `plain_acl.yml` (key `plain_acl.yml` unless named):
    /// mounted read-only and turned on with `aclEnable=true`. Edits to the Secret reach
    /// the pods through the kubelet and are hot-reloaded by the broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<SecretKeyRef>,
    /// TLS on the remoting port from a cert-manager-style Secret (`tls.crt`, `tls.key`,
    /// `ca.crt`), mounted read-only; the broker re-reads rotated files by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// The account the broker signs its own requests with (registrations, a slave's
    /// requests to its master): a Secret with keys `accessKey` and `secretKey`, passed as
    /// environment variables from the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_credentials: Option<SecretRef>,
    /// The account the operator signs its own admin requests to this Broker's pods with
    /// (failover, status probes, config pushes, and the Topic reconcile's writes): a
    /// Secret with keys `accessKey` and `secretKey`, which the operator reads (GET, in
    /// this namespace) at every reconcile. Needed when `acl` is set, since brokers with
    /// ACL refuse unsigned admin requests; the account needs admin rights in
    /// `plain_acl.yml`. A missing Secret or key stops the reconcile with a condition
    /// naming it; no unsigned request is sent meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_credentials: Option<SecretRef>,
    /// A NetworkPolicy per Broker: the HA port only from pods of the same group, the
    /// remoting and HTTP ports from the peers listed here (everyone when unset).
    #[serde(default)]
    pub network_policy: NetworkPolicySpec,
}

/// One key of a Secret in the Broker's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key inside the Secret; the field's documented default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

impl SecretKeyRef {
    pub fn key_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.key.as_deref().unwrap_or(default)
    }
}

/// A whole Secret in the Broker's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
}

/// TLS on the remoting port, in 4.9's `permissive` mode (TLS and plaintext both
/// accepted) unless `mode: enforcing`. The operator's own admin requests to these pods go over TLS: it trusts the
/// Secret's `ca.crt`, presents `tls.crt`/`tls.key` when client certificates are required,
/// and dials the pods by DNS name, so the certificate must cover
/// `*.<headless service>.<namespace>.svc.<cluster domain>`. A Secret it cannot use stops
/// the reconcile with a condition naming the Secret and key (reason `AdminTlsUnavailable`);
/// nothing is sent in plaintext meanwhile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// A `kubernetes.io/tls` Secret (cert-manager writes `tls.crt`, `tls.key`, `ca.crt`).
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// Require client certificates signed by `ca.crt` on TLS connections (mTLS).
    #[serde(default)]
    pub require_client_certificates: bool,
    /// `permissive` (default): TLS and plaintext clients. `enforcing`: TLS only
    /// (`tls.server.mode=enforcing`); a Broker's pods then also dial their nameservers and
    /// their master over TLS (`tls.enable=true`), trusting this Secret's `ca.crt`. The
    /// probes stay on the plaintext HTTP port. A Broker and its NameServer must agree: a
    /// NameServer that enforces needs its Brokers enforcing (they would register in
    /// plaintext), and an enforcing Broker needs a NameServer serving TLS; otherwise the
    /// Broker is not reconciled (`Ready=False`, reason `TlsPeerMismatch`).
    #[serde(default)]
    pub mode: TlsMode,
}

/// The remoting port's TLS mode (4.9 `tls.server.mode`, without `disabled`: no `tls`
/// means no TLS).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TlsMode {
    #[default]
    Permissive,
    Enforcing,
}

impl TlsMode {
    /// The `tls.server.mode` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Permissive => "permissive",
            Self::Enforcing => "enforcing",
        }
    }
}

impl TlsSpec {
    pub fn enforcing(&self) -> bool {
        self.mode == TlsMode::Enforcing
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    #[serde(default = "super::common::default_true")]
    pub enabled: bool,
    /// Who may reach the remoting (client, admin) port; everyone when empty. The
    /// operator's own pods are always allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remoting_from: Vec<k8s_openapi::api::networking::v1::NetworkPolicyPeer>,
    /// Who may reach the HTTP port (`/metrics`, probes); everyone when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics_from: Vec<k8s_openapi::api::networking::v1::NetworkPolicyPeer>,
}

impl Default for NetworkPolicySpec {
    fn default() -> Self {
        Self {
            enabled: true,
            remoting_from: Vec::new(),
            metrics_from: Vec::new(),
        }
    }
}
