//! Consumer-side headers.

use crate::message::PhysicalOffset;

crate::header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38); the answer is a JSON body.
    pub struct GetConsumerListByGroupRequestHeader {
        required consumer_group: String = "consumerGroup",
    }
}

crate::header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker to client, oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        required consumer_group: String = "consumerGroup",
    }
}

crate::header! {
    /// CONSUMER_SEND_MSG_BACK (36): a consumer hands a failed message back for retry.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// CommitLog offset of the consumed record.
        required offset: PhysicalOffset = "offset",
        required group: String = "group",
        /// 0: broker picks `3 + reconsumeTimes`; negative: straight to the DLQ.
        required delay_level: i32 = "delayLevel",
        optional origin_msg_id: String = "originMsgId",
        optional origin_topic: String = "originTopic",
        default unit_mode: bool = "unitMode" => false,
        /// Honoured when the request version is at least 121 (V3_4_9).
        optional max_reconsume_times: i32 = "maxReconsumeTimes",
        optional bname: String = "bname",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::{CommandHeader, HeaderError};

    #[test]
    fn send_back_keys() {
        let h = ConsumerSendMsgBackRequestHeader {
            offset: PhysicalOffset(4096),
            group: "CG".into(),
            delay_level: 0,
            origin_msg_id: Some("AC1F0B01327B5B2133B120D8340B3D7D".into()),
            origin_topic: Some("T".into()),
            unit_mode: false,
            max_reconsume_times: Some(16),
            bname: None,
        };
        let mut f = ExtFields::new();
        h.write(&mut f);
        assert_eq!(
            f.sorted(),
            [
                ("delayLevel", "0"),
                ("group", "CG"),
                ("maxReconsumeTimes", "16"),
                ("offset", "4096"),
                ("originMsgId", "AC1F0B01327B5B2133B120D8340B3D7D"),
                ("originTopic", "T"),
                ("unitMode", "false"),
            ]
        );
        assert_eq!(ConsumerSendMsgBackRequestHeader::read(&f), Ok(h));

        let g: ExtFields = [("consumerGroup", "CG")].into_iter().collect();
        assert_eq!(
            GetConsumerListByGroupRequestHeader::read(&g)
                .unwrap()
                .consumer_group,
            "CG"
        );
        assert_eq!(
            NotifyConsumerIdsChangedRequestHeader::read(&ExtFields::new()),
            Err(HeaderError::Missing("consumerGroup"))
        );
    }
}
