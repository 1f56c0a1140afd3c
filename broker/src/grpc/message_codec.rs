//! gRPC `Message` <-> the broker's message properties, both ways.
//!
//! Into the broker: tag -> `TAGS`, keys -> `KEYS` (space-joined), message id ->
//! `UNIQ_KEY`, message group -> `__SHARDINGKEY` (5.x's FIFO property), user properties as
//! they are (a user property named like a system one is refused, as 5.x refuses it).
//! Out of the store: the record's fields as `SystemProperties` (tag, keys, message id,
//! born/store timestamps and hosts, queue id and offset, delivery attempt, message group,
//! body digest as CRC32 of the body, which the clients verify).

use std::collections::HashMap;

use grpc_api::v2::{DigestType, Encoding, Message, MessageType, Resource, SystemProperties};
use protocol::message::properties::{self, KEYS, TAGS, UNIQ_KEY};
use protocol::message::{MessageSysFlag, Properties};

/// 5.x's message-group property (`MessageConst.PROPERTY_SHARDING_KEY`).
pub const SHARDING_KEY: &str = "__SHARDINGKEY";
/// Longest property text a message may carry (the store's 16-bit length).
const MAX_PROPERTIES: usize = i16::MAX as usize;

/// Property names a client may not set as user properties (`MessageConst.STRING_HASH_SET`
/// entries the broker or the client library own).
const RESERVED: &[&str] = &[
    TAGS,
    KEYS,
    UNIQ_KEY,
    SHARDING_KEY,
    properties::WAIT,
    properties::DELAY,
    properties::TRAN_MSG,
    properties::PGROUP,
    properties::REAL_TOPIC,
    properties::REAL_QID,
    properties::RETRY_TOPIC,
    properties::MIN_OFFSET,
    properties::MAX_OFFSET,
    properties::CLUSTER,
    properties::TRANSACTION_ID,
    properties::RECONSUME_TIME,
    properties::MAX_RECONSUME_TIMES,
    properties::ORIGIN_MESSAGE_ID,
    properties::TRAN_PREPARED_QUEUE_OFFSET,
    properties::MSG_REGION,
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    #[error("message_id is empty")]
    NoMessageId,
    #[error("user property {0:?} is a reserved RocketMQ property")]
    Reserved(String),
    #[error("property names and values may not contain the characters \\u0001 or \\u0002")]
    Separator,
    #[error("the message's properties exceed {MAX_PROPERTIES} bytes")]
    TooLong,
}

fn clean(text: &str) -> Result<&str, CodecError> {
    if text.contains([
        properties::NAME_VALUE_SEPARATOR,
        properties::PROPERTY_SEPARATOR,
    ]) {
        return Err(CodecError::Separator);
    }
    Ok(text)
}

/// The broker properties of `m` (before the send adds its own: WAIT, DELAY, TRAN_MSG).
pub fn to_properties(m: &Message) -> Result<Properties, CodecError> {
    let sys = m.system_properties.clone().unwrap_or_default();
    if sys.message_id.trim().is_empty() {
        return Err(CodecError::NoMessageId);
    }
    let mut p = Properties::new();
    for (k, v) in &m.user_properties {
        if RESERVED.contains(&k.as_str()) {
            return Err(CodecError::Reserved(k.clone()));
        }
        p.insert(clean(k)?, clean(v)?);
    }
    if let Some(tag) = sys.tag.as_deref().filter(|t| !t.is_empty()) {
        p.insert(TAGS, clean(tag)?);
    }
    let keys: Vec<&str> = sys
        .keys
        .iter()
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
        .collect();
    if !keys.is_empty() {
        p.insert(KEYS, clean(&keys.join(" "))?);
    }
    p.insert(UNIQ_KEY, clean(sys.message_id.trim())?);
    if let Some(group) = sys.message_group.as_deref().filter(|g| !g.is_empty()) {
        p.insert(SHARDING_KEY, clean(group)?);
    }
    if p.to_string().len() > MAX_PROPERTIES {
        return Err(CodecError::TooLong);
    }
    Ok(p)
}

fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// What a stored message looks like to a 5.x client. `attempt` is the delivery attempt
/// (1 on first delivery: 4.x reconsume times + 1).
pub struct Stored<'a> {
    pub topic: &'a str,
    pub body: &'a [u8],
    pub properties: &'a str,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub born_timestamp: i64,
    pub born_host: std::net::SocketAddr,
    pub store_timestamp: i64,
    pub store_host: std::net::SocketAddr,
    pub reconsume_times: i32,
    pub sys_flag: MessageSysFlag,
}

/// The gRPC message of a stored record.
pub fn from_stored(s: &Stored<'_>) -> Message {
    let mut user = HashMap::new();
    let (mut tag, mut keys, mut id, mut group) = (None, Vec::new(), String::new(), None);
    let mut delayed = false;
    let mut transactional = false;
    for (name, value) in properties::iter(s.properties) {
        match name {
            TAGS => tag = Some(value.to_owned()),
            KEYS => {
                keys = value
                    .split(properties::KEY_SEPARATOR)
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
            UNIQ_KEY => id = value.to_owned(),
            SHARDING_KEY => group = Some(value.to_owned()),
            properties::DELAY => delayed = true,
            properties::TRAN_MSG => transactional = value == "true",
            n if RESERVED.contains(&n) => {}
            _ => {
                user.insert(name.to_owned(), value.to_owned());
            }
        }
    }
    let message_type = if group.is_some() {
        MessageType::Fifo
    } else if transactional {
        MessageType::Transaction
    } else if delayed {
        MessageType::Delay
    } else {
        MessageType::Normal
    };
    let crc = crc32fast::hash(s.body);
    Message {
        topic: Some(Resource {
            resource_namespace: String::new(),
            name: s.topic.to_owned(),
        }),
        user_properties: user,
        system_properties: Some(SystemProperties {
            tag,
            keys,
            message_id: id,
            body_digest: Some(grpc_api::v2::Digest {
                r#type: DigestType::Crc32 as i32,
                checksum: format!("{crc:08X}"),
            }),
            body_encoding: if s.sys_flag.is_compressed() {
                Encoding::Gzip as i32
            } else {
                Encoding::Identity as i32
            },
            message_type: message_type as i32,
            born_timestamp: Some(timestamp(s.born_timestamp)),
            born_host: s.born_host.ip().to_string(),
            store_timestamp: Some(timestamp(s.store_timestamp)),
            store_host: s.store_host.to_string(),
            queue_id: s.queue_id,
            queue_offset: Some(s.queue_offset),
            delivery_attempt: Some(s.reconsume_times.saturating_add(1)),
            message_group: group,
            ..Default::default()
        }),
        body: s.body.to_vec(),
    }
}

/// The gRPC message of an encoded store record (a check-back's body), `None` when it
/// does not decode.
pub fn from_record(buf: &[u8]) -> Option<Message> {
    let v = protocol::message::record::decode(buf, false).ok()?;
    Some(from_stored(&Stored {
        topic: v.topic(),
        body: v.body(),
        properties: v.properties(),
        queue_id: v.queue_id(),
        queue_offset: v.queue_offset().0,
        born_timestamp: v.born_timestamp(),
        born_host: v.born_host(),
        store_timestamp: v.store_timestamp(),
        store_host: v.store_host(),
        reconsume_times: v.reconsume_times(),
        sys_flag: v.sys_flag(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> Message {
        Message {
            topic: Some(Resource {
                resource_namespace: String::new(),
                name: "t".into(),
            }),
            user_properties: HashMap::from([("color".to_owned(), "red".to_owned())]),
            system_properties: Some(SystemProperties {
                tag: Some("TagA".into()),
                keys: vec!["k1".into(), "k2".into()],
                message_id: "01ABCDEF".into(),
                message_group: Some("g1".into()),
                ..Default::default()
            }),
            body: b"hello".to_vec(),
        }
    }

    #[test]
    fn round_trip_through_the_store_properties() {
        let m = message();
        let props = to_properties(&m).unwrap().to_string();
        let back = from_stored(&Stored {
            topic: "t",
            body: &m.body,
            properties: &props,
            queue_id: 3,
            queue_offset: 42,
            born_timestamp: 1_700_000_000_123,
            born_host: "10.0.0.1:1234".parse().unwrap(),
            store_timestamp: 1_700_000_000_456,
            store_host: "10.0.0.2:10911".parse().unwrap(),
            reconsume_times: 2,
            sys_flag: MessageSysFlag::default(),
        });
        let sys = back.system_properties.unwrap();
        assert_eq!(sys.tag.as_deref(), Some("TagA"));
        assert_eq!(sys.keys, vec!["k1", "k2"]);
        assert_eq!(sys.message_id, "01ABCDEF");
        assert_eq!(sys.message_group.as_deref(), Some("g1"));
        assert_eq!(sys.message_type, MessageType::Fifo as i32);
        assert_eq!((sys.queue_id, sys.queue_offset), (3, Some(42)));
        assert_eq!(sys.delivery_attempt, Some(3));
        assert_eq!(sys.born_timestamp.unwrap().nanos, 123_000_000);
        assert_eq!(sys.born_host, "10.0.0.1");
        let digest = sys.body_digest.unwrap();
        assert_eq!(
            digest.checksum,
            format!("{:08X}", crc32fast::hash(b"hello"))
        );
        assert_eq!(
            back.user_properties.get("color").map(String::as_str),
            Some("red")
        );
        assert_eq!(back.body, b"hello");
    }

    #[test]
    fn refuses_what_5x_refuses() {
        let mut m = message();
        m.system_properties.as_mut().unwrap().message_id.clear();
        assert_eq!(to_properties(&m).unwrap_err(), CodecError::NoMessageId);
        let mut m = message();
        m.user_properties.insert("UNIQ_KEY".into(), "x".into());
        assert!(matches!(to_properties(&m), Err(CodecError::Reserved(_))));
        let mut m = message();
        m.user_properties.insert("a\u{1}b".into(), "x".into());
        assert_eq!(to_properties(&m).unwrap_err(), CodecError::Separator);
        let mut m = message();
        m.user_properties.insert("big".into(), "x".repeat(40_000));
        assert_eq!(to_properties(&m).unwrap_err(), CodecError::TooLong);
    }
}
