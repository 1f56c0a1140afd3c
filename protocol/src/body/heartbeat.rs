//! `HeartbeatData` and its parts (`common/protocol/heartbeat/*.java`).
//!
//! Java and Go send enums by name; the C++ client sends their ordinals, `subVersion` as a
//! string, and omits empty sets and several booleans. All of that is accepted.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::lenient::{self, java_enum};

java_enum! {
    /// `ConsumeType`.
    pub enum ConsumeType {
        ConsumeActively = "CONSUME_ACTIVELY",
        ConsumePassively = "CONSUME_PASSIVELY",
    }
}

java_enum! {
    /// `MessageModel`.
    pub enum MessageModel {
        Broadcasting = "BROADCASTING",
        Clustering = "CLUSTERING",
    }
}

java_enum! {
    /// `ConsumeFromWhere`; the first three names are deprecated in Java but still sent.
    pub enum ConsumeFromWhere {
        ConsumeFromLastOffset = "CONSUME_FROM_LAST_OFFSET",
        ConsumeFromLastOffsetAndFromMinWhenBootFirst = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        ConsumeFromMinOffset = "CONSUME_FROM_MIN_OFFSET",
        ConsumeFromMaxOffset = "CONSUME_FROM_MAX_OFFSET",
        ConsumeFromFirstOffset = "CONSUME_FROM_FIRST_OFFSET",
        ConsumeFromTimestamp = "CONSUME_FROM_TIMESTAMP",
    }
}

/// `ExpressionType.TAG`, the default when a client omits the property.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";

fn default_expression_type() -> String {
    EXPRESSION_TYPE_TAG.to_owned()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    #[serde(default)]
    pub class_filter_mode: bool,
    #[serde(default)]
    pub topic: String,
    /// The expression: `*`, `a || b`, or SQL92 text.
    #[serde(default)]
    pub sub_string: String,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub tags_set: BTreeSet<String>,
    /// Java `String.hashCode()` of each tag.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub code_set: BTreeSet<i32>,
    #[serde(default, deserialize_with = "lenient::i64_or_string")]
    pub sub_version: i64,
    #[serde(
        default = "default_expression_type",
        deserialize_with = "expression_type"
    )]
    pub expression_type: String,
}

fn expression_type<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_else(default_expression_type))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    pub group_name: String,
    pub consume_type: ConsumeType,
    pub message_model: MessageModel,
    pub consume_from_where: ConsumeFromWhere,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(default)]
    pub unit_mode: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    pub group_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HeartbeatData {
    #[serde(rename = "clientID", default)]
    pub client_id: String,
    #[serde(
        rename = "producerDataSet",
        default,
        deserialize_with = "lenient::null_as_default"
    )]
    pub producer_data_set: Vec<ProducerData>,
    #[serde(
        rename = "consumerDataSet",
        default,
        deserialize_with = "lenient::null_as_default"
    )]
    pub consumer_data_set: Vec<ConsumerData>,
}
