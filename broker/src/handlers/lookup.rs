//! QUERY_MESSAGE and VIEW_MESSAGE_BY_ID (`QueryMessageProcessor`).

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::response;
use protocol::header::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
};

use protocol::message::decode;

use super::{HandlerResult, Reply, error, success};
use crate::handlers::outbound::Outbound;
use crate::services::Broker;

pub async fn query_message(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: QueryMessageRequestHeader = request.header()?;
    let max_num = if h.unique_key_query == Some(true) {
        broker.config.store.default_query_max_num as i32
    } else {
        h.max_num
    };
    let (b2, topic, key) = (Arc::clone(broker), h.topic.clone(), h.key.clone());
    let (begin, end) = (h.begin_timestamp, h.end_timestamp);
    // Index lookups read files; keep them off the reactor threads.
    let mut result = tokio::task::spawn_blocking(move || {
        b2.store.query_message(
            &topic,
            &key,
            usize::try_from(max_num).unwrap_or(0),
            begin,
            end,
        )
    })
    .await
    .unwrap_or_default();
    // Only records of the topic asked for (and allowed by the ACL) are returned: index
    // entries are hashes of topic and key, so another topic's record can collide.
    result
        .messages
        .retain(|bytes| decode(bytes, false).is_ok_and(|v| v.topic() == h.topic));
    let header = QueryMessageResponseHeader {
        index_last_update_timestamp: result.index_last_update_timestamp,
        index_last_update_phyoffset: result.index_last_update_phy_offset,
    };
    if result.messages.is_empty() {
        let cmd = RemotingCommand::error_response(
            request,
            response::QUERY_NOT_FOUND,
            "can not find message, maybe time range not correct",
        )
        .with_header(&header);
        return Ok(cmd.into());
    }
    let cmd = success(request).with_header(&header);
    Ok(Reply::Response(Outbound::with_parts(cmd, result.messages)))
}

pub async fn view_message(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: ViewMessageRequestHeader = request.header()?;
    match broker.store.view_message(h.offset) {
        Some(record) => Ok(Reply::Response(Outbound::with_parts(
            success(request),
            vec![record],
        ))),
        None => error(
            request,
            response::SYSTEM_ERROR,
            format!("can not find message by the offset, {}", h.offset),
        ),
    }
}
