//! Offsets: committed consumer offsets (`ConsumerManageProcessor`) and queue offset
//! queries (`AdminBrokerProcessor`).

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::response;
use protocol::header::{
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, SearchOffsetRequestHeader, SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
};
use protocol::message::{ConsumerOffset, QueueOffset};

use super::{HandlerResult, error, success};
use crate::services::Broker;

fn consumer_offset_reply(request: &RemotingCommand, offset: ConsumerOffset) -> HandlerResult {
    Ok(success(request)
        .with_header(&QueryConsumerOffsetResponseHeader { offset })
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
        return consumer_offset_reply(request, offset);
    }
    let store = &broker.store;
    let min = store.min_offset_in_queue(&h.topic, h.queue_id);
    if min.get() <= 0
        && !store.check_in_disk_by_consume_offset(&h.topic, h.queue_id, QueueOffset(0))
    {
        return consumer_offset_reply(request, ConsumerOffset(0));
    }
    error(
        request,
        response::QUERY_NOT_FOUND,
        "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
    )
}

/// UPDATE_CONSUMER_OFFSET. The offset table is keyed by what the client names and
/// persisted, so unlike 4.9 only an offset of a group the broker has (or may auto-create,
/// as a pull would) on an existing queue is kept; anything else is refused with the code
/// a pull of it would get.
pub fn update_consumer_offset(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: UpdateConsumerOffsetRequestHeader = request.header()?;
    let auto_create = broker
        .live
        .auto_create_subscription_group
        .load(std::sync::atomic::Ordering::Relaxed);
    if broker
        .groups
        .find_or_create(&h.consumer_group, auto_create)
        .is_none()
    {
        return error(
            request,
            response::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("subscription group [{}] does not exist", h.consumer_group),
        );
    }
    if let Some(remark) = broker.pop.refusal_for_4x(&h.consumer_group) {
        return error(request, response::NO_PERMISSION, remark);
    }
    if !broker.topics.has_queue(&h.topic, h.queue_id) {
        return error(
            request,
            response::TOPIC_NOT_EXIST,
            format!(
                "topic[{}] has no queue {} on this broker",
                h.topic, h.queue_id
            ),
        );
    }
    // `ConsumerManageProcessor.updateConsumerOffset` on 5.x: while a reset of the queue
    // is still to reach the group's pulls, a commit is an offset from before the reset.
    if broker
        .offsets
        .resets()
        .holds(&h.consumer_group, &h.topic, h.queue_id)
    {
        return Ok(success(request)
            .with_remark("Offset has been previously reset")
            .into());
    }
    broker
        .offsets
        .commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
    Ok(success(request).into())
}

pub fn max_offset(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetMaxOffsetRequestHeader = request.header()?;
    let offset = broker.store.max_offset_in_queue(&h.topic, h.queue_id);
    Ok(success(request)
        .with_header(&GetMaxOffsetResponseHeader { offset })
        .into())
}

pub fn min_offset(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetMinOffsetRequestHeader = request.header()?;
    let offset = broker.store.min_offset_in_queue(&h.topic, h.queue_id);
    Ok(success(request)
        .with_header(&GetMinOffsetResponseHeader { offset })
        .into())
}

pub fn search_by_timestamp(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: SearchOffsetRequestHeader = request.header()?;
    let offset = broker
        .store
        .offset_in_queue_by_time(&h.topic, h.queue_id, h.timestamp);
    Ok(success(request)
        .with_header(&SearchOffsetResponseHeader { offset })
        .into())
}

pub fn earliest_store_time(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetEarliestMsgStoretimeRequestHeader = request.header()?;
    // RocketMQ answers -1 when the queue is empty or its first record is gone.
    let timestamp = broker
        .store
        .earliest_message_time(&h.topic, h.queue_id)
        .unwrap_or(-1);
    Ok(success(request)
        .with_header(&GetEarliestMsgStoretimeResponseHeader { timestamp })
        .into())
}

pub fn all_consumer_offsets(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    Ok(success(request)
        .with_body(broker.offsets.encode().into_bytes())
        .into())
}
