//! Admin response and request bodies the protocol crate does not model yet
//! (`SubscriptionGroupConfig`, `ConsumerConnection`, `TopicStatsTable`, `ConsumeStats`).
//! They are decoded leniently: every field has a default, unknown fields are ignored.
//!
//! fastjson writes `Map<MessageQueue, V>` with object keys; the protocol's reader turns
//! each key into a string holding the key object's JSON, decoded here by [`queue_of`].

use std::collections::BTreeMap;

use protocol::body::{DataVersion, MessageQueue, SubscriptionData};
use serde::{Deserialize, Serialize};

/// `SubscriptionGroupConfig`: per-consumer-group settings on a broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    pub group_name: String,
    pub consume_enable: bool,
    pub consume_from_min_enable: bool,
    pub consume_broadcast_enable: bool,
    pub retry_queue_nums: i32,
    pub retry_max_times: i32,
    pub broker_id: i64,
    pub which_broker_when_consume_slowly: i64,
    pub notify_consumer_ids_changed_enable: bool,
    /// 5.x's FIFO flag: POP consumers of the group get each queue in order. Sent only
    /// when set, so 4.9 brokers see the fields they know.
    #[serde(skip_serializing_if = "is_false")]
    pub consume_message_orderly: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for SubscriptionGroupConfig {
    /// Java's field initialisers.
    fn default() -> Self {
        Self {
            group_name: String::new(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            consume_message_orderly: false,
        }
    }
}

/// `SubscriptionGroupWrapper`, the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupTable {
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
    pub data_version: Option<DataVersion>,
}

/// One client connection of a consumer group (`Connection`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClientConnection {
    pub client_id: String,
    pub client_addr: String,
    pub language: String,
    pub version: i32,
}

/// `ConsumerConnection`, the GET_CONSUMER_CONNECTION_LIST body. Enums are kept as the
/// names Java sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumerConnection {
    pub connection_set: Vec<ClientConnection>,
    pub subscription_table: BTreeMap<String, SubscriptionData>,
    pub consume_type: Option<serde_json::Value>,
    pub message_model: Option<serde_json::Value>,
    pub consume_from_where: Option<serde_json::Value>,
}

/// `TopicOffset`: one queue's offsets in a TopicStatsTable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicOffset {
    pub min_offset: i64,
    pub max_offset: i64,
    pub last_update_timestamp: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RawTopicStatsTable {
    offset_table: BTreeMap<String, TopicOffset>,
}

/// `OffsetWrapper`: one queue's progress in a ConsumeStats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OffsetWrapper {
    pub broker_offset: i64,
    pub consumer_offset: i64,
    pub last_timestamp: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RawConsumeStats {
    offset_table: BTreeMap<String, OffsetWrapper>,
    consume_tps: f64,
}

/// A decoded ConsumeStats.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumeStats {
    pub offsets: Vec<(MessageQueue, OffsetWrapper)>,
    pub consume_tps: f64,
}

/// The MessageQueue a normalized object key stands for.
fn queue_of(key: &str) -> Result<MessageQueue, protocol::body::BodyError> {
    protocol::body::decode(key.as_bytes())
}

fn keyed<V>(
    table: BTreeMap<String, V>,
) -> Result<Vec<(MessageQueue, V)>, protocol::body::BodyError> {
    let mut out = table
        .into_iter()
        .map(|(k, v)| queue_of(&k).map(|q| (q, v)))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Decodes a GET_TOPIC_STATS_INFO body into per-queue offsets, ordered by queue.
pub fn decode_topic_stats(
    body: &[u8],
) -> Result<Vec<(MessageQueue, TopicOffset)>, protocol::body::BodyError> {
    let raw: RawTopicStatsTable = protocol::body::decode(body)?;
    keyed(raw.offset_table)
}

/// Decodes a GET_CONSUME_STATS body.
pub fn decode_consume_stats(body: &[u8]) -> Result<ConsumeStats, protocol::body::BodyError> {
    let raw: RawConsumeStats = protocol::body::decode(body)?;
    Ok(ConsumeStats {
        offsets: keyed(raw.offset_table)?,
        consume_tps: raw.consume_tps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fastjson_object_keys_decode_to_queues() {
        let body = br#"{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":5,"maxOffset":9,"minOffset":0},{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}"#;
        let stats = decode_topic_stats(body).unwrap();
        assert_eq!(stats.len(), 2);
        assert_eq!(stats[0].0.queue_id, 0);
        assert_eq!(stats[1].1.max_offset, 9);

        let body = br#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":7}}}"#;
        let cs = decode_consume_stats(body).unwrap();
        assert_eq!(cs.consume_tps, 1.5);
        assert_eq!(cs.offsets[0].0.queue_id, 3);
        assert_eq!(
            cs.offsets[0].1.broker_offset - cs.offsets[0].1.consumer_offset,
            6
        );
        assert!(decode_consume_stats(b"{\"offsetTable\":{\"notjson\":{}}}").is_err());
    }

    #[test]
    fn group_config_round_trips_with_java_defaults() {
        let g: SubscriptionGroupConfig = protocol::body::decode(br#"{"groupName":"G"}"#).unwrap();
        assert_eq!((g.retry_max_times, g.consume_enable), (16, true));
        let back: SubscriptionGroupConfig =
            protocol::body::decode(&protocol::body::encode(&g)).unwrap();
        assert_eq!(back, g);
    }
}
