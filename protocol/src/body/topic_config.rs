//! `TopicConfig` and `TopicConfigSerializeWrapper` (`common/TopicConfig.java`,
//! `common/protocol/body/TopicConfigSerializeWrapper.java`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::DataVersion;
use super::lenient::{self, java_enum};

java_enum! {
    /// `TopicFilterType`.
    #[derive(Default)]
    pub enum TopicFilterType {
        #[default]
        SingleTag = "SINGLE_TAG",
        MultiTag = "MULTI_TAG",
    }
}

/// Java's field initial values: 16 queues each way, perm READ|WRITE.
const DEFAULT_QUEUE_NUMS: i32 = 16;
const DEFAULT_PERM: i32 = 6;

fn default_queue_nums() -> i32 {
    DEFAULT_QUEUE_NUMS
}
fn default_perm() -> i32 {
    DEFAULT_PERM
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    #[serde(default)]
    pub topic_name: String,
    #[serde(default = "default_queue_nums")]
    pub read_queue_nums: i32,
    #[serde(default = "default_queue_nums")]
    pub write_queue_nums: i32,
    #[serde(default = "default_perm")]
    pub perm: i32,
    #[serde(default)]
    pub topic_filter_type: TopicFilterType,
    #[serde(default)]
    pub topic_sys_flag: i32,
    #[serde(default)]
    pub order: bool,
    /// RocketMQ 5.x topic attributes (`TopicConfig.attributes`), e.g. `message.type`.
    /// Written only when set, so a topics.json without them is byte-identical to
    /// before; 4.9 ignores the field.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// The 5.x topic attribute naming which message types a topic takes
/// (`TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE`).
pub const MESSAGE_TYPE_ATTRIBUTE: &str = "message.type";

/// Values of [`MESSAGE_TYPE_ATTRIBUTE`] (5.x `TopicMessageType`).
pub const MESSAGE_TYPES: [&str; 5] = ["NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"];

/// Most attributes one UPDATE_AND_CREATE_TOPIC may carry.
pub const MAX_TOPIC_ATTRIBUTES: usize = 8;

/// Why an `attributes` header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AttributeError(pub String);

/// Applies a 5.x `attributes` header (`+key=value` sets, `-key` removes, comma
/// separated; `AttributeParser.parseToMap`) to `current`. Only `message.type` with one
/// of [`MESSAGE_TYPES`] is known; anything else is refused, as 5.x refuses unknown
/// attributes.
pub fn apply_attributes(
    current: &BTreeMap<String, String>,
    header: &str,
) -> Result<BTreeMap<String, String>, AttributeError> {
    let mut out = current.clone();
    let entries: Vec<&str> = header.split(',').filter(|e| !e.is_empty()).collect();
    if entries.len() > MAX_TOPIC_ATTRIBUTES {
        return Err(AttributeError(format!(
            "at most {MAX_TOPIC_ATTRIBUTES} topic attributes per request"
        )));
    }
    for e in entries {
        let (set, rest) = match e.split_at(1) {
            ("+", rest) => (true, rest),
            ("-", rest) => (false, rest),
            _ => {
                return Err(AttributeError(format!(
                    "topic attribute {e:?} must start with + (set) or - (remove)"
                )));
            }
        };
        let (key, value) = match (set, rest.split_once('=')) {
            (true, Some((k, v))) => (k, Some(v)),
            (false, None) => (rest, None),
            _ => {
                return Err(AttributeError(format!(
                    "topic attribute {e:?}: +key=value sets, -key removes"
                )));
            }
        };
        if key != MESSAGE_TYPE_ATTRIBUTE {
            return Err(AttributeError(format!(
                "unknown topic attribute {key:?} (known: {MESSAGE_TYPE_ATTRIBUTE})"
            )));
        }
        match value {
            Some(v) if MESSAGE_TYPES.contains(&v) => {
                out.insert(key.to_owned(), v.to_owned());
            }
            Some(v) => {
                return Err(AttributeError(format!(
                    "{MESSAGE_TYPE_ATTRIBUTE} {v:?} is not one of {}",
                    MESSAGE_TYPES.join(", ")
                )));
            }
            None => {
                out.remove(key);
            }
        }
    }
    Ok(out)
}

/// The `attributes` header that sets every attribute of `attributes`.
pub fn attributes_header(attributes: &BTreeMap<String, String>) -> Option<String> {
    (!attributes.is_empty()).then(|| {
        attributes
            .iter()
            .map(|(k, v)| format!("+{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

impl TopicConfig {
    /// The topic's 5.x message type; `None` (every type accepted) when unset.
    pub fn message_type(&self) -> Option<&str> {
        self.attributes
            .get(MESSAGE_TYPE_ATTRIBUTE)
            .map(String::as_str)
    }

    /// A config with Java's defaults for everything but the name.
    pub fn new(topic_name: impl Into<String>) -> Self {
        Self {
            topic_name: topic_name.into(),
            read_queue_nums: DEFAULT_QUEUE_NUMS,
            write_queue_nums: DEFAULT_QUEUE_NUMS,
            perm: DEFAULT_PERM,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_sys_flag: 0,
            order: false,
            attributes: BTreeMap::new(),
        }
    }

    /// `TopicConfig.encode()`: the space-separated line used by the compressed
    /// registration body. topicSysFlag and order are not part of it.
    pub fn encode_line(&self) -> String {
        format!(
            "{} {} {} {} {}",
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type.name()
        )
    }

    /// `TopicConfig.decode()`: exactly five fields, else `None`.
    pub fn decode_line(line: &str) -> Option<Self> {
        let parts: Vec<&str> = line.split(' ').collect();
        let [name, read, write, perm, filter] = parts.as_slice() else {
            return None;
        };
        Some(Self {
            read_queue_nums: read.parse().ok()?,
            write_queue_nums: write.parse().ok()?,
            perm: perm.parse().ok()?,
            topic_filter_type: TopicFilterType::from_name(filter)?,
            ..Self::new(*name)
        })
    }
}

/// The broker's topic table as sent in registrations and GET_ALL_TOPIC_CONFIG.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub data_version: DataVersion,
}

#[cfg(test)]
mod attribute_tests {
    use super::*;

    #[test]
    fn attributes_set_remove_and_refuse_the_unknown() {
        let none = BTreeMap::new();
        let fifo = apply_attributes(&none, "+message.type=FIFO").unwrap();
        assert_eq!(fifo.get("message.type").map(String::as_str), Some("FIFO"));
        assert_eq!(apply_attributes(&fifo, "-message.type").unwrap(), none);
        assert_eq!(apply_attributes(&fifo, "").unwrap(), fifo);
        for bad in [
            "message.type=FIFO",
            "+message.type",
            "-message.type=FIFO",
            "+message.type=LITE",
            "+retention=1d",
            "+",
        ] {
            assert!(apply_attributes(&none, bad).is_err(), "{bad}");
        }
        let many = ["+message.type=FIFO"; MAX_TOPIC_ATTRIBUTES + 1].join(",");
        assert!(apply_attributes(&none, &many).is_err());
        assert_eq!(
            attributes_header(&fifo).as_deref(),
            Some("+message.type=FIFO")
        );
        assert_eq!(attributes_header(&none), None);
    }

    #[test]
    fn attributes_are_written_only_when_set() {
        let mut c = TopicConfig::new("T");
        let plain = serde_json::to_string(&c).unwrap();
        assert!(!plain.contains("attributes"), "{plain}");
        c.attributes
            .insert(MESSAGE_TYPE_ATTRIBUTE.to_owned(), "DELAY".to_owned());
        let json = serde_json::to_string(&c).unwrap();
        assert!(
            json.contains(r#""attributes":{"message.type":"DELAY"}"#),
            "{json}"
        );
        let back: TopicConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back.message_type(), Some("DELAY"));
    }
}
