//! Request and response codes of RocketMQ 4.9.8 (`common/.../protocol/RequestCode.java`,
//! `ResponseCode.java`, `remoting/.../RemotingSysResponseCode.java`).

macro_rules! codes {
    ($(#[$meta:meta])* $module:ident { $($name:ident = $value:expr),* $(,)? }) => {
        $(#[$meta])*
        pub mod $module {
            $(pub const $name: i32 = $value;)*

            /// The RocketMQ name of a code, for logs and metric labels.
            pub fn name(code: i32) -> Option<&'static str> {
                match code {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// Every code of this table, in declaration order.
            pub const ALL: &[(i32, &str)] = &[$(($value, stringify!($name))),*];
        }
    };
}

codes! {
    /// Request codes.
    request {
        SEND_MESSAGE = 10,
        PULL_MESSAGE = 11,
        QUERY_MESSAGE = 12,
        QUERY_BROKER_OFFSET = 13,
        QUERY_CONSUMER_OFFSET = 14,
        UPDATE_CONSUMER_OFFSET = 15,
        UPDATE_AND_CREATE_TOPIC = 17,
        GET_ALL_TOPIC_CONFIG = 21,
        GET_TOPIC_CONFIG_LIST = 22,
        GET_TOPIC_NAME_LIST = 23,
        UPDATE_BROKER_CONFIG = 25,
        GET_BROKER_CONFIG = 26,
        TRIGGER_DELETE_FILES = 27,
        GET_BROKER_RUNTIME_INFO = 28,
        SEARCH_OFFSET_BY_TIMESTAMP = 29,
        GET_MAX_OFFSET = 30,
        GET_MIN_OFFSET = 31,
        GET_EARLIEST_MSG_STORETIME = 32,
        VIEW_MESSAGE_BY_ID = 33,
        HEART_BEAT = 34,
        UNREGISTER_CLIENT = 35,
        CONSUMER_SEND_MSG_BACK = 36,
        END_TRANSACTION = 37,
        GET_CONSUMER_LIST_BY_GROUP = 38,
        CHECK_TRANSACTION_STATE = 39,
        NOTIFY_CONSUMER_IDS_CHANGED = 40,
        LOCK_BATCH_MQ = 41,
        UNLOCK_BATCH_MQ = 42,
        GET_ALL_CONSUMER_OFFSET = 43,
        GET_ALL_DELAY_OFFSET = 45,
        CHECK_CLIENT_CONFIG = 46,
        UPDATE_AND_CREATE_ACL_CONFIG = 50,
        DELETE_ACL_CONFIG = 51,
        GET_BROKER_CLUSTER_ACL_INFO = 52,
        UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53,
        GET_BROKER_CLUSTER_ACL_CONFIG = 54,
        PUT_KV_CONFIG = 100,
        GET_KV_CONFIG = 101,
        DELETE_KV_CONFIG = 102,
        REGISTER_BROKER = 103,
        UNREGISTER_BROKER = 104,
        GET_ROUTEINFO_BY_TOPIC = 105,
        GET_BROKER_CLUSTER_INFO = 106,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
        GET_TOPIC_STATS_INFO = 202,
        GET_CONSUMER_CONNECTION_LIST = 203,
        GET_PRODUCER_CONNECTION_LIST = 204,
        WIPE_WRITE_PERM_OF_BROKER = 205,
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
        DELETE_SUBSCRIPTIONGROUP = 207,
        GET_CONSUME_STATS = 208,
        SUSPEND_CONSUMER = 209,
        RESUME_CONSUMER = 210,
        RESET_CONSUMER_OFFSET_IN_CONSUMER = 211,
        RESET_CONSUMER_OFFSET_IN_BROKER = 212,
        ADJUST_CONSUMER_THREAD_POOL = 213,
        WHO_CONSUME_THE_MESSAGE = 214,
        DELETE_TOPIC_IN_BROKER = 215,
        DELETE_TOPIC_IN_NAMESRV = 216,
        GET_KVLIST_BY_NAMESPACE = 219,
        RESET_CONSUMER_CLIENT_OFFSET = 220,
        GET_CONSUMER_STATUS_FROM_CLIENT = 221,
        INVOKE_BROKER_TO_RESET_OFFSET = 222,
        INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223,
        GET_TOPICS_BY_CLUSTER = 224,
        QUERY_TOPIC_CONSUME_BY_WHO = 300,
        REGISTER_FILTER_SERVER = 301,
        REGISTER_MESSAGE_FILTER_CLASS = 302,
        QUERY_CONSUME_TIME_SPAN = 303,
        GET_SYSTEM_TOPIC_LIST_FROM_NS = 304,
        GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305,
        CLEAN_EXPIRED_CONSUMEQUEUE = 306,
        GET_CONSUMER_RUNNING_INFO = 307,
        QUERY_CORRECTION_OFFSET = 308,
        CONSUME_MESSAGE_DIRECTLY = 309,
        SEND_MESSAGE_V2 = 310,
        GET_UNIT_TOPIC_LIST = 311,
        GET_HAS_UNIT_SUB_TOPIC_LIST = 312,
        GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313,
        CLONE_GROUP_OFFSET = 314,
        VIEW_BROKER_STATS_DATA = 315,
        CLEAN_UNUSED_TOPIC = 316,
        GET_BROKER_CONSUME_STATS = 317,
        UPDATE_NAMESRV_CONFIG = 318,
        GET_NAMESRV_CONFIG = 319,
        SEND_BATCH_MESSAGE = 320,
        QUERY_CONSUME_QUEUE = 321,
        QUERY_DATA_VERSION = 322,
        RESUME_CHECK_HALF_MESSAGE = 323,
        SEND_REPLY_MESSAGE = 324,
        SEND_REPLY_MESSAGE_V2 = 325,
        PUSH_REPLY_MESSAGE_TO_CLIENT = 326,
        ADD_WRITE_PERM_OF_BROKER = 327,
        GET_ALL_PRODUCER_INFO = 328,
        DELETE_EXPIRED_COMMITLOG = 329,
        // RocketMQ 5.x controller-mode codes this broker implements (`RequestCode.java` 5.x).
        GET_BROKER_HA_STATUS = 907,
        GET_BROKER_EPOCH_CACHE = 1007,
        NOTIFY_BROKER_ROLE_CHANGED = 1008,
    }
}

codes! {
    /// Response codes.
    response {
        SUCCESS = 0,
        SYSTEM_ERROR = 1,
        SYSTEM_BUSY = 2,
        REQUEST_CODE_NOT_SUPPORTED = 3,
        TRANSACTION_FAILED = 4,
        FLUSH_DISK_TIMEOUT = 10,
        SLAVE_NOT_AVAILABLE = 11,
        FLUSH_SLAVE_TIMEOUT = 12,
        MESSAGE_ILLEGAL = 13,
        SERVICE_NOT_AVAILABLE = 14,
        VERSION_NOT_SUPPORTED = 15,
        NO_PERMISSION = 16,
        TOPIC_NOT_EXIST = 17,
        TOPIC_EXIST_ALREADY = 18,
        PULL_NOT_FOUND = 19,
        PULL_RETRY_IMMEDIATELY = 20,
        PULL_OFFSET_MOVED = 21,
        QUERY_NOT_FOUND = 22,
        SUBSCRIPTION_PARSE_FAILED = 23,
        SUBSCRIPTION_NOT_EXIST = 24,
        SUBSCRIPTION_NOT_LATEST = 25,
        SUBSCRIPTION_GROUP_NOT_EXIST = 26,
        FILTER_DATA_NOT_EXIST = 27,
        FILTER_DATA_NOT_LATEST = 28,
        TRANSACTION_SHOULD_COMMIT = 200,
        TRANSACTION_SHOULD_ROLLBACK = 201,
        TRANSACTION_STATE_UNKNOW = 202,
        TRANSACTION_STATE_GROUP_WRONG = 203,
        NO_BUYER_ID = 204,
        NOT_IN_CURRENT_UNIT = 205,
        CONSUMER_NOT_ONLINE = 206,
        CONSUME_MSG_TIMEOUT = 207,
        NO_MESSAGE = 208,
        UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209,
        DELETE_ACL_CONFIG_FAILED = 210,
        UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211,
        FLOW_CONTROL = 215,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for table in [request::ALL, response::ALL] {
            let mut seen = std::collections::HashSet::new();
            for (code, name) in table {
                assert!(seen.insert(*code), "duplicate code {code}");
                assert!(!name.is_empty());
            }
        }
        assert_eq!(request::name(310), Some("SEND_MESSAGE_V2"));
        assert_eq!(response::name(3), Some("REQUEST_CODE_NOT_SUPPORTED"));
        assert_eq!(request::name(9999), None);
        // Every row of RequestCode.java in 4.9.8 plus GET_BROKER_CLUSTER_ACL_CONFIG (<= 4.9.7)
        // plus the three 5.x replication codes.
        assert_eq!(request::ALL.len(), 99);
    }
}
