//! SendMessage: each gRPC message becomes the SEND_MESSAGE a 4.x producer would send and
//! is handled by the same handler (`SendMessageProcessor`), so it takes the broker's one
//! put path with the same checks (permissions, topic auto-creation, size limits, half
//! messages).
//!
//! Types: NORMAL as is; FIFO (a `message_group`) stores the group as `__SHARDINGKEY` and
//! picks the queue by the group's hash, so one group stays on one queue; DELAY maps
//! `delivery_timestamp` to the smallest `messageDelayLevel` whose delay covers the time
//! left (beyond the longest level: refused, ILLEGAL_DELIVERY_TIME; due or past: no delay); TRANSACTION stores a
//! half message under producer group = topic (see [`super::transaction`]). A topic with a
//! 5.x `message.type` attribute takes only that type (MIXED: any); without it, any.

use std::sync::Arc;
use std::time::Duration;

use grpc_api::v2::{Code, Message, MessageType, SendResultEntry};
use protocol::RemotingCommand;
use protocol::code::{request as rq, response};
use protocol::header::{SendMessageRequestHeader, SendMessageResponseHeader};
use protocol::message::MessageSysFlag;
use protocol::message::properties::{DELAY, PGROUP, TRAN_MSG};

use super::message_codec;
use super::session::Session;
use super::status;
use crate::handlers::Reply;
use crate::services::Broker;

/// The delay level for a message due in `left`: the smallest level whose delay is at
/// least `left`, the longest when none is; 0 (none) when it is due.
pub fn delay_level(levels: &[Duration], left: Duration) -> i32 {
    if left.is_zero() || levels.is_empty() {
        return 0;
    }
    levels
        .iter()
        .position(|d| *d >= left)
        .unwrap_or(levels.len() - 1) as i32
        + 1
}

/// A client's timestamp in ms since the epoch, saturated at the ends of the range (the
/// protobuf fields reach far past what i64 milliseconds hold).
fn millis(t: &prost_types::Timestamp) -> i64 {
    t.seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(t.nanos / 1_000_000))
}

fn entry(code: Code, message: impl Into<String>) -> SendResultEntry {
    SendResultEntry {
        status: Some(status::of(code, message)),
        ..Default::default()
    }
}

/// Sends `m` for `session`'s client.
pub async fn send_one(broker: &Arc<Broker>, session: &Session, m: &Message) -> SendResultEntry {
    let topic = m.topic.as_ref().map(|t| t.name.clone()).unwrap_or_default();
    if topic.is_empty() {
        return entry(Code::IllegalTopic, "the message names no topic");
    }
    let mut props = match message_codec::to_properties(m) {
        Ok(p) => p,
        Err(e @ message_codec::CodecError::NoMessageId) => {
            return entry(Code::IllegalMessageId, e.to_string());
        }
        Err(e @ message_codec::CodecError::TooLong) => {
            return entry(Code::MessagePropertiesTooLarge, e.to_string());
        }
        Err(e) => return entry(Code::IllegalMessagePropertyKey, e.to_string()),
    };
    let sys = m.system_properties.clone().unwrap_or_default();
    if let Some(config) = broker.topics.get(&topic)
        && let Some(wanted) = config.message_type()
        && !super::route::accepts(wanted, sys.message_type)
    {
        return entry(
            Code::MessagePropertyConflictWithType,
            format!(
                "topic {topic} takes {wanted} messages (its message.type attribute), not {}",
                MessageType::try_from(sys.message_type).map_or("UNSPECIFIED", |t| t.as_str_name())
            ),
        );
    }
    let group = sys.message_group.clone().filter(|g| !g.is_empty());
    let mut queue_id = -1;
    if let Some(g) = &group
        && let Some(config) = broker.topics.get(&topic)
    {
        let n = config.write_queue_nums.max(1);
        queue_id = protocol::message::java_string_hash(g).rem_euclid(n);
    }
    if let Some(at) = sys.delivery_timestamp.as_ref() {
        let at_ms = millis(at);
        let left = Duration::from_millis(at_ms.saturating_sub(crate::now_ms()).max(0) as u64);
        let levels: Vec<Duration> = broker
            .config
            .store
            .delay_levels()
            .map(|l| {
                (1..=l.max_level())
                    .map(|i| Duration::from_millis(l.deliver_timestamp(i, 0).max(0) as u64))
                    .collect()
            })
            .unwrap_or_default();
        // Past the longest level the message would come early: refused, as 5.x refuses
        // a delivery time beyond its timer's reach (`timerMaxDelaySec`).
        if let Some(longest) = levels.last()
            && left > *longest
        {
            return entry(
                Code::IllegalDeliveryTime,
                format!(
                    "delivery time is {} s away; this broker delays messages by at most {} s \
                     (the longest messageDelayLevel)",
                    left.as_secs(),
                    longest.as_secs()
                ),
            );
        }
        let level = delay_level(&levels, left);
        if level > 0 {
            props.insert(DELAY, level.to_string());
        }
    }
    let transactional = sys.message_type == grpc_api::v2::MessageType::Transaction as i32;
    let mut sys_flag = MessageSysFlag::default();
    if transactional {
        props.insert(TRAN_MSG, "true");
        props.insert(PGROUP, super::transaction::producer_group(&topic));
        sys_flag = sys_flag.with(MessageSysFlag::TRANSACTION_PREPARED_TYPE);
    }
    let born = sys
        .born_timestamp
        .as_ref()
        .map(millis)
        .unwrap_or_else(crate::now_ms);
    let header = SendMessageRequestHeader {
        producer_group: super::transaction::producer_group(&topic).into(),
        topic: topic.clone().into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag,
        born_timestamp: born,
        flag: 0,
        properties: Some(props.to_string().into()),
        reconsume_times: Some(0),
        unit_mode: false,
        batch: false,
        max_reconsume_times: None,
        bname: None,
    };
    let cmd = RemotingCommand::request(rq::SEND_MESSAGE, &header).with_body(m.body.clone());
    let conn = session.conn();
    let answer = match crate::handlers::send::send_message(broker, &conn, &cmd).await {
        Ok(Reply::Response(out)) => out.command,
        Ok(Reply::None) => return entry(Code::InternalServerError, "no answer"),
        Err(e) => return entry(Code::BadRequest, e.to_string()),
    };
    if answer.code != response::SUCCESS {
        return entry(
            status::from_remoting(answer.code),
            answer.remark.unwrap_or_default(),
        );
    }
    let Ok(h) = answer.header::<SendMessageResponseHeader>() else {
        return entry(Code::InternalServerError, "send answer without its header");
    };
    let transaction_id = if transactional {
        match protocol::message::msg_id::parse_offset_msg_id(&h.msg_id) {
            Ok((_, offset)) => super::transaction::encode_id(offset, h.queue_offset),
            Err(_) => String::new(),
        }
    } else {
        String::new()
    };
    SendResultEntry {
        status: Some(status::ok()),
        message_id: sys.message_id.clone(),
        transaction_id,
        offset: h.queue_offset.0,
        recall_handle: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_saturate_instead_of_overflowing() {
        let at = |seconds, nanos| prost_types::Timestamp { seconds, nanos };
        assert_eq!(millis(&at(1_700_000_000, 123_456_789)), 1_700_000_000_123);
        assert_eq!(millis(&at(i64::MAX, 999_999_999)), i64::MAX);
        assert_eq!(millis(&at(i64::MIN, -999_999_999)), i64::MIN);
    }

    #[test]
    fn delivery_time_maps_to_the_smallest_covering_level() {
        let levels = [1, 5, 10, 30].map(Duration::from_secs).to_vec();
        assert_eq!(delay_level(&levels, Duration::ZERO), 0);
        assert_eq!(delay_level(&levels, Duration::from_millis(300)), 1);
        assert_eq!(delay_level(&levels, Duration::from_secs(5)), 2);
        assert_eq!(delay_level(&levels, Duration::from_secs(6)), 3);
        assert_eq!(delay_level(&levels, Duration::from_secs(3600)), 4);
        assert_eq!(delay_level(&[], Duration::from_secs(1)), 0);
    }
}
