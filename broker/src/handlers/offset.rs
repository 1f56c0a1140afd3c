//! Offsets: committed consumer offsets (`ConsumerManageProcessor`) and queue offset
//! queries (`AdminBrokerProcessor`).

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::response;
use protocol::message::QueueOffset;

use super::{HandlerResult, error, success};
use crate::headers::{
    OffsetResponseHeader, QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader,
    TimestampResponseHeader, TopicQueueHeader, UpdateConsumerOffsetRequestHeader,
};
use crate::state::Broker;

fn offset_reply(request: &RemotingCommand, offset: i64) -> HandlerResult {
    Ok(success(request)
        .with_header(&OffsetResponseHeader { offset })
        .into())
}

/// `queryConsumerOffset`. With no committed offset a group on a queue whose first
/// message is still in memory starts at 0 (so a brand-new topic is consumed from its
/// beginning); otherwise QUERY_NOT_FOUND lets the client apply ConsumeFromWhere.
pub fn query_consumer_offset(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: QueryConsumerOffsetRequestHeader = request.header()?;
    if let Some(offset) = broker
        .offsets
        .query(&h.consumer_group, &h.topic, h.queue_id)
        && offset.get() >= 0
    {
        return offset_reply(request, offset.get());
    }
    let store = &broker.store;
    let min = store.min_offset_in_queue(&h.topic, h.queue_id);
    if min.get() <= 0
        && !store.check_in_disk_by_consume_offset(&h.topic, h.queue_id, QueueOffset(0))
    {
        return offset_reply(request, 0);
    }
    error(
        request,
        response::QUERY_NOT_FOUND,
        "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
    )
}

pub fn update_consumer_offset(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: UpdateConsumerOffsetRequestHeader = request.header()?;
    broker
        .offsets
        .commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
    Ok(success(request).into())
}

pub fn max_offset(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: TopicQueueHeader = request.header()?;
    offset_reply(
        request,
        broker.store.max_offset_in_queue(&h.topic, h.queue_id).get(),
    )
}

pub fn min_offset(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: TopicQueueHeader = request.header()?;
    offset_reply(
        request,
        broker.store.min_offset_in_queue(&h.topic, h.queue_id).get(),
    )
}

pub fn search_by_timestamp(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: SearchOffsetRequestHeader = request.header()?;
    let offset = broker
        .store
        .offset_in_queue_by_time(&h.topic, h.queue_id, h.timestamp);
    offset_reply(request, offset.get())
}

pub fn earliest_store_time(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: TopicQueueHeader = request.header()?;
    // RocketMQ answers -1 when the queue is empty or its first record is gone.
    let timestamp = broker
        .store
        .earliest_message_time(&h.topic, h.queue_id)
        .unwrap_or(-1);
    Ok(success(request)
        .with_header(&TimestampResponseHeader { timestamp })
        .into())
}

pub fn all_consumer_offsets(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    Ok(success(request)
        .with_body(broker.offsets.encode().into_bytes())
        .into())
}
