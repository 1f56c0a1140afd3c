//! PULL_MESSAGE headers (`PullMessageRequestHeader`,
//! `PullMessageResponseHeader`).

use crate::message::{ConsumerOffset, PullSysFlag, QueueOffset};

crate::header! {
    /// PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361).
    pub struct PullMessageRequestHeader {
        required consumer_group: String = "consumerGroup",
        required topic: String = "topic",
        required queue_id: i32 = "queueId",
        /// First queue offset to read.
        required queue_offset: QueueOffset = "queueOffset",
        required max_msg_nums: i32 = "maxMsgNums",
        required sys_flag: PullSysFlag = "sysFlag",
        /// Offset to commit for the group, meaningful only with
        /// [`PullSysFlag::COMMIT_OFFSET`].
        required commit_offset: ConsumerOffset = "commitOffset",
        /// Long-polling hold time.
        required suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        /// Subscription expression, meaningful only with [`PullSysFlag::SUBSCRIPTION`].
        optional subscription: String = "subscription",
        required sub_version: i64 = "subVersion",
        /// `TAG` when absent, or `SQL92`.
        optional expression_type: String = "expressionType",
        optional bname: String = "bname",
    }
}

crate::header! {
    /// Sent with SUCCESS and every PULL_* code: the Java client unboxes all four.
    pub struct PullMessageResponseHeader {
        /// 0 = master.
        required suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        required next_begin_offset: QueueOffset = "nextBeginOffset",
        required min_offset: QueueOffset = "minOffset",
        required max_offset: QueueOffset = "maxOffset",
    }
}

/// `ExpressionType.TAG`, assumed when `expressionType` is absent.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

impl PullMessageRequestHeader {
    pub fn expression_type_or_tag(&self) -> &str {
        self.expression_type
            .as_deref()
            .unwrap_or(EXPRESSION_TYPE_TAG)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ExtFields;
    use crate::header::{CommandHeader, HeaderError};

    #[test]
    fn keys_and_types() {
        let f: ExtFields = [
            ("consumerGroup", "CG"),
            ("topic", "T"),
            ("queueId", "3"),
            ("queueOffset", "100"),
            ("maxMsgNums", "32"),
            ("sysFlag", "3"),
            ("commitOffset", "98"),
            ("suspendTimeoutMillis", "15000"),
            ("subVersion", "1700000000000"),
        ]
        .into_iter()
        .collect();
        let h = PullMessageRequestHeader::read(&f).unwrap();
        assert_eq!(h.queue_offset, QueueOffset(100));
        assert_eq!(h.commit_offset, ConsumerOffset(98));
        assert!(h.sys_flag.has_commit_offset() && h.sys_flag.has_suspend());
        assert_eq!(h.expression_type_or_tag(), "TAG");
        let mut back = ExtFields::new();
        h.write(&mut back);
        assert_eq!(back, f);

        let mut missing = f.clone();
        missing.remove("subVersion");
        assert_eq!(
            PullMessageRequestHeader::read(&missing),
            Err(HeaderError::Missing("subVersion"))
        );
    }

    proptest! {
        #[test]
        fn response_round_trip(b: i64, n: i64, lo: i64, hi: i64) {
            let h = PullMessageResponseHeader {
                suggest_which_broker_id: b,
                next_begin_offset: QueueOffset(n),
                min_offset: QueueOffset(lo),
                max_offset: QueueOffset(hi),
            };
            let mut f = ExtFields::new();
            h.write(&mut f);
            prop_assert_eq!(f.len(), 4);
            prop_assert_eq!(PullMessageResponseHeader::read(&f), Ok(h));
        }

        #[test]
        fn arbitrary_fields_never_panic(
            entries in proptest::collection::vec(("[a-zA-Z]{1,20}", "-?[0-9]{0,20}|\\PC{0,8}"), 0..20)
        ) {
            let f: ExtFields = entries.into_iter().collect();
            let _ = PullMessageRequestHeader::read(&f);
            let _ = PullMessageResponseHeader::read(&f);
        }
    }
}
