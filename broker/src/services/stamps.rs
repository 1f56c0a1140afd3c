//! Properties only the broker writes. The transaction checker, END_TRANSACTION, the
//! delay schedule's recovery and the ACL decide by them, so a value a client sent under
//! one of these names must never reach the store: the send path drops every one of them
//! before the broker stamps its own (RocketMQ 4.9 keeps whatever the client sent).

use protocol::message::properties::{
    REAL_QID, REAL_TOPIC, TRAN_PREPARED_QUEUE_OFFSET, TRANSACTION_CHECK_TIMES,
};

/// Not a RocketMQ property. The CommitLog offset of a transaction's original half
/// message, stamped on every copy the checker re-appends (check and immunity copies get
/// offsets of their own): with the producer group and the real topic it is the
/// transaction's identity.
pub const TRAN_ORIGIN_OFFSET: &str = "TRAN_ORIGIN_OFFSET";

/// Not a RocketMQ property. The CommitLog offset of the `SCHEDULE_TOPIC_XXXX` record a
/// delayed message was delivered from, stamped on the delivered copy: after an unclean
/// stop, recovery finds out whether that record was delivered by this stamp.
pub const DELAY_PARKED_OFFSET: &str = "DELAY_PARKED_OFFSET";

/// Every property the broker stamps on a stored record: the real destination of a half
/// or parked record (`REAL_TOPIC`, `REAL_QID`), the checker's bookkeeping
/// (`TRANSACTION_CHECK_TIMES`, `TRAN_PREPARED_QUEUE_OFFSET`) and the two above.
pub const BROKER_OWNED: &[&str] = &[
    REAL_TOPIC,
    REAL_QID,
    TRANSACTION_CHECK_TIMES,
    TRAN_PREPARED_QUEUE_OFFSET,
    TRAN_ORIGIN_OFFSET,
    DELAY_PARKED_OFFSET,
];

pub fn is_broker_owned(name: &str) -> bool {
    BROKER_OWNED.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_owned_names() {
        for name in ["REAL_TOPIC", "TRAN_ORIGIN_OFFSET", "DELAY_PARKED_OFFSET"] {
            assert!(is_broker_owned(name), "{name}");
        }
        for name in [
            "UNIQ_KEY",
            "TRAN_MSG",
            "PGROUP",
            "CHECK_IMMUNITY_TIME_IN_SECONDS",
        ] {
            assert!(!is_broker_owned(name), "{name}");
        }
    }
}
