//! Messages in both directions: [`Message`] is an owned, decoded stored record (from a
//! pull, query or view body); [`OutgoingMessage`] is what a producer sends.

use std::net::SocketAddr;

use bytes::Bytes;
use protocol::message::properties::{self, Properties};
use protocol::message::record::{RecordView, records};
use protocol::message::{MessageSysFlag, PhysicalOffset, QueueOffset};
use serde::Serialize;

/// Largest body a compressed message may inflate to (the broker's default max size).
const MAX_INFLATED: usize = 4 * 1024 * 1024;

/// A stored message, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: QueueOffset,
    pub physical_offset: PhysicalOffset,
    /// The client msgId (`UNIQ_KEY`), or the offset msgId when the producer set none.
    pub msg_id: String,
    pub offset_msg_id: String,
    pub born_timestamp: i64,
    pub store_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub sys_flag: i32,
    /// Properties as name → value, in stored order.
    pub properties: Vec<(String, String)>,
    #[serde(skip)]
    pub body: Bytes,
}

impl Message {
    pub fn from_record(view: &RecordView<'_>) -> Result<Self, String> {
        let props = Properties::parse(view.properties());
        let offset_msg_id = view.offset_msg_id();
        let body =
            protocol::message::compress::plain_body(view.sys_flag(), view.body(), MAX_INFLATED)
                .map_err(|e| e.to_string())?;
        Ok(Self {
            topic: view.topic().to_owned(),
            queue_id: view.queue_id(),
            queue_offset: view.queue_offset(),
            physical_offset: view.physical_offset(),
            msg_id: props
                .get(properties::UNIQ_KEY)
                .map_or_else(|| offset_msg_id.clone(), str::to_owned),
            offset_msg_id,
            born_timestamp: view.born_timestamp(),
            store_timestamp: view.store_timestamp(),
            born_host: view.born_host(),
            store_host: view.store_host(),
            reconsume_times: view.reconsume_times(),
            sys_flag: view.sys_flag().bits(),
            properties: props
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            body: Bytes::copy_from_slice(&body),
        })
    }

    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn tags(&self) -> Option<&str> {
        self.property(properties::TAGS)
    }

    pub fn keys(&self) -> Option<&str> {
        self.property(properties::KEYS)
    }
}

/// Decodes every record of a pull / query body (CRC not checked: the broker checked it).
pub fn decode_messages(body: &[u8]) -> Result<Vec<Message>, String> {
    records(body, false)
        .map(|r| {
            r.map_err(|e| e.to_string())
                .and_then(|v| Message::from_record(&v))
        })
        .collect()
}

/// A message to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutgoingMessage {
    pub topic: String,
    pub body: Bytes,
    pub tags: Option<String>,
    pub keys: Vec<String>,
    /// `DELAY` level (1 = 1 s ... 18 = 2 h with the default levels).
    pub delay_level: Option<i32>,
    /// More user properties.
    pub user_properties: Vec<(String, String)>,
    pub flag: i32,
}

impl OutgoingMessage {
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            body: body.into(),
            ..Self::default()
        }
    }

    /// The properties string sent with the message: user properties, then KEYS, TAGS,
    /// DELAY, the given `UNIQ_KEY`, and `extra` (e.g. TRAN_MSG, PGROUP).
    pub fn properties_text(&self, uniq_key: &str, extra: &[(&str, &str)]) -> String {
        let mut p = Properties::new();
        for (k, v) in &self.user_properties {
            p.insert(k.clone(), v.clone());
        }
        if !self.keys.is_empty() {
            p.insert(properties::KEYS, self.keys.join(" "));
        }
        if let Some(t) = &self.tags {
            p.insert(properties::TAGS, t.clone());
        }
        if let Some(level) = self.delay_level.filter(|l| *l > 0) {
            p.insert(properties::DELAY, level.to_string());
        }
        p.insert(properties::UNIQ_KEY, uniq_key);
        for (k, v) in extra {
            p.insert(*k, *v);
        }
        let mut out = String::with_capacity(p.encoded_len());
        p.write_to(&mut out);
        out
    }

    /// The sysFlag a plain (non-transactional, uncompressed) send carries.
    pub fn sys_flag(transactional: bool) -> MessageSysFlag {
        if transactional {
            MessageSysFlag(MessageSysFlag::TRANSACTION_PREPARED_TYPE)
        } else {
            MessageSysFlag(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::message::record::{MessageRecord, StoreStamp};

    #[test]
    fn properties_carry_keys_tags_delay_and_uniq_key() {
        let mut m = OutgoingMessage::new("T", &b"x"[..]);
        m.keys = vec!["k1".into(), "k2".into()];
        m.tags = Some("tagA".into());
        m.delay_level = Some(3);
        let text = m.properties_text("UK", &[("TRAN_MSG", "true")]);
        let p = Properties::parse(&text);
        assert_eq!(p.get("KEYS"), Some("k1 k2"));
        assert_eq!(p.get("TAGS"), Some("tagA"));
        assert_eq!(p.get("DELAY"), Some("3"));
        assert_eq!(p.get("UNIQ_KEY"), Some("UK"));
        assert_eq!(p.get("TRAN_MSG"), Some("true"));
    }

    #[test]
    fn records_decode_into_messages_and_garbage_is_an_error() {
        let props = "UNIQ_KEY\u{1}ABC\u{2}TAGS\u{1}t";
        let rec = MessageRecord {
            topic: "T",
            queue_id: 1,
            flag: 0,
            body: b"hello",
            properties: props,
            sys_flag: MessageSysFlag(0),
            born_timestamp: 5,
            born_host: "127.0.0.1:1".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: PhysicalOffset(0),
            body_crc: None,
        };
        let stamp = StoreStamp {
            queue_offset: QueueOffset(7),
            physical_offset: PhysicalOffset(100),
            store_timestamp: 6,
            store_host: "127.0.0.1:10911".parse().unwrap(),
        };
        let bytes = rec.encode_to_vec(&stamp).unwrap();
        let msgs = decode_messages(&bytes).unwrap();
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].msg_id, "ABC");
        assert_eq!(msgs[0].queue_offset, QueueOffset(7));
        assert_eq!(msgs[0].tags(), Some("t"));
        assert_eq!(&msgs[0].body[..], b"hello");
        assert!(decode_messages(&bytes[..bytes.len() - 1]).is_err());
    }
}
