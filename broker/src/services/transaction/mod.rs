//! Transactional messages (RocketMQ 4.9's `TransactionalMessageService*`,
//! `EndTransactionProcessor`, `TransactionalMessageCheckService`; reference §7.11, §12).
//!
//! * A send carrying `TRAN_MSG=true` is stored as a half message in
//!   [`HALF_TOPIC`] queue 0 with its destination in `REAL_TOPIC` / `REAL_QID`
//!   ([`half`], rewritten by the send handler before the put), so consumers of the real
//!   topic never see it.
//! * END_TRANSACTION ([`end`]) stores the committed copy in the real queue and/or writes an
//!   op record to [`OP_TOPIC`] whose body is the decided half queue offset.
//! * The checker ([`checker`]) walks the half queue behind [`CHECK_GROUP`]'s offset,
//!   skips what op records decided ([`op_queue`]), and asks a live producer of the group
//!   about the rest (CHECK_TRANSACTION_STATE), re-appending each checked half message with
//!   its check count; past `transactionCheckMax` a message goes to [`CHECK_MAX_TOPIC`].
//! * [`resolved`] keeps one transaction from being stored twice.

pub mod bridge;
pub mod checker;
pub mod half;
pub mod op_queue;
pub mod resolved;

use std::time::Duration;

use resolved::Resolved;

/// `TransactionalMessageUtil.buildHalfTopic()`.
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// `TransactionalMessageUtil.buildOpTopic()`.
pub const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// `TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC`.
pub const CHECK_MAX_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// `MixAll.CID_SYS_RMQ_TRANS`: the group whose offsets are the checker's progress.
pub const CHECK_GROUP: &str = "CID_RMQ_SYS_TRANS";
/// Half and op records live in queue 0 of their topics.
pub const QUEUE_ID: i32 = 0;

/// The broker's transaction state besides the store.
pub struct Transactions {
    pub resolved: Resolved,
}

impl Default for Transactions {
    fn default() -> Self {
        Self {
            // An hour covers every late answer to a check-back of the default schedule
            // (15 checks a minute apart); older duplicates are caught by the index.
            resolved: Resolved::new(Duration::from_secs(3600)),
        }
    }
}

#[cfg(test)]
mod tests;
