//! Request–reply push (`ReplyMessageRequestHeader`). Replies are
//! sent with the send headers (SEND_REPLY_MESSAGE(_V2)); the broker forwards them to
//! the requester with PUSH_REPLY_MESSAGE_TO_CLIENT (326) and this header.

use crate::message::MessageSysFlag;

crate::header! {
    pub struct ReplyMessageRequestHeader {
        required producer_group: String = "producerGroup",
        required topic: String = "topic",
        required default_topic: String = "defaultTopic",
        required default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        required queue_id: i32 = "queueId",
        required sys_flag: MessageSysFlag = "sysFlag",
        required born_timestamp: i64 = "bornTimestamp",
        required flag: i32 = "flag",
        optional properties: String = "properties",
        optional reconsume_times: i32 = "reconsumeTimes",
        default unit_mode: bool = "unitMode" => false,
        /// `ip:port` of the replying producer.
        required born_host: String = "bornHost",
        /// `ip:port` of the broker.
        required store_host: String = "storeHost",
        required store_timestamp: i64 = "storeTimestamp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::{CommandHeader, HeaderError};

    #[test]
    fn round_trip_and_required_hosts() {
        let h = ReplyMessageRequestHeader {
            producer_group: "PG".into(),
            topic: "DefaultCluster_REPLY_TOPIC".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 0,
            sys_flag: MessageSysFlag(0),
            born_timestamp: 1,
            flag: 0,
            properties: Some("MSG_TYPE\u{1}reply".into()),
            reconsume_times: None,
            unit_mode: false,
            born_host: "10.0.0.2:51000".into(),
            store_host: "10.0.0.1:10911".into(),
            store_timestamp: 2,
        };
        let mut f = ExtFields::new();
        h.write(&mut f);
        assert_eq!(f.len(), 13);
        assert_eq!(ReplyMessageRequestHeader::read(&f), Ok(h));
        f.remove("storeHost");
        assert_eq!(
            ReplyMessageRequestHeader::read(&f),
            Err(HeaderError::Missing("storeHost"))
        );
    }
}
