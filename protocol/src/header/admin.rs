//! Broker admin headers. Requests without a header (e.g.
//! GET_ALL_TOPIC_CONFIG) use `()`.

crate::header! {
    /// UPDATE_AND_CREATE_TOPIC (17).
    pub struct CreateTopicRequestHeader {
        required topic: String = "topic",
        required default_topic: String = "defaultTopic",
        required read_queue_nums: i32 = "readQueueNums",
        required write_queue_nums: i32 = "writeQueueNums",
        /// PermName bits: 1 INHERIT, 2 WRITE, 4 READ.
        required perm: i32 = "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        required topic_filter_type: String = "topicFilterType",
        optional topic_sys_flag: i32 = "topicSysFlag",
        /// Java initialises it to false but still marks it `@CFNotNull`, so it must be
        /// present on the wire.
        required order: bool = "order",
        /// RocketMQ 5.x topic attributes, `+key=value` / `-key`, comma separated (a 4.9
        /// broker ignores the field).
        optional attributes: String = "attributes",
    }
}

crate::header! {
    /// DELETE_TOPIC_IN_BROKER (215).
    pub struct DeleteTopicRequestHeader {
        required topic: String = "topic",
    }
}

crate::header! {
    /// DELETE_SUBSCRIPTIONGROUP (207).
    pub struct DeleteSubscriptionGroupRequestHeader {
        required group_name: String = "groupName",
        /// Also drop the group's committed offsets.
        default remove_offset: bool = "removeOffset" => false,
    }
}

crate::header! {
    /// GET_CONSUMER_CONNECTION_LIST (203).
    pub struct GetConsumerConnectionListRequestHeader {
        required consumer_group: String = "consumerGroup",
    }
}

crate::header! {
    /// GET_PRODUCER_CONNECTION_LIST (204).
    pub struct GetProducerConnectionListRequestHeader {
        required producer_group: String = "producerGroup",
    }
}

crate::header! {
    /// GET_CONSUME_STATS (208); without `topic` every subscribed topic is reported.
    pub struct GetConsumeStatsRequestHeader {
        required consumer_group: String = "consumerGroup",
        optional topic: String = "topic",
    }
}

crate::header! {
    /// GET_TOPIC_STATS_INFO (202).
    pub struct GetTopicStatsInfoRequestHeader {
        required topic: String = "topic",
    }
}

crate::header! {
    /// Response to GET_BROKER_CONFIG (26); the body holds the properties text.
    pub struct GetBrokerConfigResponseHeader {
        /// The broker config's DataVersion as JSON text.
        required version: String = "version",
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ExtFields;
    use crate::header::{CommandHeader, HeaderError};

    #[test]
    fn create_topic_as_mqadmin_sends_it() {
        let f: ExtFields = [
            ("topic", "T"),
            ("defaultTopic", "TBW102"),
            ("readQueueNums", "8"),
            ("writeQueueNums", "8"),
            ("perm", "6"),
            ("topicFilterType", "SINGLE_TAG"),
            ("topicSysFlag", "0"),
            ("order", "false"),
        ]
        .into_iter()
        .collect();
        let h = CreateTopicRequestHeader::read(&f).unwrap();
        assert_eq!((h.read_queue_nums, h.perm, h.order), (8, 6, false));
        let mut back = ExtFields::new();
        h.write(&mut back);
        assert_eq!(back, f);
        let mut no_order = f.clone();
        no_order.remove("order");
        assert_eq!(
            CreateTopicRequestHeader::read(&no_order),
            Err(HeaderError::Missing("order"))
        );
    }

    #[test]
    fn small_admin_headers() {
        let f: ExtFields = [("groupName", "G")].into_iter().collect();
        let d = DeleteSubscriptionGroupRequestHeader::read(&f).unwrap();
        assert!(!d.remove_offset);
        let mut back = ExtFields::new();
        d.write(&mut back);
        assert_eq!(
            back.sorted(),
            [("groupName", "G"), ("removeOffset", "false")]
        );

        let s: ExtFields = [("consumerGroup", "CG")].into_iter().collect();
        assert_eq!(GetConsumeStatsRequestHeader::read(&s).unwrap().topic, None);
        assert_eq!(
            GetConsumerConnectionListRequestHeader::read(&s)
                .unwrap()
                .consumer_group,
            "CG"
        );
        assert!(GetProducerConnectionListRequestHeader::read(&s).is_err());
        let t: ExtFields = [("topic", "T")].into_iter().collect();
        assert_eq!(DeleteTopicRequestHeader::read(&t).unwrap().topic, "T");
        assert_eq!(GetTopicStatsInfoRequestHeader::read(&t).unwrap().topic, "T");
        let v: ExtFields = [("version", "{\"counter\":1,\"timestamp\":2}")]
            .into_iter()
            .collect();
        assert_eq!(
            GetBrokerConfigResponseHeader::read(&v).unwrap().version,
            "{\"counter\":1,\"timestamp\":2}"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_fields_never_panic(
            entries in proptest::collection::vec(("[a-zA-Z]{1,16}", "\\PC{0,8}"), 0..16)
        ) {
            let f: ExtFields = entries.into_iter().collect();
            let _ = CreateTopicRequestHeader::read(&f);
            let _ = DeleteSubscriptionGroupRequestHeader::read(&f);
            let _ = GetConsumeStatsRequestHeader::read(&f);
        }
    }
}
