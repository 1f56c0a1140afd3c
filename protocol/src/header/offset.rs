//! Consumer offset and queue offset headers.

use crate::message::{ConsumerOffset, QueueOffset};

crate::header! {
    /// QUERY_CONSUMER_OFFSET (14).
    pub struct QueryConsumerOffsetRequestHeader {
        required consumer_group: String = "consumerGroup",
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        optional bname: String = "bname",
    }
}

crate::header! {
    pub struct QueryConsumerOffsetResponseHeader {
        required offset: ConsumerOffset = "offset",
    }
}

crate::header! {
    /// UPDATE_CONSUMER_OFFSET (15); Java clients send it oneway. Its response header
    /// is empty (`()`).
    pub struct UpdateConsumerOffsetRequestHeader {
        required consumer_group: String = "consumerGroup",
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        required commit_offset: ConsumerOffset = "commitOffset",
        optional bname: String = "bname",
    }
}

crate::header! {
    /// GET_MAX_OFFSET (30).
    pub struct GetMaxOffsetRequestHeader {
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        optional bname: String = "bname",
    }
}

crate::header! {
    /// The next offset to be written (0 for an absent queue).
    pub struct GetMaxOffsetResponseHeader {
        required offset: QueueOffset = "offset",
    }
}

crate::header! {
    /// GET_MIN_OFFSET (31).
    pub struct GetMinOffsetRequestHeader {
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        optional bname: String = "bname",
    }
}

crate::header! {
    pub struct GetMinOffsetResponseHeader {
        required offset: QueueOffset = "offset",
    }
}

crate::header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29).
    pub struct SearchOffsetRequestHeader {
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        /// Store timestamp to look for, ms.
        required timestamp: i64 = "timestamp",
        optional bname: String = "bname",
    }
}

crate::header! {
    pub struct SearchOffsetResponseHeader {
        required offset: QueueOffset = "offset",
    }
}

crate::header! {
    /// GET_EARLIEST_MSG_STORETIME (32).
    pub struct GetEarliestMsgStoretimeRequestHeader {
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        optional bname: String = "bname",
    }
}

crate::header! {
    pub struct GetEarliestMsgStoretimeResponseHeader {
        required timestamp: i64 = "timestamp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::{CommandHeader, HeaderError};

    fn fields(pairs: &[(&str, &str)]) -> ExtFields {
        pairs.iter().copied().collect()
    }

    #[test]
    fn requests_read_and_write_reference_keys() {
        let f = fields(&[
            ("consumerGroup", "G"),
            ("topic", "T"),
            ("queueId", "1"),
            ("commitOffset", "77"),
        ]);
        let u = UpdateConsumerOffsetRequestHeader::read(&f).unwrap();
        assert_eq!(u.commit_offset, ConsumerOffset(77));
        let mut back = ExtFields::new();
        u.write(&mut back);
        assert_eq!(back, f);

        let q = QueryConsumerOffsetRequestHeader::read(&f).unwrap();
        assert_eq!((q.consumer_group.as_str(), q.queue_id), ("G", 1));

        let s = fields(&[("topic", "T"), ("queueId", "0"), ("timestamp", "123")]);
        assert_eq!(SearchOffsetRequestHeader::read(&s).unwrap().timestamp, 123);
        assert_eq!(
            GetMaxOffsetRequestHeader::read(&fields(&[("topic", "T")])),
            Err(HeaderError::Missing("queueId"))
        );
        let e = GetEarliestMsgStoretimeRequestHeader::read(&s).unwrap();
        assert_eq!(e.topic, "T");
        assert_eq!(GetMinOffsetRequestHeader::read(&s).unwrap().queue_id, 0);
    }

    #[test]
    fn responses_write_reference_keys() {
        let mut f = ExtFields::new();
        GetMaxOffsetResponseHeader {
            offset: QueueOffset(5),
        }
        .write(&mut f);
        assert_eq!(f.sorted(), [("offset", "5")]);
        assert_eq!(
            GetMinOffsetResponseHeader::read(&f).unwrap().offset,
            QueueOffset(5)
        );
        assert_eq!(
            SearchOffsetResponseHeader::read(&f).unwrap().offset,
            QueueOffset(5)
        );
        assert_eq!(
            QueryConsumerOffsetResponseHeader::read(&f).unwrap().offset,
            ConsumerOffset(5)
        );
        let mut t = ExtFields::new();
        GetEarliestMsgStoretimeResponseHeader { timestamp: -1 }.write(&mut t);
        assert_eq!(t.sorted(), [("timestamp", "-1")]);
    }
}
