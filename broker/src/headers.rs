//! Request and response headers of the broker's requests (reference §7), declared with
//! the protocol crate's `header!` macro. The protocol crate is getting its own copies of
//! these (helper "proto"); the broker should switch to them once they land (README).

use protocol::header;
use protocol::message::{ConsumerOffset, PhysicalOffset, QueueOffset};

header! {
    /// `SendMessageRequestHeader` (SEND_MESSAGE).
    pub struct SendMessageRequestHeader {
        required producer_group: String = "producerGroup",
        required topic: String = "topic",
        required default_topic: String = "defaultTopic",
        required default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        required queue_id: i32 = "queueId",
        required sys_flag: i32 = "sysFlag",
        required born_timestamp: i64 = "bornTimestamp",
        required flag: i32 = "flag",
        optional properties: String = "properties",
        optional reconsume_times: i32 = "reconsumeTimes",
        optional unit_mode: bool = "unitMode",
        optional batch: bool = "batch",
        optional max_reconsume_times: i32 = "maxReconsumeTimes",
    }
}

header! {
    /// `SendMessageRequestHeaderV2` (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE): one-letter keys.
    pub struct SendMessageRequestHeaderV2 {
        required a: String = "a",
        required b: String = "b",
        required c: String = "c",
        required d: i32 = "d",
        required e: i32 = "e",
        required f: i32 = "f",
        required g: i64 = "g",
        required h: i32 = "h",
        optional i: String = "i",
        optional j: i32 = "j",
        optional k: bool = "k",
        optional l: i32 = "l",
        optional m: bool = "m",
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    /// `createSendMessageRequestHeaderV1`.
    fn from(v: SendMessageRequestHeaderV2) -> Self {
        Self {
            producer_group: v.a,
            topic: v.b,
            default_topic: v.c,
            default_topic_queue_nums: v.d,
            queue_id: v.e,
            sys_flag: v.f,
            born_timestamp: v.g,
            flag: v.h,
            properties: v.i,
            reconsume_times: v.j,
            unit_mode: v.k,
            max_reconsume_times: v.l,
            batch: v.m,
        }
    }
}

header! {
    /// `SendMessageResponseHeader`.
    pub struct SendMessageResponseHeader {
        required msg_id: String = "msgId",
        required queue_id: i32 = "queueId",
        required queue_offset: QueueOffset = "queueOffset",
        optional transaction_id: String = "transactionId",
    }
}

header! {
    /// `PullMessageRequestHeader`.
    pub struct PullMessageRequestHeader {
        required consumer_group: String = "consumerGroup",
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        required queue_offset: QueueOffset = "queueOffset",
        required max_msg_nums: i32 = "maxMsgNums",
        required sys_flag: i32 = "sysFlag",
        required commit_offset: ConsumerOffset = "commitOffset",
        required suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        optional subscription: String = "subscription",
        required sub_version: i64 = "subVersion",
        optional expression_type: String = "expressionType",
    }
}

header! {
    /// `PullMessageResponseHeader`: all four fields are always present.
    pub struct PullMessageResponseHeader {
        required suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        required next_begin_offset: QueueOffset = "nextBeginOffset",
        required min_offset: QueueOffset = "minOffset",
        required max_offset: QueueOffset = "maxOffset",
    }
}

header! {
    pub struct QueryMessageRequestHeader {
        required topic: String = "topic",
        required key: String = "key",
        required max_num: i32 = "maxNum",
        required begin_timestamp: i64 = "beginTimestamp",
        required end_timestamp: i64 = "endTimestamp",
    }
}

header! {
    pub struct QueryMessageResponseHeader {
        required index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        required index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset",
    }
}

header! {
    pub struct ViewMessageRequestHeader {
        required offset: PhysicalOffset = "offset",
    }
}

header! {
    pub struct UnregisterClientRequestHeader {
        required client_id: String = "clientID",
        optional producer_group: String = "producerGroup",
        optional consumer_group: String = "consumerGroup",
    }
}

header! {
    /// GET_CONSUMER_LIST_BY_GROUP, NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_CONNECTION_LIST.
    pub struct ConsumerGroupHeader {
        required consumer_group: String = "consumerGroup",
    }
}

header! {
    pub struct QueryConsumerOffsetRequestHeader {
        required consumer_group: String = "consumerGroup",
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
    }
}

header! {
    pub struct UpdateConsumerOffsetRequestHeader {
        required consumer_group: String = "consumerGroup",
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        required commit_offset: ConsumerOffset = "commitOffset",
    }
}

header! {
    /// GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME.
    pub struct TopicQueueHeader {
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
    }
}

header! {
    pub struct SearchOffsetRequestHeader {
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        required timestamp: i64 = "timestamp",
    }
}

header! {
    /// Response of the offset queries.
    pub struct OffsetResponseHeader {
        required offset: i64 = "offset",
    }
}

header! {
    pub struct TimestampResponseHeader {
        required timestamp: i64 = "timestamp",
    }
}

header! {
    pub struct CreateTopicRequestHeader {
        required topic: String = "topic",
        required default_topic: String = "defaultTopic",
        required read_queue_nums: i32 = "readQueueNums",
        required write_queue_nums: i32 = "writeQueueNums",
        required perm: i32 = "perm",
        required topic_filter_type: String = "topicFilterType",
        optional topic_sys_flag: i32 = "topicSysFlag",
        required order: bool = "order",
    }
}

header! {
    pub struct TopicHeader {
        required topic: String = "topic",
    }
}

header! {
    pub struct DeleteSubscriptionGroupRequestHeader {
        required group_name: String = "groupName",
        default remove_offset: bool = "removeOffset" => false,
    }
}

header! {
    pub struct GetConsumeStatsRequestHeader {
        required consumer_group: String = "consumerGroup",
        optional topic: String = "topic",
    }
}

header! {
    pub struct GetBrokerConfigResponseHeader {
        required version: String = "version",
    }
}
