//! Day-2 admin calls: consumer offset reset (INVOKE_BROKER_TO_RESET_OFFSET), consumer
//! status read from the clients (INVOKE_BROKER_TO_GET_CONSUMER_STATUS), producer
//! connections, a broker's write permission on the nameservers, and the nameservers'
//! own configuration (GET/UPDATE_NAMESRV_CONFIG).

use std::collections::BTreeMap;

use protocol::RemotingCommand;
use protocol::body::{GetConsumerStatusBody, MessageQueue, ResetOffsetBody};
use protocol::code::request;
use protocol::header::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
    GetConsumerStatusRequestHeader, GetProducerConnectionListRequestHeader,
    ResetOffsetRequestHeader, WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
};
use serde::Deserialize;

use super::admin::parse_properties;
use super::bodies::ClientConnection;
use super::{Client, Peer, Result, bad_body, json_body};

/// A group's consume offsets as its connected members reported them.
#[derive(Debug, Clone, Default)]
pub struct ConsumerStatus {
    /// Client id → its offsets.
    pub answered: BTreeMap<String, Vec<(MessageQueue, i64)>>,
    /// Client id → why the broker has no offsets of it (not asked, timed out, refused).
    pub unanswered: BTreeMap<String, String>,
}

/// Where a consumer group's offsets are reset to (the `timestamp` of the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// The first message stored at or nearest to this time (ms since the epoch).
    Time(i64),
    /// Each queue's max offset: skip the backlog (`skipAccumulatedMessage`).
    Latest,
}

impl ResetTo {
    fn timestamp(self) -> i64 {
        match self {
            ResetTo::Time(t) => t,
            ResetTo::Latest => -1,
        }
    }
}

/// `ProducerConnection`, the GET_PRODUCER_CONNECTION_LIST body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProducerConnection {
    pub connection_set: Vec<ClientConnection>,
}

/// How one nameserver answered a write-permission change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermChange {
    pub namesrv: String,
    /// Topics whose permission changed on that nameserver.
    pub topics: i32,
}

impl Client {
    /// INVOKE_BROKER_TO_RESET_OFFSET on `broker`: the offsets the group now has there.
    pub async fn reset_offset(
        &self,
        broker: &Peer,
        group: &str,
        topic: &str,
        to: ResetTo,
        force: bool,
    ) -> Result<Vec<(MessageQueue, i64)>> {
        let code = request::INVOKE_BROKER_TO_RESET_OFFSET;
        let header = ResetOffsetRequestHeader {
            topic: topic.to_owned(),
            group: group.to_owned(),
            timestamp: to.timestamp(),
            is_force: force,
            queue_id: -1,
        };
        let reply = self
            .call_ok(broker, RemotingCommand::request(code, &header))
            .await?;
        let body = ResetOffsetBody::decode(&reply.body)
            .map_err(|e| bad_body(broker, code, "ResetOffsetBody", e))?;
        Ok(body.offset_table.0.into_iter().collect())
    }

    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS: each connected client's own view of its
    /// consume offsets on `topic`, by client id (`client` narrows it to one client id).
    pub async fn consumer_status(
        &self,
        broker: &Peer,
        group: &str,
        topic: &str,
        client: Option<&str>,
    ) -> Result<ConsumerStatus> {
        let code = request::INVOKE_BROKER_TO_GET_CONSUMER_STATUS;
        let header = GetConsumerStatusRequestHeader {
            topic: topic.to_owned(),
            group: group.to_owned(),
            client_addr: client.map(str::to_owned),
        };
        let reply = self
            .call_ok(broker, RemotingCommand::request(code, &header))
            .await?;
        let body = GetConsumerStatusBody::decode(&reply.body)
            .map_err(|e| bad_body(broker, code, "GetConsumerStatusBody", e))?;
        Ok(ConsumerStatus {
            answered: body
                .consumer_table
                .into_iter()
                .map(|(c, t)| (c, t.0.into_iter().collect()))
                .collect(),
            unanswered: body.unanswered_table,
        })
    }

    /// GET_PRODUCER_CONNECTION_LIST.
    pub async fn producer_connections(
        &self,
        broker: &Peer,
        group: &str,
    ) -> Result<ProducerConnection> {
        let code = request::GET_PRODUCER_CONNECTION_LIST;
        let reply = self
            .call_ok(
                broker,
                RemotingCommand::request(
                    code,
                    &GetProducerConnectionListRequestHeader {
                        producer_group: group.to_owned(),
                    },
                ),
            )
            .await?;
        json_body(broker, code, "ProducerConnection", &reply)
    }

    /// WIPE_WRITE_PERM_OF_BROKER on every nameserver: routes stop offering the broker
    /// for writes (a drain before maintenance).
    pub async fn wipe_write_perm(&self, broker_name: &str) -> Result<Vec<PermChange>> {
        let mut out = Vec::new();
        for addr in self.namesrv_addrs() {
            let peer = Peer::NameServer(addr.clone());
            let cmd = RemotingCommand::request(
                request::WIPE_WRITE_PERM_OF_BROKER,
                &WipeWritePermOfBrokerRequestHeader {
                    broker_name: broker_name.to_owned(),
                },
            );
            let reply = self.call_ok(&peer, cmd).await?;
            let h: WipeWritePermOfBrokerResponseHeader = reply.header().map_err(|e| {
                bad_body(
                    &peer,
                    request::WIPE_WRITE_PERM_OF_BROKER,
                    "response header",
                    e,
                )
            })?;
            out.push(PermChange {
                namesrv: addr.clone(),
                topics: h.wipe_topic_count,
            });
        }
        Ok(out)
    }

    /// ADD_WRITE_PERM_OF_BROKER on every nameserver: undoes [`Self::wipe_write_perm`].
    pub async fn add_write_perm(&self, broker_name: &str) -> Result<Vec<PermChange>> {
        let mut out = Vec::new();
        for addr in self.namesrv_addrs() {
            let peer = Peer::NameServer(addr.clone());
            let cmd = RemotingCommand::request(
                request::ADD_WRITE_PERM_OF_BROKER,
                &AddWritePermOfBrokerRequestHeader {
                    broker_name: broker_name.to_owned(),
                },
            );
            let reply = self.call_ok(&peer, cmd).await?;
            let h: AddWritePermOfBrokerResponseHeader = reply.header().map_err(|e| {
                bad_body(
                    &peer,
                    request::ADD_WRITE_PERM_OF_BROKER,
                    "response header",
                    e,
                )
            })?;
            out.push(PermChange {
                namesrv: addr.clone(),
                topics: h.add_topic_count,
            });
        }
        Ok(out)
    }

    /// GET_NAMESRV_CONFIG of each nameserver, by address.
    pub async fn namesrv_config(&self) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
        let mut out = BTreeMap::new();
        for addr in self.namesrv_addrs() {
            let peer = Peer::NameServer(addr.clone());
            let reply = self
                .call_ok(
                    &peer,
                    RemotingCommand::bare_request(request::GET_NAMESRV_CONFIG),
                )
                .await?;
            let text = std::str::from_utf8(&reply.body)
                .map_err(|e| bad_body(&peer, request::GET_NAMESRV_CONFIG, "properties text", e))?;
            out.insert(addr.clone(), parse_properties(text));
        }
        Ok(out)
    }

    /// UPDATE_NAMESRV_CONFIG on every nameserver; each decides which keys it allows.
    pub async fn update_namesrv_config(&self, entries: &[(String, String)]) -> Result<()> {
        let body: String = entries.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        self.namesrv_call_all(
            RemotingCommand::bare_request(request::UPDATE_NAMESRV_CONFIG)
                .with_body(body.into_bytes()),
        )
        .await
    }
}
