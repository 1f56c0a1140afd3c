//! The property and flag rewrites of a transaction's records
//! (`TransactionalMessageBridge.parseHalfMessageInner` / `renewHalfMessageInner`,
//! `EndTransactionProcessor.endMessageTransaction`, `TransactionalMessageUtil`):
//! what a half message, its committed copy, its re-appended copy and its op record
//! carry. Pure functions over the properties string.

use protocol::message::properties::{
    self, CHECK_IMMUNITY_TIME_IN_SECONDS, PGROUP, REAL_QID, REAL_TOPIC, TAGS, TRAN_MSG,
    TRAN_PREPARED_QUEUE_OFFSET, TRANSACTION_CHECK_TIMES, UNIQ_KEY, WAIT,
};
use protocol::message::{MessageSysFlag, PhysicalOffset, Properties, QueueOffset, TransactionType};

use super::decisions::TransactionId;
use super::{HALF_TOPIC, QUEUE_ID};
use crate::services::stamps::TRAN_ORIGIN_OFFSET;
use store::commitlog::BrokerMessage;

/// Tag of op records (`TransactionalMessageUtil.REMOVETAG`).
pub const REMOVE_TAG: &str = "d";

/// True when the producer marked the message as a transaction's half (`TRAN_MSG=true`,
/// read like Java's `Boolean.parseBoolean`).
pub fn is_half(props: &str) -> bool {
    properties::find(props, TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// `parseHalfMessageInner`: remembers the real destination in `REAL_TOPIC` / `REAL_QID`
/// and clears the transaction bits, so the half topic's ConsumeQueue indexes the record
/// (the store does not dispatch PREPARED records) while the real topic never sees it.
pub fn half_properties(store_props: &str, real_topic: &str, real_queue_id: i32) -> String {
    let mut p = Properties::parse(store_props);
    p.insert(REAL_TOPIC, real_topic);
    p.insert(REAL_QID, real_queue_id.to_string());
    p.to_string()
}

pub fn half_sys_flag(sys_flag: MessageSysFlag) -> MessageSysFlag {
    sys_flag.with_transaction_type(TransactionType::Not)
}

/// Turns a send into its half message, in place: stored in [`HALF_TOPIC`] queue 0 with
/// the destination in its properties and the transaction bits cleared.
pub fn to_half(put: &mut BrokerMessage) {
    put.properties = half_properties(&put.properties, &put.topic, put.queue_id);
    put.sys_flag = half_sys_flag(put.sys_flag);
    put.topic = HALF_TOPIC.to_owned();
    put.queue_id = QUEUE_ID;
}

/// Where a half message really goes, from its `REAL_TOPIC` / `REAL_QID`.
pub fn real_destination(props: &str) -> Option<(String, i32)> {
    let topic = properties::find(props, REAL_TOPIC)?;
    let queue_id = properties::find(props, REAL_QID)?.trim().parse().ok()?;
    Some((topic.to_owned(), queue_id))
}

/// The properties of the committed copy (`endMessageTransaction`): the half's, without
/// `REAL_TOPIC`, `REAL_QID` and `TRAN_MSG`. RocketMQ clears these after it has already
/// rendered the properties string, so a 4.9 record keeps them by accident (and Java
/// consumers strip `TRAN_MSG` before sending a message back); dropping them here keeps a
/// consumed message that is re-sent from being taken for a new half message.
pub fn committed_properties(half_props: &str) -> String {
    let mut p = Properties::parse(half_props);
    p.remove(REAL_TOPIC);
    p.remove(REAL_QID);
    p.remove(TRAN_MSG);
    p.to_string()
}

/// The committed copy's sysFlag: the half's with the decided transaction type.
pub fn committed_sys_flag(half_sys_flag: MessageSysFlag) -> MessageSysFlag {
    half_sys_flag.with_transaction_type(TransactionType::Commit)
}

/// Check-backs already sent for a half message (`TRANSACTION_CHECK_TIMES`, 0 when absent
/// or unparsable).
pub fn check_times(props: &str) -> i32 {
    properties::find(props, TRANSACTION_CHECK_TIMES)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// What the checker decides from a half message's check count
/// (`TransactionalMessageServiceImpl.needDiscard`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckCount {
    /// `transactionCheckMax` reached: move the message to `TRANS_CHECK_MAX_TIME_TOPIC`.
    Discard,
    /// Check it again; the re-appended copy carries these properties.
    Again(String),
}

/// `needDiscard`: the first check writes 1, later ones increment; a message whose count
/// already reached `check_max` is discarded.
pub fn next_check(props: &str, check_max: i32) -> CheckCount {
    let next = match properties::find(props, TRANSACTION_CHECK_TIMES) {
        None => 1,
        Some(v) => {
            let n: i32 = v.trim().parse().unwrap_or(0);
            if n >= check_max {
                return CheckCount::Discard;
            }
            n.saturating_add(1)
        }
    };
    let mut p = Properties::parse(props);
    p.insert(TRANSACTION_CHECK_TIMES, next.to_string());
    CheckCount::Again(p.to_string())
}

/// How long (ms) after its birth a half message is left alone: the message's
/// `CHECK_IMMUNITY_TIME_IN_SECONDS` when it is a positive number, else `transactionTimeOut`
/// (`TransactionalMessageServiceImpl.getImmunityTime`).
pub fn immunity_ms(props: &str, transaction_timeout_ms: i64) -> i64 {
    match properties::find(props, CHECK_IMMUNITY_TIME_IN_SECONDS)
        .and_then(|v| v.trim().parse::<i64>().ok())
    {
        Some(s) if s > 0 => s.saturating_mul(1000),
        _ => transaction_timeout_ms,
    }
}

pub fn has_own_immunity(props: &str) -> bool {
    properties::find(props, CHECK_IMMUNITY_TIME_IN_SECONDS).is_some()
}

/// The half queue offset an immunity copy stands for (`TRAN_PREPARED_QUEUE_OFFSET`,
/// written by `putImmunityMsgBackToHalfQueue`).
pub fn prepared_queue_offset(props: &str) -> Option<QueueOffset> {
    properties::find(props, TRAN_PREPARED_QUEUE_OFFSET)
        .and_then(|v| v.trim().parse().ok())
        .map(QueueOffset)
}

/// Properties of an immunity copy: the original's plus the offset it stands for.
pub fn immunity_copy_properties(props: &str, original: QueueOffset) -> String {
    let mut p = Properties::parse(props);
    p.insert(TRAN_PREPARED_QUEUE_OFFSET, original.0.to_string());
    p.to_string()
}

/// True for a half record the checker wrote (a check or immunity copy) rather than the
/// producer: another copy of the same transaction may exist.
pub fn is_copy(props: &str) -> bool {
    properties::find(props, TRAN_ORIGIN_OFFSET).is_some()
        || properties::find(props, TRANSACTION_CHECK_TIMES).is_some()
        || properties::find(props, TRAN_PREPARED_QUEUE_OFFSET).is_some()
}

/// The CommitLog offset of the original half message a half record stands for: its
/// `TRAN_ORIGIN_OFFSET` when the checker wrote it, else its own offset `own`. The send
/// path drops the property from what producers send, so only the broker's copies carry it.
pub fn origin_offset(props: &str, own: PhysicalOffset) -> PhysicalOffset {
    properties::find(props, TRAN_ORIGIN_OFFSET)
        .and_then(|v| v.trim().parse().ok())
        .map_or(own, PhysicalOffset)
}

/// The properties of a copy of the half record stored at `own`: `props` naming the
/// original (kept when the record is itself a copy).
pub fn with_origin(props: &str, own: PhysicalOffset) -> String {
    let origin = origin_offset(props, own);
    let mut p = Properties::parse(props);
    p.insert(TRAN_ORIGIN_OFFSET, origin.0.to_string());
    p.to_string()
}

/// The transaction a half record (stored at `own`) belongs to; `None` without a real
/// topic (no transaction to decide).
pub fn transaction_id(props: &str, own: PhysicalOffset) -> Option<TransactionId> {
    let (topic, _) = real_destination(props)?;
    Some(TransactionId::new(
        origin_offset(props, own),
        producer_group(props).unwrap_or(""),
        &topic,
    ))
}

pub fn producer_group(props: &str) -> Option<&str> {
    properties::find(props, PGROUP)
}

pub fn uniq_key(props: &str) -> Option<&str> {
    properties::find(props, UNIQ_KEY)
}

/// Body of an op record: the decided half message's queue offset as decimal text
/// (`TransactionalMessageBridge.addRemoveTagInTransactionOp`).
pub fn op_body(half_offset: QueueOffset) -> String {
    half_offset.0.to_string()
}

/// The half queue offset an op record marks done; `None` for a body that is not a number.
pub fn parse_op_body(body: &[u8]) -> Option<QueueOffset> {
    std::str::from_utf8(body)
        .ok()?
        .trim()
        .parse()
        .ok()
        .map(QueueOffset)
}

/// Properties of an op record: tag `d` and `WAIT=true`, as `new Message(topic, "d", body)`
/// carries them.
pub fn op_properties() -> String {
    let mut p = Properties::new();
    p.insert(TAGS, REMOVE_TAG);
    p.insert(WAIT, "true");
    p.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SENT: &str = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg\u{2}UNIQ_KEY\u{1}AB01\u{2}TAGS\u{1}t\u{2}CLUSTER\u{1}C";

    #[test]
    fn half_rewrite_keeps_the_real_destination() {
        assert!(is_half(SENT));
        assert!(is_half("TRAN_MSG\u{1}TRUE"));
        assert!(!is_half("TRAN_MSG\u{1}yes"));
        assert!(!is_half("TAGS\u{1}t"));
        let half = half_properties(SENT, "Orders", 3);
        assert!(half.starts_with(SENT));
        assert_eq!(real_destination(&half), Some(("Orders".to_owned(), 3)));
        assert_eq!(producer_group(&half), Some("pg"));
        assert_eq!(uniq_key(&half), Some("AB01"));
        assert_eq!(real_destination(SENT), None);
        assert_eq!(
            real_destination("REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}x"),
            None
        );
        let prepared = MessageSysFlag(MessageSysFlag::TRANSACTION_PREPARED_TYPE | 0x2);
        assert_eq!(half_sys_flag(prepared), MessageSysFlag(0x2));
        assert_eq!(
            committed_sys_flag(half_sys_flag(prepared)).transaction_type(),
            TransactionType::Commit
        );
    }

    #[test]
    fn committed_copy_drops_the_transaction_routing_properties() {
        let half = half_properties(SENT, "Orders", 3);
        let committed = committed_properties(&half);
        assert_eq!(
            committed,
            "PGROUP\u{1}pg\u{2}UNIQ_KEY\u{1}AB01\u{2}TAGS\u{1}t\u{2}CLUSTER\u{1}C"
        );
        assert!(!is_half(&committed));
    }

    #[test]
    fn check_times_count_up_to_the_limit() {
        let CheckCount::Again(first) = next_check(SENT, 2) else {
            panic!("first check discarded");
        };
        assert_eq!(check_times(&first), 1);
        assert!(is_copy(&first));
        assert!(!is_copy(SENT));
        let CheckCount::Again(second) = next_check(&first, 2) else {
            panic!("second check discarded");
        };
        assert_eq!(check_times(&second), 2);
        assert_eq!(next_check(&second, 2), CheckCount::Discard);
        // A garbled count restarts from 0 rather than failing.
        let CheckCount::Again(g) = next_check("TRANSACTION_CHECK_TIMES\u{1}x", 2) else {
            panic!("garbled count discarded");
        };
        assert_eq!(check_times(&g), 1);
    }

    #[test]
    fn immunity_and_prepared_offset() {
        assert_eq!(immunity_ms(SENT, 6000), 6000);
        let own = format!("{SENT}\u{2}CHECK_IMMUNITY_TIME_IN_SECONDS\u{1}30");
        assert!(has_own_immunity(&own));
        assert_eq!(immunity_ms(&own, 6000), 30_000);
        assert_eq!(
            immunity_ms("CHECK_IMMUNITY_TIME_IN_SECONDS\u{1}-1", 6000),
            6000
        );
        assert_eq!(
            immunity_ms("CHECK_IMMUNITY_TIME_IN_SECONDS\u{1}z", 6000),
            6000
        );
        let copy = immunity_copy_properties(&own, QueueOffset(7));
        assert_eq!(prepared_queue_offset(&copy), Some(QueueOffset(7)));
        assert!(is_copy(&copy));
        assert_eq!(prepared_queue_offset(SENT), None);
    }

    #[test]
    fn copies_name_their_original() {
        let half = half_properties(SENT, "Orders", 3);
        assert_eq!(
            origin_offset(&half, PhysicalOffset(500)),
            PhysicalOffset(500)
        );
        let copy = with_origin(&half, PhysicalOffset(500));
        assert_eq!(
            origin_offset(&copy, PhysicalOffset(900)),
            PhysicalOffset(500)
        );
        // A copy of a copy keeps the first original.
        let again = with_origin(&copy, PhysicalOffset(900));
        assert_eq!(
            origin_offset(&again, PhysicalOffset(1300)),
            PhysicalOffset(500)
        );
        assert_eq!(
            transaction_id(&again, PhysicalOffset(1300)),
            transaction_id(&half, PhysicalOffset(500))
        );
        assert_ne!(
            transaction_id(&half, PhysicalOffset(500)),
            transaction_id(&half, PhysicalOffset(501))
        );
        assert_eq!(transaction_id(SENT, PhysicalOffset(1)), None);
    }

    #[test]
    fn op_records() {
        assert_eq!(op_body(QueueOffset(42)), "42");
        assert_eq!(parse_op_body(b"42"), Some(QueueOffset(42)));
        assert_eq!(parse_op_body(b"x"), None);
        assert_eq!(parse_op_body(&[0xff]), None);
        assert_eq!(op_properties(), "TAGS\u{1}d\u{2}WAIT\u{1}true");
    }
}
