//! Offset reset and consumer status headers (`ResetOffsetRequestHeader`,
//! `GetConsumerStatusRequestHeader`): mqadmin's `resetOffsetByTime`,
//! `skipAccumulatedMessage` and `getConsumerStatus`, and what the broker pushes to the
//! group's clients for them.

crate::header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222) from an admin tool, and
    /// RESET_CONSUMER_CLIENT_OFFSET (220) from the broker to a consumer.
    pub struct ResetOffsetRequestHeader {
        required topic: String = "topic",
        required group: String = "group",
        /// Store time in ms since the epoch; -1 means each queue's max offset (skip).
        required timestamp: i64 = "timestamp",
        /// Move forward too (without it a queue only ever rewinds).
        required is_force: bool = "isForce",
        /// RocketMQ 5.x: one queue only; -1 (4.9's behaviour) is every queue.
        default queue_id: i32 = "queueId" => -1,
    }
}

crate::header! {
    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) from an admin tool, and
    /// GET_CONSUMER_STATUS_FROM_CLIENT (221) from the broker to a consumer.
    pub struct GetConsumerStatusRequestHeader {
        required topic: String = "topic",
        required group: String = "group",
        /// Only the client with this client id (4.9 compares it with the client id).
        optional client_addr: String = "clientAddr",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::{CommandHeader, HeaderError};

    #[test]
    fn reset_offset_as_mqadmin_4_9_sends_it() {
        let f: ExtFields = [
            ("topic", "T"),
            ("group", "G"),
            ("timestamp", "1700000000000"),
            ("isForce", "true"),
        ]
        .into_iter()
        .collect();
        let h = ResetOffsetRequestHeader::read(&f).unwrap();
        assert_eq!(
            (h.timestamp, h.is_force, h.queue_id),
            (1_700_000_000_000, true, -1)
        );
        let mut no_force = f.clone();
        no_force.remove("isForce");
        assert_eq!(
            ResetOffsetRequestHeader::read(&no_force),
            Err(HeaderError::Missing("isForce"))
        );
        let s: ExtFields = [("topic", "T"), ("group", "G")].into_iter().collect();
        let h = GetConsumerStatusRequestHeader::read(&s).unwrap();
        assert_eq!(h.client_addr, None);
    }
}
