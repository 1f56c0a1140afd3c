//! `subscriptionGroup.json`: `SubscriptionGroupWrapper` (`SubscriptionGroupManager`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use protocol::body::DataVersion;

use super::{ConfigDocument, fastjson};

/// `SubscriptionGroupConfig` with its Java defaults; fields in fastjson's alphabetical order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    pub broker_id: i64,
    pub consume_broadcast_enable: bool,
    pub consume_enable: bool,
    pub consume_from_min_enable: bool,
    /// 5.x's FIFO flag of the group (`consumeMessageOrderly`): POP consumers of the group
    /// get a queue's messages in order, one in-flight batch at a time. Written only when
    /// set, so a 4.9 broker reading the file sees the fields it knows.
    #[serde(skip_serializing_if = "is_false")]
    pub consume_message_orderly: bool,
    pub group_name: String,
    pub notify_consumer_ids_changed_enable: bool,
    pub retry_max_times: i32,
    pub retry_queue_nums: i32,
    pub which_broker_when_consume_slowly: i64,
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        Self {
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            group_name: String::new(),
            notify_consumer_ids_changed_enable: true,
            retry_max_times: 16,
            retry_queue_nums: 1,
            which_broker_when_consume_slowly: 1,
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupTable {
    pub data_version: DataVersion,
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

impl ConfigDocument for SubscriptionGroupTable {
    const NAME: &'static str = "subscriptionGroup.json";

    fn encode(&self) -> String {
        fastjson::to_pretty(self)
    }

    fn decode(text: &str) -> Result<Self, String> {
        fastjson::parse(text)
    }
}
