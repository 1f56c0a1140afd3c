//! What the broker hands the store (RocketMQ's `MessageExtBrokerInner` and
//! `MessageExtBatch`, reduced to the fields that reach the record).

use std::net::SocketAddr;

use bytes::Bytes;
use protocol::message::properties::join_batch_properties;
use protocol::message::{MessageSysFlag, PhysicalOffset};

/// One message to store. `properties` is the already-serialized properties string
/// (U+0001 / U+0002 separators) without `WAIT`; whether the producer waits for the
/// flush is `wait_store_msg_ok`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMessage {
    pub topic: String,
    pub queue_id: i32,
    pub flag: i32,
    pub body: Bytes,
    pub properties: String,
    /// The IPv6 host bits are derived from the addresses by the store.
    pub sys_flag: MessageSysFlag,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: PhysicalOffset,
    pub wait_store_msg_ok: bool,
}

/// One inner message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchItem {
    pub flag: i32,
    pub body: Bytes,
    /// Inner properties already merged with the batch-level ones.
    pub properties: String,
}

/// A `SEND_BATCH_MESSAGE`: records with consecutive queue offsets, written contiguously
/// into one file, sharing everything but flag, body and properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchMessage {
    pub topic: String,
    pub queue_id: i32,
    pub sys_flag: MessageSysFlag,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub wait_store_msg_ok: bool,
    pub items: Vec<BatchItem>,
}

impl BatchItem {
    /// The inner messages of a batch body (`MessageDecoder.decodeMessages`), each with the
    /// batch-level `batch_properties` appended to its own; bodies are views of `body`.
    /// `None` when the body does not decode or holds no message.
    pub fn decode_batch(body: &Bytes, batch_properties: &str) -> Option<Vec<BatchItem>> {
        let mut items = Vec::new();
        for entry in protocol::message::batch::decode(body) {
            let entry = entry.ok()?;
            let mut properties =
                String::with_capacity(entry.properties.len() + batch_properties.len() + 1);
            join_batch_properties(entry.properties, batch_properties, &mut properties);
            items.push(BatchItem {
                flag: entry.flag,
                body: body.slice_ref(entry.body),
                properties,
            });
        }
        (!items.is_empty()).then_some(items)
    }
}
