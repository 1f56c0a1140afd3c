//! GET_PRODUCER_CONNECTION_LIST (204, `AdminBrokerProcessor.getProducerConnectionList`):
//! the connections of a producer group, for mqadmin's `producerConnection`.

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::response;
use protocol::header::GetProducerConnectionListRequestHeader;
use serde::Serialize;

use super::{HandlerResult, error, success};
use crate::state::Broker;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Connection {
    client_addr: String,
    client_id: String,
    language: String,
    version: i32,
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
        connection_set: conns
            .into_iter()
            .map(|(c, peer)| Connection {
                client_addr: peer.to_string(),
                client_id: c.client_id,
                language: c.language.name().to_owned(),
                version: c.version,
            })
            .collect(),
    };
    Ok(success(request)
        .with_body(protocol::body::encode(&body))
        .into())
}
