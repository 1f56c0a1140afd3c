//! Which topic a stored record belongs to, for the ACL's read checks: decided from the
//! record itself, never from what a request says about it.
//!
//! A record of an ordinary topic (retry and dead letter topics included) belongs to that
//! topic. The broker's own topics, which clients may not send to
//! (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`), hold records of two kinds: a
//! transaction's half message (and its copies in `TRANS_CHECK_MAX_TIME_TOPIC`) and a
//! parked delayed message belong to their `REAL_TOPIC`, which the broker stamped (the
//! send path drops a client's); everything else there (op records, self-test and
//! offset-moved events, a record without a real topic) belongs to no client topic and is
//! for admin accounts only.

use protocol::message::properties::{self, REAL_TOPIC};
use protocol::message::{PhysicalOffset, RecordView, decode};

use crate::names::{self, SCHEDULE_TOPIC};
use crate::services::Broker;
use crate::services::transaction::{CHECK_MAX_TOPIC, HALF_TOPIC};

/// The owner of a stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Topic(String),
    /// A broker-internal record: admin accounts only.
    System,
}

/// Topics whose records are the broker's own; reading one directly needs admin.
pub fn is_system_topic(topic: &str) -> bool {
    names::is_not_allowed_send_topic(topic)
}

/// The owner of the record `view`.
pub fn owner(view: &RecordView<'_>) -> Owner {
    let topic = view.topic();
    if !is_system_topic(topic) {
        return Owner::Topic(topic.to_owned());
    }
    let carries_real_topic =
        topic == HALF_TOPIC || topic == SCHEDULE_TOPIC || topic == CHECK_MAX_TOPIC;
    match properties::find(view.properties(), REAL_TOPIC) {
        Some(real) if carries_real_topic && !is_system_topic(real) => Owner::Topic(real.to_owned()),
        _ => Owner::System,
    }
}

/// The owner of the record stored at `offset`; `None` when there is none (the request's
/// handler answers that).
pub fn at(broker: &Broker, offset: PhysicalOffset) -> Option<Owner> {
    let stored = broker.store.view_message(offset)?;
    let view = decode(&stored, false).ok()?;
    Some(owner(&view))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use protocol::message::record::{MessageRecord, StoreStamp, body_crc};
    use protocol::message::{MessageSysFlag, QueueOffset};

    use super::*;

    fn owner_of(topic: &str, props: &str) -> Owner {
        let body = b"b".to_vec();
        let rec = MessageRecord {
            queue_id: 0,
            flag: 0,
            sys_flag: MessageSysFlag(0),
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: PhysicalOffset(0),
            body: &body,
            body_crc: Some(body_crc(&body)),
            topic,
            properties: props,
        };
        let stamp = StoreStamp {
            queue_offset: QueueOffset(0),
            physical_offset: PhysicalOffset(0),
            store_timestamp: 1,
            store_host: "127.0.0.1:2".parse().unwrap(),
        };
        let bytes = Bytes::from(rec.encode_to_vec(&stamp).unwrap());
        owner(&decode(&bytes, false).unwrap())
    }

    #[test]
    fn system_records_belong_to_their_real_topic_or_to_admins() {
        let real = "REAL_TOPIC\u{1}Orders\u{2}REAL_QID\u{1}0";
        let orders = Owner::Topic("Orders".into());
        assert_eq!(owner_of("Orders", ""), orders);
        // A client's REAL_TOPIC on an ordinary record changes nothing.
        assert_eq!(owner_of("Orders", "REAL_TOPIC\u{1}Secret"), orders);
        assert_eq!(owner_of("%RETRY%g", real), Owner::Topic("%RETRY%g".into()));
        for topic in [HALF_TOPIC, SCHEDULE_TOPIC, CHECK_MAX_TOPIC] {
            assert_eq!(owner_of(topic, real), orders, "{topic}");
            assert_eq!(owner_of(topic, ""), Owner::System, "{topic}");
        }
        assert_eq!(
            owner_of(HALF_TOPIC, "REAL_TOPIC\u{1}RMQ_SYS_TRANS_OP_HALF_TOPIC"),
            Owner::System
        );
        assert_eq!(owner_of("RMQ_SYS_TRANS_OP_HALF_TOPIC", real), Owner::System);
        assert_eq!(owner_of("OFFSET_MOVED_EVENT", ""), Owner::System);
    }
}
