//! Bodies keyed by `MessageQueue` with an offset per queue: `ResetOffsetBody` (220, 222)
//! and `GetConsumerStatusBody` (221, 223). fastjson writes `Map<MessageQueue, Long>` with
//! the queue objects themselves as keys (`{{"brokerName":"b","queueId":0,"topic":"T"}:5}`,
//! as fastjson writes a `Map<MessageQueue, Long>`); that is what Java and `rocketmq-client-rust` clients parse, so it is
//! what [`QueueOffsetTable::write_json`] writes.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{BodyError, MessageQueue};

/// `Map<MessageQueue, Long>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueOffsetTable(pub BTreeMap<MessageQueue, i64>);

impl QueueOffsetTable {
    /// Appends the table as a fastjson object-keyed map.
    pub fn write_json(&self, out: &mut String) {
        out.push('{');
        for (n, (mq, offset)) in self.0.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&String::from_utf8_lossy(&super::encode(mq)));
            out.push(':');
            out.push_str(&offset.to_string());
        }
        out.push('}');
    }

    /// From the decoder's view of an object-keyed map (keys hold the queue's JSON text).
    fn from_keys(raw: BTreeMap<String, i64>) -> Result<Self, BodyError> {
        raw.into_iter()
            .map(|(k, v)| Ok((super::decode::<MessageQueue>(k.as_bytes())?, v)))
            .collect::<Result<_, BodyError>>()
            .map(Self)
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawReset {
    offset_table: BTreeMap<String, i64>,
}

/// `ResetOffsetBody`: the offsets a consumer group is reset to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResetOffsetBody {
    pub offset_table: QueueOffsetTable,
}

impl ResetOffsetBody {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = String::from("{\"offsetTable\":");
        self.offset_table.write_json(&mut out);
        out.push('}');
        out.into_bytes()
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let raw: RawReset = super::decode(body)?;
        Ok(Self {
            offset_table: QueueOffsetTable::from_keys(raw.offset_table)?,
        })
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawStatus {
    message_queue_table: BTreeMap<String, i64>,
    consumer_table: BTreeMap<String, BTreeMap<String, i64>>,
    unanswered_table: BTreeMap<String, String>,
}

/// `GetConsumerStatusBody`: a client's consume offsets (`messageQueueTable`, its answer
/// to 221), or every client's by client id (`consumerTable`, the broker's answer to 223).
/// `unansweredTable` (client id → why) is ours: the members the broker asked, or could
/// not ask, without getting offsets back. fastjson readers (mqadmin) skip the unknown
/// field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetConsumerStatusBody {
    pub message_queue_table: QueueOffsetTable,
    pub consumer_table: BTreeMap<String, QueueOffsetTable>,
    pub unanswered_table: BTreeMap<String, String>,
}

impl GetConsumerStatusBody {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = String::from("{\"consumerTable\":{");
        for (n, (client, table)) in self.consumer_table.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::Value::from(client.as_str()).to_string());
            out.push(':');
            table.write_json(&mut out);
        }
        out.push_str("},\"messageQueueTable\":");
        self.message_queue_table.write_json(&mut out);
        if !self.unanswered_table.is_empty() {
            out.push_str(",\"unansweredTable\":");
            out.push_str(&serde_json::to_string(&self.unanswered_table).unwrap_or_default());
        }
        out.push('}');
        out.into_bytes()
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let raw: RawStatus = super::decode(body)?;
        Ok(Self {
            message_queue_table: QueueOffsetTable::from_keys(raw.message_queue_table)?,
            consumer_table: raw
                .consumer_table
                .into_iter()
                .map(|(c, t)| Ok((c, QueueOffsetTable::from_keys(t)?)))
                .collect::<Result<_, BodyError>>()?,
            unanswered_table: raw.unanswered_table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue {
            topic: "T".into(),
            broker_name: "b".into(),
            queue_id: q,
        }
    }

    #[test]
    fn reset_body_is_object_keyed_and_round_trips() {
        let body = ResetOffsetBody {
            offset_table: QueueOffsetTable(BTreeMap::from([(mq(0), 5), (mq(1), 0)])),
        };
        let bytes = body.encode();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:0}}"#
        );
        assert_eq!(ResetOffsetBody::decode(&bytes).unwrap(), body);
        assert!(ResetOffsetBody::decode(b"{\"offsetTable\":{\"x\":1}}").is_err());
        assert!(ResetOffsetBody::decode(b"not json").is_err());
    }

    #[test]
    fn status_body_round_trips_both_tables() {
        let body = GetConsumerStatusBody {
            message_queue_table: QueueOffsetTable(BTreeMap::from([(mq(2), 7)])),
            consumer_table: BTreeMap::from([(
                "127.0.0.1@\"x\"".to_owned(),
                QueueOffsetTable(BTreeMap::from([(mq(0), 3)])),
            )]),
            unanswered_table: BTreeMap::from([(
                "127.0.0.1@cpp".to_owned(),
                "does not implement it".to_owned(),
            )]),
        };
        assert_eq!(GetConsumerStatusBody::decode(&body.encode()).unwrap(), body);
        // A client's answer carries only messageQueueTable.
        let client = br#"{"messageQueueTable":{{"brokerName":"b","queueId":2,"topic":"T"}:7}}"#;
        let decoded = GetConsumerStatusBody::decode(client).unwrap();
        assert_eq!(decoded.message_queue_table.0.get(&mq(2)), Some(&7));
    }
}
