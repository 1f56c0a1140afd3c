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
    pub conditions: Vec<Condition>,
    /// The RocketMQ topic this object manages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_name: Option<String>,
    /// Where the topic was last applied successfully.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<Placement>,
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
