//! GET_PRODUCER_CONNECTION_LIST (204, `AdminBrokerProcessor.getProducerConnectionList`):
//! the connections of a producer group, for mqadmin's `producerConnection`.

use std::net::SocketAddr;
use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::response;
use protocol::header::GetProducerConnectionListRequestHeader;
use serde::Serialize;

use super::{HandlerResult, error, success};
use crate::services::Broker;
use crate::services::clients::ClientInfo;

/// `Connection`: one client connection of a producer or consumer group, as both
/// GET_PRODUCER_CONNECTION_LIST and GET_CONSUMER_CONNECTION_LIST list them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Connection {
    client_addr: String,
    client_id: String,
    language: String,
    version: i32,
}

/// The `connectionSet` of a group's connections.
pub(super) fn connection_set(conns: Vec<(ClientInfo, SocketAddr)>) -> Vec<Connection> {
    conns
        .into_iter()
        .map(|(c, peer)| Connection {
            client_addr: peer.to_string(),
            client_id: c.client_id,
            language: c.language.name().to_owned(),
            version: c.version,
        })
        .collect()
}

/// `ProducerConnection`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProducerConnection {
    connection_set: Vec<Connection>,
}

pub fn producer_connections(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetProducerConnectionListRequestHeader = request.header()?;
    let conns = broker.clients.producer_connections(&h.producer_group);
    if conns.is_empty() {
        // 4.9 answers SYSTEM_ERROR "the producer group not exist" for an unknown group.
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("the producer group[{}] not exist", h.producer_group),
        );
    }
    let body = ProducerConnection {
        connection_set: connection_set(conns),
    };
    Ok(success(request)
        .with_body(protocol::body::encode(&body))
        .into())
}
