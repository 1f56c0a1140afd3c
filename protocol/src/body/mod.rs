//! JSON bodies carried by nameserver and client requests, in the shape
//! fastjson 1.2.69 writes them (`RemotingSerializable`).
//!
//! Every type decodes with [`fastjson::from_slice`], which accepts both standard JSON
//! and fastjson's non-standard output (unquoted numeric keys, object keys, single
//! quotes). Encoding sorts properties alphabetically like fastjson; the few maps with
//! `Long`/`Integer` keys are written with unquoted keys unless a type offers a
//! standard-JSON encoding (see [`route::TopicRouteData::encode`]).

pub mod cluster;
pub mod consumer_list;
pub mod data_version;
pub mod fastjson;
pub mod ha;
pub mod heartbeat;
pub mod kv_table;
mod lenient;
pub mod lock_batch;
pub mod message_queue;
pub mod queue_offsets;
pub mod register_broker;
pub mod route;
pub mod topic_config;
pub mod topic_list;

pub use cluster::ClusterInfo;
pub use consumer_list::ConsumerListBody;
pub use data_version::DataVersion;
pub use heartbeat::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, ProducerData,
    SubscriptionData,
};
pub use kv_table::KvTable;
pub use lock_batch::{LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody};
pub use message_queue::MessageQueue;
pub use queue_offsets::{GetConsumerStatusBody, QueueOffsetTable, ResetOffsetBody};
pub use register_broker::RegisterBrokerBody;
pub use route::{BrokerData, MASTER_ID, QueueData, RouteEncoding, TopicRouteData};
pub use topic_config::{TopicConfig, TopicConfigSerializeWrapper, TopicFilterType};
pub use topic_list::TopicList;

use thiserror::Error;

/// Why a body could not be decoded.
#[derive(Debug, Error)]
pub enum BodyError {
    #[error("malformed JSON body: {0}")]
    Json(String),
    #[error("JSON body nests deeper than {0} levels")]
    TooDeep(usize),
    #[error("compressed body inflates to more than {0} bytes")]
    InflatedTooLarge(usize),
    #[error("corrupt compressed body: {0}")]
    Compressed(String),
}

/// Decodes a fastjson body into `T`; shorthand for [`fastjson::from_slice`].
pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    fastjson::from_slice(bytes)
}

/// Encodes `T` the way fastjson's default `toJSONString` would (sorted properties,
/// string-keyed maps only).
pub fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    fastjson::to_vec(value, fastjson::Style::Default)
}

#[cfg(test)]
mod tests;
