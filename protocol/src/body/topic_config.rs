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
}

impl TopicConfig {
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
