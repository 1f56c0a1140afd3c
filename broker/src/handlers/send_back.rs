//! CONSUMER_SEND_MSG_BACK (`SendMessageProcessor.asyncConsumerSendMsgBack`):
//! a consumer hands back a message it failed to consume. The broker
//! stores a copy for `%RETRY%<group>` behind a delay level (the store parks it in
//! `SCHEDULE_TOPIC_XXXX`, the schedule service re-delivers it when due), or, once the
//! message has been retried `maxReconsumeTimes` times or the consumer asks for it, in
//! the group's dead letter queue `%DLQ%<group>`. Only a message the group could have
//! consumed is accepted (see [`consumable_by`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use protocol::RemotingCommand;
use protocol::code::response;
use protocol::header::ConsumerSendMsgBackRequestHeader;
use protocol::message::record;

use super::send::{VERSION_WITH_MAX_RECONSUME, random_index};
use super::{HandlerResult, error, success};
use crate::names::{self, perm};
use crate::services::Broker;
use crate::services::put_path::Put;
use crate::services::record_owner;
use crate::services::redelivery::{copy_message, dead_letter_topic};
use store::PutMessageStatus;

/// `TopicSysFlag.FLAG_UNIT_SUB`.
const FLAG_UNIT_SUB: i32 = 0x2;

/// Where a handed-back message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// `%RETRY%<group>` after `delay_level`.
    Retry { delay_level: i32 },
    /// `%DLQ%<group>` queue 0, no delay.
    DeadLetter,
}

/// The retry-or-DLQ decision: the DLQ once the message was already consumed
/// `max_reconsume_times` times or the consumer asks for it with a negative level;
/// otherwise the asked level, or `3 + reconsumeTimes` when 0 is asked (10 s, 30 s, 1 m ...
/// with the default table).
pub fn destination(
    reconsume_times: i32,
    max_reconsume_times: i32,
    delay_level: i32,
) -> Destination {
    if reconsume_times >= max_reconsume_times || delay_level < 0 {
        Destination::DeadLetter
    } else if delay_level == 0 {
        Destination::Retry {
            delay_level: reconsume_times.saturating_add(3),
        }
    } else {
        Destination::Retry { delay_level }
    }
}

pub async fn consumer_send_msg_back(
    broker: &Arc<Broker>,
    request: &RemotingCommand,
) -> HandlerResult {
    let h: ConsumerSendMsgBackRequestHeader = request.header()?;
    let auto_create = broker
        .live
        .auto_create_subscription_group
        .load(Ordering::Relaxed);
    let Some(group) = broker.groups.find_or_create(&h.group, auto_create) else {
        return error(
            request,
            response::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("subscription group not exist, {}", h.group),
        );
    };
    if !perm::is_writeable(broker.live.broker_permission()) {
        return error(
            request,
            response::NO_PERMISSION,
            format!(
                "the broker[{}] sending message is forbidden",
                broker.config.broker.broker_ip1
            ),
        );
    }
    if group.retry_queue_nums <= 0 {
        // RocketMQ's way of switching retries off for a group: accept and drop.
        return Ok(success(request).into());
    }

    let retry_topic = names::retry_topic(&h.group);
    let sys_flag = if h.unit_mode { FLAG_UNIT_SUB } else { 0 };
    let retry_config = broker.topics.get_or_create_system(
        &retry_topic,
        group.retry_queue_nums,
        perm::READ | perm::WRITE,
        sys_flag,
    );
    if !perm::is_writeable(retry_config.perm) {
        return error(
            request,
            response::NO_PERMISSION,
            format!("the topic[{retry_topic}] sending message is forbidden"),
        );
    }

    let lookup_failed = || format!("look message by offset failed, {}", h.offset.get());
    let Some(stored) = broker.store.view_message(h.offset) else {
        return error(request, response::SYSTEM_ERROR, lookup_failed());
    };
    let Ok(original) = record::decode(&stored, false) else {
        return error(request, response::SYSTEM_ERROR, lookup_failed());
    };
    if let Err(remark) = consumable_by(broker, &h.group, original.topic()) {
        return error(request, response::NO_PERMISSION, remark);
    }

    let max = match h.max_reconsume_times {
        Some(m) if request.version >= VERSION_WITH_MAX_RECONSUME => m,
        _ => group.retry_max_times,
    };
    let (topic, queue_id, delay_level) =
        match destination(original.reconsume_times(), max, h.delay_level) {
            Destination::Retry { delay_level } => (
                retry_topic,
                random_index(group.retry_queue_nums),
                delay_level,
            ),
            Destination::DeadLetter => (dead_letter_topic(broker, &h.group), 0, 0),
        };
    let reconsume_times = original.reconsume_times().saturating_add(1);
    let copy = copy_message(
        &stored,
        &original,
        topic,
        queue_id,
        delay_level,
        reconsume_times,
        max,
    );
    let dead_letter = delay_level == 0;
    let result = broker.put(Put::Message(copy)).await;
    if result.status != PutMessageStatus::PutOk {
        return error(request, response::SYSTEM_ERROR, result.status.as_str());
    }
    if dead_letter {
        tracing::warn!(group = %h.group, offset = h.offset.get(), reconsume_times, "message moved to the dead letter queue");
        broker.metrics.record_dlq(&h.group);
    } else {
        broker.metrics.record_retry(&h.group);
    }
    Ok(success(request).into())
}

/// Whether group `group` could have consumed a record of `topic`: one of the topics its
/// consumers subscribe to (as their heartbeats name them) or its own retry topic, never
/// one of the broker's own topics (a pending half message, an op record, a parked
/// delayed message). RocketMQ 4.9 copies any offset, so a consumer could deliver
/// another topic's message, or a transaction's undecided half, through its retry topic.
fn consumable_by(broker: &Broker, group: &str, topic: &str) -> Result<(), String> {
    if record_owner::is_system_topic(topic) {
        return Err(format!(
            "the message at this offset is a broker record of {topic}, which no consumer \
             can send back"
        ));
    }
    if topic == names::retry_topic(group) || broker.clients.subscription(group, topic).is_some() {
        return Ok(());
    }
    Err(format!(
        "the message at this offset is on topic {topic}, which group {group} does not \
         subscribe to; a consumer sends back only what its group consumes"
    ))
}

#[cfg(test)]
#[path = "send_back_tests.rs"]
mod handler_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_level_grows_with_attempts_and_limits_lead_to_the_dlq() {
        assert_eq!(destination(0, 16, 0), Destination::Retry { delay_level: 3 });
        assert_eq!(destination(5, 16, 0), Destination::Retry { delay_level: 8 });
        assert_eq!(destination(2, 16, 1), Destination::Retry { delay_level: 1 });
        assert_eq!(destination(16, 16, 0), Destination::DeadLetter);
        assert_eq!(destination(17, 16, 2), Destination::DeadLetter);
        assert_eq!(destination(0, 16, -1), Destination::DeadLetter);
        // maxReconsumeTimes 0: the first failure is final.
        assert_eq!(destination(0, 0, 0), Destination::DeadLetter);
    }
}
