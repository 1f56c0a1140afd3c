//! The `Topic` kind: a topic created on every master of one Broker cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::LocalRef;

/// RocketMQ's `TopicValidator` limit on topic names.
pub const MAX_TOPIC_NAME_LEN: usize = 127;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "rmq-rs.dev",
    version = "v1alpha1",
    kind = "Topic",
    namespaced,
    status = "TopicStatus",
    shortname = "rmqt",
    category = "rmq",
    printcolumn = r#"{"name":"Topic","type":"string","jsonPath":".status.topicName"}"#,
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.brokerRef.name"}"#,
    printcolumn = r#"{"name":"Write","type":"integer","jsonPath":".spec.writeQueues"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.topicName) == has(oldSelf.topicName) && (!has(self.topicName) || self.topicName == oldSelf.topicName)",
        "message": "topicName is immutable"
    },
    {
        "rule": "self.brokerRef.name == oldSelf.brokerRef.name",
        "message": "brokerRef is immutable"
    }
]))]
pub struct TopicSpec {
    /// Name of the RocketMQ topic; `metadata.name` when unset. Needed for names
    /// Kubernetes cannot hold (uppercase, `_`, `%`, `|`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 127), regex(pattern = r"^[%|a-zA-Z0-9_-]+$"))]
    pub topic_name: Option<String>,
    /// The Broker (cluster) the topic lives on.
    pub broker_ref: LocalRef,
    /// Read queues per broker group.
    #[serde(default = "default_queues")]
    #[schemars(range(min = 1, max = 1024))]
    pub read_queues: i32,
    /// Write queues per broker group.
    #[serde(default = "default_queues")]
    #[schemars(range(min = 1, max = 1024))]
    pub write_queues: i32,
    #[serde(default)]
    pub perm: TopicPerm,
    /// Ordered topic (`order=true` in UPDATE_AND_CREATE_TOPIC).
    #[serde(default)]
    pub order: bool,
}

/// Topic permission (`PermName` bits: read 4, write 2).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum TopicPerm {
    #[default]
    ReadWrite,
    ReadOnly,
    WriteOnly,
}

impl TopicPerm {
    pub fn bits(self) -> i32 {
        match self {
            TopicPerm::ReadWrite => 6,
            TopicPerm::ReadOnly => 4,
            TopicPerm::WriteOnly => 2,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` and `ReconciliationPaused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The RocketMQ topic this object manages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_name: Option<String>,
    /// Where the topic was last applied successfully.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<Placement>,
    /// The last difference found between the spec and a master's topic config
    /// (GET_ALL_TOPIC_CONFIG), and repaired; absent while none was ever found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_drift: Option<TopicDrift>,
}

/// A drift the Topic reconciler found on the brokers and repaired.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicDrift {
    /// RFC 3339 time of the repair.
    pub repaired_at: String,
    /// What differed, per broker group (`c-0: writeQueues 4, want 8`).
    pub details: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub broker_name: String,
    pub read_queues: i32,
    pub write_queues: i32,
    pub perm: i32,
}

fn default_queues() -> i32 {
    8
}

impl Topic {
    /// The RocketMQ topic name: `spec.topicName`, else `metadata.name`.
    pub fn topic_name(&self) -> &str {
        self.spec
            .topic_name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}

/// Rule on `metadata.name` (only the root of a CRD schema can see it): a Topic without
/// `spec.topicName` uses its name as the RocketMQ topic, so the name must be one
/// (`TopicValidator`: at most 127 characters of `[%|a-zA-Z0-9_-]`; Kubernetes names may
/// also hold `.`).
pub const TOPIC_NAME_RULE: &str = "has(self.spec.topicName) || (size(self.metadata.name) <= 127 && self.metadata.name.matches('^[%|a-zA-Z0-9_-]+$'))";

/// The Topic CRD with [`TOPIC_NAME_RULE`] on its root.
pub fn topic_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;
    use kube::CustomResourceExt;
    let mut crd = Topic::crd();
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema
                .x_kubernetes_validations
                .get_or_insert_with(Vec::new)
                .push(ValidationRule {
                    rule: TOPIC_NAME_RULE.to_owned(),
                    message: Some(
                        "metadata.name is not a RocketMQ topic name (at most 127 characters of letters, digits, '-', '_', '%', '|'); set spec.topicName".to_owned(),
                    ),
                    ..ValidationRule::default()
                });
        }
    }
    crd
}
