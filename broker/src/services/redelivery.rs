//! Copies of consumed messages for another attempt (`%RETRY%<group>`) or the dead letter
//! queue (`%DLQ%<group>`): what CONSUMER_SEND_MSG_BACK and POP consumption both store
//! through [`Broker::put`] (4.9's `SendMessageProcessor.asyncConsumerSendMsgBack`; 5.x's
//! POP revive path forwards to the same DLQ topic).

use bytes::Bytes;
use protocol::message::properties::{
    DELAY, MAX_RECONSUME_TIMES, ORIGIN_MESSAGE_ID, RECONSUME_TIME, RETRY_TOPIC, WAIT,
};
use protocol::message::record::RecordView;
use protocol::message::{PhysicalOffset, Properties};
use store::commitlog::BrokerMessage;

use crate::names::{self, perm};
use crate::services::Broker;

/// The properties of the copy: the original's, with RETRY_TOPIC kept or set to the
/// original topic (consumers restore the topic from it), ORIGIN_MESSAGE_ID kept or set to
/// the original's offset msgId, the delay level as DELAY (0 for the DLQ, which the store
/// ignores) and WAIT=false, as RocketMQ stores them. RECONSUME_TIME and
/// MAX_RECONSUME_TIMES record the attempt the copy stands for and the limit applied, the
/// names RocketMQ clients use on their own send-back fallback. UNIQ_KEY is untouched, so
/// the client-visible msgId stays the same across retries.
pub fn copy_properties(
    original: &str,
    original_topic: &str,
    original_offset_msg_id: &str,
    delay_level: i32,
    reconsume_times: i32,
    max_reconsume_times: i32,
) -> String {
    let mut props = Properties::parse(original);
    if !props.contains(RETRY_TOPIC) {
        props.insert(RETRY_TOPIC, original_topic);
    }
    if !props.contains(ORIGIN_MESSAGE_ID) {
        props.insert(ORIGIN_MESSAGE_ID, original_offset_msg_id);
    }
    props.insert(DELAY, delay_level.to_string());
    props.insert(WAIT, "false");
    props.insert(RECONSUME_TIME, reconsume_times.to_string());
    props.insert(MAX_RECONSUME_TIMES, max_reconsume_times.to_string());
    props.to_string()
}

/// A copy of `original` (a view into `stored`) for `topic`/`queue_id`, behind
/// `delay_level` (0: none), standing for attempt `reconsume_times` of at most `max`.
/// It answers after the store's flush and the slave's ack like a send does (4.9's
/// `handleDiskFlush` + `handleHA`): a copy acknowledged to the consumer, which then
/// advances its offset past the original, must survive.
pub fn copy_message(
    stored: &Bytes,
    original: &RecordView<'_>,
    topic: String,
    queue_id: i32,
    delay_level: i32,
    reconsume_times: i32,
    max: i32,
) -> BrokerMessage {
    let properties = copy_properties(
        original.properties(),
        original.topic(),
        &original.offset_msg_id(),
        delay_level,
        reconsume_times,
        max,
    );
    BrokerMessage {
        topic,
        queue_id,
        flag: original.flag(),
        body: stored.slice_ref(original.body()),
        properties,
        sys_flag: original.sys_flag(),
        born_timestamp: original.born_timestamp(),
        born_host: original.born_host(),
        store_host: original.store_host(),
        reconsume_times,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: true,
    }
}

/// `%DLQ%<group>`, created (one queue, read and write) when missing; its name.
pub fn dead_letter_topic(broker: &Broker, group: &str) -> String {
    let dlq = names::dlq_topic(group);
    broker
        .topics
        .get_or_create_system(&dlq, names::DLQ_QUEUE_NUMS, perm::READ | perm::WRITE, 0);
    dlq
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_send_back_records_origin_and_retry_topic() {
        let original = "UNIQ_KEY\u{1}U1\u{2}TAGS\u{1}A\u{2}CLUSTER\u{1}C";
        let copy = copy_properties(original, "T", "OFFSETID", 3, 1, 16);
        let p = Properties::parse(&copy);
        assert_eq!(p.get("UNIQ_KEY"), Some("U1"));
        assert_eq!(p.get(RETRY_TOPIC), Some("T"));
        assert_eq!(p.get(ORIGIN_MESSAGE_ID), Some("OFFSETID"));
        assert_eq!(p.get(DELAY), Some("3"));
        assert_eq!(p.get(WAIT), Some("false"));
        assert_eq!(p.get(RECONSUME_TIME), Some("1"));
        assert_eq!(p.get(MAX_RECONSUME_TIMES), Some("16"));
        assert!(copy.starts_with("UNIQ_KEY\u{1}U1\u{2}TAGS\u{1}A"));
    }

    #[test]
    fn later_send_backs_keep_the_first_origin_and_topic() {
        // A retry copy as consumed from %RETRY%g: it carries the first round's facts
        // and the schedule bookkeeping.
        let retried = "RETRY_TOPIC\u{1}T\u{2}ORIGIN_MESSAGE_ID\u{1}FIRST\u{2}DELAY\u{1}3\u{2}\
                       REAL_TOPIC\u{1}%RETRY%g\u{2}REAL_QID\u{1}0\u{2}RECONSUME_TIME\u{1}1";
        let copy = copy_properties(retried, "%RETRY%g", "SECOND", 4, 2, 3);
        let p = Properties::parse(&copy);
        assert_eq!(p.get(RETRY_TOPIC), Some("T"));
        assert_eq!(p.get(ORIGIN_MESSAGE_ID), Some("FIRST"));
        assert_eq!(p.get(DELAY), Some("4"));
        assert_eq!(p.get(RECONSUME_TIME), Some("2"));
        assert_eq!(p.get(MAX_RECONSUME_TIMES), Some("3"));
        // To the DLQ: level 0, which the store does not delay.
        let dlq = copy_properties(retried, "%RETRY%g", "SECOND", 0, 4, 3);
        assert_eq!(Properties::parse(&dlq).get(DELAY), Some("0"));
    }
}
