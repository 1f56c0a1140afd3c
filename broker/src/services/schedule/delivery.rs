//! Turning a parked `SCHEDULE_TOPIC_XXXX` record back into the message for its real
//! topic (`ScheduleMessageService.messageTimeup`). Pure functions over the record.

use bytes::Bytes;
use protocol::message::properties::{
    self, DELAY, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, REAL_QID, REAL_TOPIC,
};
use protocol::message::{PhysicalOffset, Properties, RecordView};

use crate::services::stamps::DELAY_PARKED_OFFSET;
use store::commitlog::BrokerMessage;

/// The parked record a delivered copy came from (its `DELAY_PARKED_OFFSET`).
pub fn parked_offset(copy_props: &str) -> Option<PhysicalOffset> {
    properties::find(copy_props, DELAY_PARKED_OFFSET)
        .and_then(|v| v.trim().parse().ok())
        .map(PhysicalOffset)
}

/// `correctDeliverTimestamp`: a deliver time further ahead than now + the level's delay
/// (the clock went back, or the level table was shortened) is treated as due now.
pub fn correct_deliver_timestamp(now: i64, deliver_at: i64, delay_ms: i64) -> i64 {
    if deliver_at > now.saturating_add(delay_ms) {
        now
    } else {
        deliver_at
    }
}

/// `REAL_TOPIC` and `REAL_QID` of a parked record.
pub fn real_destination(props: &str) -> Option<(&str, i32)> {
    let topic = properties::find(props, REAL_TOPIC)?;
    let queue_id = properties::find(props, REAL_QID)?.trim().parse().ok()?;
    Some((topic, queue_id))
}

/// The properties string without its `DELAY` entries, everything else byte for byte.
///
/// RocketMQ clears DELAY only from the copy's property map and stores the string built
/// before, DELAY included; its CommitLog decides on the map. Our store decides on the
/// string, so DELAY must go or the copy would be parked again. REAL_TOPIC / REAL_QID
/// stay, as in RocketMQ.
pub fn without_delay(props: &str) -> String {
    let mut out = String::with_capacity(props.len());
    let mut first = true;
    for segment in props.split(PROPERTY_SEPARATOR) {
        let name = segment
            .split_once(NAME_VALUE_SEPARATOR)
            .map_or(segment, |(n, _)| n);
        if name == DELAY {
            continue;
        }
        if !first {
            out.push(PROPERTY_SEPARATOR);
        }
        out.push_str(segment);
        first = false;
    }
    out
}

/// The copy to store in the real topic: same body, flag, sysFlag, born and store host,
/// born time and reconsumeTimes; DELAY removed and the parked record's CommitLog offset
/// stamped (`DELAY_PARKED_OFFSET`, which restart recovery looks for); the producer is
/// not waited for (`WAIT=false`). `None` when the record has no usable real destination.
pub fn copy_for_real_topic(view: &RecordView<'_>, stored: &Bytes) -> Option<BrokerMessage> {
    let props = view.properties();
    let (topic, queue_id) = real_destination(props)?;
    let mut properties = Properties::parse(&without_delay(props));
    properties.insert(DELAY_PARKED_OFFSET, view.physical_offset().0.to_string());
    Some(BrokerMessage {
        topic: topic.to_owned(),
        queue_id,
        flag: view.flag(),
        body: stored.slice_ref(view.body()),
        properties: properties.to_string(),
        sys_flag: view.sys_flag(),
        born_timestamp: view.born_timestamp(),
        born_host: view.born_host(),
        store_host: view.store_host(),
        reconsume_times: view.reconsume_times(),
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: false,
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use protocol::message::record::{self, MessageRecord, StoreStamp, body_crc};
    use protocol::message::{MessageSysFlag, QueueOffset};

    use super::*;

    #[test]
    fn far_future_deliver_times_are_corrected_to_now() {
        assert_eq!(correct_deliver_timestamp(1_000, 5_000, 5_000), 5_000);
        assert_eq!(correct_deliver_timestamp(1_000, 6_000, 5_000), 6_000);
        assert_eq!(correct_deliver_timestamp(1_000, 6_001, 5_000), 1_000);
        assert_eq!(correct_deliver_timestamp(1_000, 10, 5_000), 10);
    }

    #[test]
    fn delay_is_dropped_and_the_rest_kept_verbatim() {
        let p = "TAGS\u{1}A\u{2}DELAY\u{1}2\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}3";
        assert_eq!(
            without_delay(p),
            "TAGS\u{1}A\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}3"
        );
        assert_eq!(without_delay("DELAY\u{1}2"), "");
        assert_eq!(without_delay("DELAY\u{1}2\u{2}"), "");
        assert_eq!(without_delay("A\u{1}1\u{2}DELAY\u{1}2"), "A\u{1}1");
        // Pre-4.9 strings end with a separator; keep it.
        assert_eq!(
            without_delay("A\u{1}1\u{2}DELAY\u{1}2\u{2}"),
            "A\u{1}1\u{2}"
        );
        assert_eq!(without_delay(""), "");
        assert_eq!(real_destination(p), Some(("T", 3)));
        assert_eq!(
            real_destination("REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}x"),
            None
        );
        assert_eq!(real_destination("TAGS\u{1}A"), None);
    }

    #[test]
    fn copy_keeps_the_record_facts() {
        let born: SocketAddr = "10.0.0.7:5000".parse().unwrap();
        let store: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let body = b"payload".to_vec();
        let rec = MessageRecord {
            queue_id: 1,
            flag: 9,
            sys_flag: MessageSysFlag(0),
            born_timestamp: 1234,
            born_host: born,
            reconsume_times: 2,
            prepared_transaction_offset: PhysicalOffset(0),
            body: &body,
            body_crc: Some(body_crc(&body)),
            topic: "SCHEDULE_TOPIC_XXXX",
            properties: "UNIQ_KEY\u{1}U\u{2}DELAY\u{1}2\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}3",
        };
        let stamp = StoreStamp {
            queue_offset: QueueOffset(4),
            physical_offset: PhysicalOffset(100),
            store_timestamp: 99,
            store_host: store,
        };
        let bytes = Bytes::from(rec.encode_to_vec(&stamp).unwrap());
        let view = record::decode(&bytes, true).unwrap();
        let copy = copy_for_real_topic(&view, &bytes).unwrap();
        assert_eq!((copy.topic.as_str(), copy.queue_id), ("T", 3));
        assert_eq!(&copy.body[..], b"payload");
        assert_eq!(copy.flag, 9);
        assert_eq!(copy.reconsume_times, 2);
        assert_eq!(copy.born_timestamp, 1234);
        assert_eq!((copy.born_host, copy.store_host), (born, store));
        assert_eq!(
            copy.properties,
            "UNIQ_KEY\u{1}U\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}3\u{2}DELAY_PARKED_OFFSET\u{1}100"
        );
        assert_eq!(parked_offset(&copy.properties), Some(PhysicalOffset(100)));
        assert!(!copy.wait_store_msg_ok);
    }
}
