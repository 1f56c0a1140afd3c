//! The `Broker` kind: one RocketMQ cluster (`brokerClusterName` = the object's name) made
//! of broker groups (`brokerName`s), each a master plus slaves.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ImageSpec, LocalRef, MetricsSpec, PdbSpec, PodOverrides, default_one};
use super::listener::ListenerSpec;
use super::security::BrokerSecurity;

/// broker.conf keys the operator derives itself; `spec.config` may not set them.
pub const OPERATOR_OWNED_KEYS: &[&str] = &[
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "brokerRole",
    "namesrvAddr",
    "listenPort",
    "haListenPort",
    "metricsPort",
    "brokerIP1",
    "brokerIP2",
    "storePathRootDir",
    "storePathCommitLog",
    "flushDiskType",
    "grpcServerPort",
];

/// The resource's kind, as events and conditions name it.
pub const BROKER_KIND: &str = "Broker";

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "rmq-rs.dev",
    version = "v1alpha1",
    kind = "Broker",
    namespaced,
    status = "BrokerStatus",
    shortname = "rmqb",
    category = "rmq",
    printcolumn = r#"{"name":"Groups","type":"integer","jsonPath":".spec.groups"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicasPerGroup"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Degraded","type":"string","jsonPath":".status.conditions[?(@.type==\"Degraded\")].status"}"#,
    printcolumn = r#"{"name":"Masters","type":"string","jsonPath":".status.groups[*].masterPod"}"#,
    printcolumn = r#"{"name":"Epochs","type":"string","jsonPath":".status.groups[*].epoch"}"#,
    printcolumn = r#"{"name":"Failover","type":"string","jsonPath":".status.groups[*].failover.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.replication.ackMode != 'Sync' || self.replicasPerGroup >= 2",
        "message": "replication.ackMode Sync needs replicasPerGroup >= 2: a SYNC_MASTER without a slave rejects every send"
    },
    {
        "rule": "self.groups >= oldSelf.groups",
        "message": "groups cannot shrink: removing a broker group would drop its messages"
    }
]))]
pub struct BrokerSpec {
    /// The NameServer every broker of this cluster registers with.
    pub name_server_ref: LocalRef,
    /// Number of broker groups; group `i` has brokerName `<name>-<i>`.
    #[serde(default = "default_one")]
    #[schemars(range(min = 1, max = 64))]
    pub groups: i32,
    /// Pods per group: one master and `replicasPerGroup - 1` slaves.
    #[serde(default = "default_one")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas_per_group: i32,
    #[serde(default)]
    pub replication: ReplicationSpec,
    #[serde(default)]
    pub flush_disk_type: FlushDiskType,
    #[serde(default)]
    pub failover: FailoverSpec,
    #[serde(default)]
    pub storage: StorageSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default)]
    pub image: ImageSpec,
    /// Extra broker.conf keys (Java properties). Keys the operator owns are rejected.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.all(k, !(k in ['brokerClusterName', 'brokerName', 'brokerId', 'brokerRole', 'namesrvAddr', 'listenPort', 'haListenPort', 'metricsPort', 'brokerIP1', 'brokerIP2', 'storePathRootDir', 'storePathCommitLog', 'flushDiskType', 'grpcServerPort']))",
        "message": "config may not set keys the operator owns (brokerClusterName, brokerName, brokerId, brokerRole, namesrvAddr, listenPort, haListenPort, metricsPort, brokerIP1, brokerIP2, storePathRootDir, storePathCommitLog, flushDiskType, grpcServerPort)"
    }]))]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub metrics: MetricsSpec,
    #[serde(default)]
    pub pod: PodOverrides,
    #[serde(default)]
    pub pdb: PdbSpec,
    /// Secrets and network exposure (see `docs/security.md`).
    #[serde(default)]
    pub security: BrokerSecurity,
    /// How clients reach the brokers (see "External access" in `docs/operator.md`).
    #[serde(default)]
    pub listener: ListenerSpec,
    /// The RocketMQ 5.x gRPC endpoint (`MessagingService`) every broker serves next to
    /// the 4.x remoting port.
    #[serde(default)]
    pub grpc: GrpcSpec,
}

/// The broker's gRPC port (`grpcServerPort`): 5.x clients (apache/rocketmq-clients)
/// connect to it directly, no proxy in between.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcSpec {
    /// Port of the gRPC endpoint (plaintext and TLS on the same port); `0` turns it off.
    /// The default is the 5.x proxy's port.
    #[serde(default = "default_grpc_port")]
    #[schemars(range(min = 0, max = 65535))]
    pub port: i32,
}

/// RocketMQ 5.x proxy's default gRPC port, and the broker's default `grpcServerPort`.
pub const DEFAULT_GRPC_PORT: i32 = 8081;

fn default_grpc_port() -> i32 {
    DEFAULT_GRPC_PORT
}

impl Default for GrpcSpec {
    fn default() -> Self {
        Self {
            port: DEFAULT_GRPC_PORT,
        }
    }
}

impl GrpcSpec {
    /// The port, unless the endpoint is turned off.
    pub fn enabled_port(&self) -> Option<i32> {
        (self.port > 0).then_some(self.port)
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationSpec {
    /// `Async` → ASYNC_MASTER, `Sync` → SYNC_MASTER (a send succeeds once a slave has it).
    #[serde(default)]
    pub ack_mode: AckMode,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AckMode {
    #[default]
    Async,
    Sync,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FlushDiskType {
    #[default]
    AsyncFlush,
    SyncFlush,
}

impl FlushDiskType {
    /// The broker.conf value (`FlushDiskType` enum of RocketMQ's store config).
    pub fn conf_value(self) -> &'static str {
        match self {
            FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
            FlushDiskType::SyncFlush => "SYNC_FLUSH",
        }
    }
}

/// When and how a group's master is replaced (see `docs/runbooks/`). A planned switchover
/// is requested with the annotation `rmq-rs.dev/switchover: <target pod>` on the Broker.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailoverSpec {
    #[serde(default)]
    pub policy: FailoverPolicy,
    /// How long a master must be unready before a failover starts (Go duration, e.g. `30s`).
    #[serde(default = "default_unavailable_for")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub unavailable_for: String,
    /// A slave further behind than this is not eligible for promotion.
    #[serde(default = "default_max_lag_bytes")]
    #[schemars(range(min = 0))]
    pub max_lag_bytes: i64,
    /// Promote a slave outside the in-sync set when no eligible one exists (may lose
    /// acknowledged messages).
    #[serde(default)]
    pub allow_unclean: bool,
}

impl Default for FailoverSpec {
    fn default() -> Self {
        Self {
            policy: FailoverPolicy::default(),
            unavailable_for: default_unavailable_for(),
            max_lag_bytes: default_max_lag_bytes(),
            allow_unclean: false,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FailoverPolicy {
    #[default]
    Manual,
    Automatic,
}

/// Persistent storage of each broker pod (store and commit log).
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
pub struct StorageSpec {
    /// Size of each pod's volume claim (Kubernetes quantity).
    #[serde(default = "default_storage_size")]
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"))]
    pub size: String,
    /// Storage class of the claims; the cluster default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// Delete the claims when the Broker is deleted. Off by default: data outlives the
    /// resource.
    #[serde(default)]
    pub delete_claim: bool,
}

impl Default for StorageSpec {
    fn default() -> Self {
        Self {
            size: default_storage_size(),
            storage_class_name: None,
            delete_claim: false,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing`, `Degraded`, `FailoverInProgress`, `ReconciliationPaused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// `namesrvAddr` the brokers were configured with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namesrv_addr: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupStatus>,
    /// With an external listener: the `host:port` each pod advertises, once its Service
    /// has an address. Always written (a status merge patch replaces a list, so an empty
    /// one clears what an earlier listener left).
    #[serde(default)]
    pub external_addresses: Vec<ExternalAddress>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalAddress {
    pub pod: String,
    /// `host:port` registered with the nameservers (what clients connect to).
    pub address: String,
    /// `host:port` of the pod's gRPC endpoint, what 5.x clients are routed to (when it
    /// differs from the in-cluster port, i.e. behind a node port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_address: Option<String>,
}

/// One broker group (`brokerName`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    pub broker_name: String,
    /// Pod currently holding brokerId 0; the group's Service selects it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_pod: Option<String>,
    /// Incremented on every change of master; fences a demoted master's stale writes.
    #[serde(default)]
    pub epoch: i64,
    /// The master's commit-log max offset when last observed; measures replica lag and
    /// the bytes an unclean failover loses while the master is unreachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_max_offset: Option<i64>,
    /// The master's confirm offset (highest offset on every in-sync replica).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_offset: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberStatus>,
    #[serde(default)]
    pub failover: FailoverStatus,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    pub pod: String,
    pub broker_id: i64,
    pub role: MemberRole,
    pub ready: bool,
    /// Bytes of commit log the member is behind its master (0 for the master); unset when
    /// the admin protocol could not be reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_lag_bytes: Option<i64>,
    /// Whether the master last reported this member in sync (GET_BROKER_HA_STATUS);
    /// kept while the master is unreachable, since that is when it matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_sync: Option<bool>,
    /// The member's epoch as it reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    /// `dispatchBehindBytes` from GET_BROKER_RUNTIME_INFO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_behind_bytes: Option<i64>,
    /// Hash of the broker.conf the pod runs with (its `rmq-rs.dev/config-hash` annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum MemberRole {
    #[default]
    Master,
    Slave,
}

/// Progress of a failover or switchover of one group, written by the failover state
/// machine (`operator::failover`). A failover in progress resumes from here after an
/// operator restart.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailoverStatus {
    #[serde(default)]
    pub phase: FailoverPhase,
    /// What started the current (or last) failover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<FailoverTrigger>,
    /// The master being replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The member elected (or requested) as the new master.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The epoch this failover installs; larger than every epoch any member has seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    /// Members fenced at `epoch` (demoted through NOTIFY_BROKER_ROLE_CHANGED, or their pod
    /// deleted when unreachable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fenced: Vec<String>,
    /// Machine-readable reason of the current phase (for `Blocked`: `NoEligibleReplica`,
    /// `TargetNotEligible`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// RFC 3339 time the current failover began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// RFC 3339 time the current phase was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<String>,
    /// RFC 3339 time the last failover completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// Commit-log bytes the last unclean failover discarded (the old master's offset
    /// minus the promoted replica's). With ackMode Async every failover that promotes
    /// a replica lacking bytes, or whose old master's final end is unknown, reports here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_lost: Option<i64>,
    /// `false`: the old master did not answer, so `bytesLost` is measured from its last
    /// observed end and is a lower bound; what it wrote after that is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_lost_exact: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum FailoverTrigger {
    /// The master was unready for `failover.unavailableFor` (policy Automatic), or a
    /// switchover request replaced it under policy Manual.
    MasterUnavailable,
    /// The `rmq-rs.dev/switchover` annotation named a target pod.
    Switchover,
    /// A rolling restart reached the master: it hands over to an in-sync slave first.
    RollingRestart,
    /// The master's pod is being drained (its node is cordoned, or the pod is annotated
    /// `rmq-rs.dev/drain: "true"`): mastership moves to an in-sync slave before the
    /// eviction the master's PodDisruptionBudget holds back.
    Drain,
    /// `status` was lost (the Broker re-created over retained volumes, or restored
    /// without status) and no member claims mastership: the member with the newest data
    /// (highest epoch, then offset) is promoted at a new epoch.
    StatusLost,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FailoverPhase {
    #[default]
    Idle,
    Detected,
    Fencing,
    Electing,
    Promoting,
    Repointing,
    Completed,
    Blocked,
}

fn default_unavailable_for() -> String {
    "30s".to_owned()
}

fn default_max_lag_bytes() -> i64 {
    1024 * 1024
}

fn default_storage_size() -> String {
    "10Gi".to_owned()
}
