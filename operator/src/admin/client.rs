//! Remoting-protocol admin client over TCP: one short connection per call (the operator
//! calls rarely, and a fresh connection never carries a stale half-read frame).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use protocol::code::{request, response};
use protocol::{ExtFields, RemotingCodec, RemotingCommand};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

use super::ha::{self, EpochCache, HaStatus, RoleChange};
use super::{Admin, AdminError, ClusterInfo, RuntimeInfo, TopicConfig, lenient_json};
use crate::builders::config_file::render_properties;

/// RocketMQ's default topic template for UPDATE_AND_CREATE_TOPIC (`TopicValidator`
/// `AUTO_CREATE_TOPIC_KEY_TOPIC`).
const DEFAULT_TOPIC: &str = "TBW102";
/// Admin bodies are small; anything bigger is refused before allocation.
const MAX_FRAME: usize = 8 * 1024 * 1024;

#[derive(Debug)]
pub struct RemotingAdmin {
    timeout: Duration,
    next_opaque: AtomicI32,
}

impl RemotingAdmin {
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            next_opaque: AtomicI32::new(1),
        }
    }

    /// Sends `cmd` to `addr` and returns the response with the same opaque.
    pub async fn call(
        &self,
        addr: &str,
        mut cmd: RemotingCommand,
    ) -> Result<RemotingCommand, AdminError> {
        cmd.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        let opaque = cmd.opaque;
        let timeout_ms = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let exchange = async {
            let stream = TcpStream::connect(addr)
                .await
                .map_err(|source| AdminError::Connect {
                    addr: addr.to_owned(),
                    source,
                })?;
            let mut framed = Framed::new(stream, RemotingCodec::new(MAX_FRAME));
            framed
                .send(cmd)
                .await
                .map_err(|source| protocol_error(addr, source))?;
            while let Some(frame) = framed.next().await {
                let reply = frame.map_err(|source| protocol_error(addr, source))?;
                if reply.is_response() && reply.opaque == opaque {
                    return Ok(reply);
                }
            }
            Err(AdminError::Closed {
                addr: addr.to_owned(),
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| AdminError::Timeout {
                addr: addr.to_owned(),
                timeout_ms,
            })?
    }

    /// [`Self::call`], failing unless the response code is SUCCESS.
    async fn call_ok(
        &self,
        addr: &str,
        code: i32,
        fields: ExtFields,
        body: Vec<u8>,
    ) -> Result<RemotingCommand, AdminError> {
        let mut cmd = RemotingCommand::bare_request(code).with_body(body);
        cmd.ext_fields = fields;
        let reply = self.call(addr, cmd).await?;
        if reply.code != response::SUCCESS {
            return Err(AdminError::Refused {
                addr: addr.to_owned(),
                request: request::name(code)
                    .or_else(|| ha::code::name(code))
                    .unwrap_or("UNKNOWN"),
                code: reply.code,
                remark: reply.remark.unwrap_or_default(),
            });
        }
        Ok(reply)
    }
}

fn protocol_error(addr: &str, source: protocol::ProtocolError) -> AdminError {
    AdminError::Protocol {
        addr: addr.to_owned(),
        source,
    }
}

fn bad_body(addr: &str, what: &'static str, reason: impl ToString) -> AdminError {
    AdminError::BadBody {
        addr: addr.to_owned(),
        what,
        reason: reason.to_string(),
    }
}

/// The `CreateTopicRequestHeader` fields of a topic.
pub fn create_topic_fields(config: &TopicConfig) -> ExtFields {
    ExtFields::from_iter([
        ("topic", config.topic.clone()),
        ("defaultTopic", DEFAULT_TOPIC.to_owned()),
        ("readQueueNums", config.read_queues.to_string()),
        ("writeQueueNums", config.write_queues.to_string()),
        ("perm", config.perm.to_string()),
        ("topicFilterType", "SINGLE_TAG".to_owned()),
        ("topicSysFlag", "0".to_owned()),
        ("order", config.order.to_string()),
    ])
}

#[derive(serde::Deserialize)]
struct KvTable {
    #[serde(default)]
    table: BTreeMap<String, String>,
}

impl Admin for RemotingAdmin {
    fn cluster_info<'a>(
        &'a self,
        namesrv: &'a str,
    ) -> BoxFuture<'a, Result<ClusterInfo, AdminError>> {
        Box::pin(async move {
            let reply = self
                .call_ok(
                    namesrv,
                    request::GET_BROKER_CLUSTER_INFO,
                    ExtFields::new(),
                    Vec::new(),
                )
                .await?;
            lenient_json::from_slice(&reply.body).map_err(|e| bad_body(namesrv, "ClusterInfo", e))
        })
    }

    fn create_topic<'a>(
        &'a self,
        broker: &'a str,
        config: &'a TopicConfig,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            self.call_ok(
                broker,
                request::UPDATE_AND_CREATE_TOPIC,
                create_topic_fields(config),
                Vec::new(),
            )
            .await
            .map(drop)
        })
    }

    fn delete_topic_in_broker<'a>(
        &'a self,
        broker: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let fields = ExtFields::from_iter([("topic", topic)]);
            self.call_ok(broker, request::DELETE_TOPIC_IN_BROKER, fields, Vec::new())
                .await
                .map(drop)
        })
    }

    fn delete_topic_in_namesrv<'a>(
        &'a self,
        namesrv: &'a str,
        topic: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let fields = ExtFields::from_iter([("topic", topic), ("clusterName", cluster)]);
            self.call_ok(
                namesrv,
                request::DELETE_TOPIC_IN_NAMESRV,
                fields,
                Vec::new(),
            )
            .await
            .map(drop)
        })
    }

    fn runtime_info<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<RuntimeInfo, AdminError>> {
        Box::pin(async move {
            let reply = self
                .call_ok(
                    broker,
                    request::GET_BROKER_RUNTIME_INFO,
                    ExtFields::new(),
                    Vec::new(),
                )
                .await?;
            let kv: KvTable = lenient_json::from_slice(&reply.body)
                .map_err(|e| bad_body(broker, "KVTable", e))?;
            Ok(RuntimeInfo(kv.table))
        })
    }

    fn topic_configs<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, TopicConfig>, AdminError>> {
        Box::pin(async move {
            let reply = self
                .call_ok(
                    broker,
                    request::GET_ALL_TOPIC_CONFIG,
                    ExtFields::new(),
                    Vec::new(),
                )
                .await?;
            let wrapper: protocol::body::topic_config::TopicConfigSerializeWrapper =
                lenient_json::from_slice(&reply.body)
                    .map_err(|e| bad_body(broker, "TopicConfigSerializeWrapper", e))?;
            Ok(wrapper
                .topic_config_table
                .into_iter()
                .map(|(name, c)| {
                    let config = TopicConfig {
                        topic: name.clone(),
                        read_queues: c.read_queue_nums,
                        write_queues: c.write_queue_nums,
                        perm: c.perm,
                        order: c.order,
                    };
                    (name, config)
                })
                .collect())
        })
    }

    fn update_broker_config<'a>(
        &'a self,
        broker: &'a str,
        properties: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let body = render_properties(properties).into_bytes();
            self.call_ok(
                broker,
                request::UPDATE_BROKER_CONFIG,
                ExtFields::new(),
                body,
            )
            .await
            .map(drop)
        })
    }

    fn ha_status<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<HaStatus, AdminError>> {
        Box::pin(async move {
            let reply = self
                .call_ok(
                    broker,
                    ha::code::GET_BROKER_HA_STATUS,
                    ExtFields::new(),
                    Vec::new(),
                )
                .await?;
            lenient_json::from_slice(&reply.body).map_err(|e| bad_body(broker, "HaStatus", e))
        })
    }

    fn epoch_cache<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<EpochCache, AdminError>> {
        Box::pin(async move {
            let reply = self
                .call_ok(
                    broker,
                    ha::code::GET_BROKER_EPOCH_CACHE,
                    ExtFields::new(),
                    Vec::new(),
                )
                .await?;
            lenient_json::from_slice(&reply.body)
                .map_err(|e| bad_body(broker, "EpochEntryCache", e))
        })
    }

    fn notify_role_changed<'a>(
        &'a self,
        broker: &'a str,
        change: &'a RoleChange,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            self.call_ok(
                broker,
                ha::code::NOTIFY_BROKER_ROLE_CHANGED,
                change.ext_fields(),
                Vec::new(),
            )
            .await
            .map(drop)
        })
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
