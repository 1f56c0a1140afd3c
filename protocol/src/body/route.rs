//! `TopicRouteData`, `QueueData`, `BrokerData` (`common/protocol/route/*.java`), the body
//! of GET_ROUTEINFO_BY_TOPIC.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fastjson::{self, Style};
use super::lenient;
use super::{BodyError, ClusterInfo};

/// brokerId of a master (`MixAll.MASTER_ID`).
pub const MASTER_ID: i64 = 0;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    pub broker_name: String,
    #[serde(default)]
    pub read_queue_nums: i32,
    #[serde(default)]
    pub write_queue_nums: i32,
    #[serde(default)]
    pub perm: i32,
    /// Spelled `topicSynFlag` by RocketMQ releases before 4.5.
    #[serde(default, alias = "topicSynFlag")]
    pub topic_sys_flag: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    #[serde(default)]
    pub cluster: String,
    pub broker_name: String,
    /// brokerId → "ip:port"; id 0 is the master. A Java `Map<Long, String>`, hence the
    /// unquoted keys in the legacy encoding.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    /// A RocketMQ 5 property, absent from 4.x routes. Some 5.x-only clients
    /// (rocketmq-client-rust) refuse a BrokerData without it; see
    /// [`TopicRouteData::fill_v5_fields`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_acting_master: Option<bool>,
    /// Not a RocketMQ property: brokerId → "host:port" of that broker's 5.x gRPC
    /// endpoint (host: the address it registered, brokerIP1), for brokers that
    /// registered one. Omitted when empty, so a route without gRPC brokers is
    /// byte-identical to 4.9's; 4.x clients ignore unknown properties. Always standard
    /// JSON (quoted keys): no RocketMQ class reads it as a `Map<Long, _>`.
    #[serde(
        default,
        deserialize_with = "lenient::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub grpc_addrs: BTreeMap<i64, String>,
}

impl BrokerData {
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&MASTER_ID).map(String::as_str)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    /// `broker-a:4;broker-b:4`, only when the nameserver has `orderMessageEnable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub queue_datas: Vec<QueueData>,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub broker_datas: Vec<BrokerData>,
    /// brokerAddr → filter server addresses (legacy filter servers; normally empty).
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
}

/// Which JSON a route is written in (`DefaultRequestProcessor.getRouteInfoByTopic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteEncoding {
    /// fastjson BrowserCompatible: standard JSON, quoted `"0"` keys.
    Standard,
    /// fastjson default: `brokerAddrs` keys unquoted (`{0:"..."}`).
    Legacy,
}

/// `MQVersion.Version.V4_9_4.ordinal()`: from this client version on, routes are sent
/// as standard JSON.
pub const STANDARD_JSON_MIN_VERSION: i32 = 401;

impl RouteEncoding {
    /// The Java nameserver's choice for a request of `version` with the optional
    /// `acceptStandardJsonOnly` header.
    pub fn for_request(version: i32, accept_standard_json_only: Option<bool>) -> Self {
        if version >= STANDARD_JSON_MIN_VERSION || accept_standard_json_only == Some(true) {
            RouteEncoding::Standard
        } else {
            RouteEncoding::Legacy
        }
    }
}

/// `MQVersion.Version.V5_0_0.ordinal()`: clients at or above it speak the 5.x route shape.
pub const V5_MIN_VERSION: i32 = 413;

/// Java `Map<Long, _>` properties in route and cluster bodies.
const NUMERIC_KEY_FIELDS: &[&str] = &["brokerAddrs"];

impl TopicRouteData {
    pub fn encode(&self, encoding: RouteEncoding) -> Vec<u8> {
        match encoding {
            RouteEncoding::Standard => fastjson::to_vec(self, Style::Browser),
            RouteEncoding::Legacy => {
                fastjson::to_vec_with(self, Style::Default, NUMERIC_KEY_FIELDS)
            }
        }
    }

    /// Reads either encoding.
    pub fn decode(bytes: &[u8]) -> Result<Self, BodyError> {
        fastjson::from_slice(bytes)
    }

    /// Adds the 5.x BrokerData property `enableActingMaster=false` (what a 5.x
    /// nameserver sends when no acting master exists). Harmless to 4.x readers, which
    /// ignore unknown properties; required by clients whose parser is strict.
    pub fn fill_v5_fields(&mut self) {
        for bd in &mut self.broker_datas {
            bd.enable_acting_master.get_or_insert(false);
        }
    }
}

impl ClusterInfo {
    /// fastjson's default output, with unquoted brokerId keys.
    pub fn encode(&self) -> Vec<u8> {
        fastjson::to_vec_with(self, Style::Default, NUMERIC_KEY_FIELDS)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, BodyError> {
        fastjson::from_slice(bytes)
    }

    /// See [`TopicRouteData::fill_v5_fields`].
    pub fn fill_v5_fields(&mut self) {
        for bd in self.broker_addr_table.values_mut() {
            bd.enable_acting_master.get_or_insert(false);
        }
    }
}

#[cfg(test)]
mod tests;
