//! Transactional messages (RocketMQ 4.9's `TransactionalMessageService*`,
//! `EndTransactionProcessor`, `TransactionalMessageCheckService`).
//!
//! * A send carrying `TRAN_MSG=true` is stored as a half message in
//!   [`HALF_TOPIC`] queue 0 with its destination in `REAL_TOPIC` / `REAL_QID`
//!   ([`half`], rewritten by the send handler before the put), so consumers of the real
//!   topic never see it.
//! * END_TRANSACTION stores the committed copy in the real queue and/or writes an
//!   op record to [`OP_TOPIC`] whose body is the decided half queue offset.
//! * The checker ([`checker`]) walks the half queue behind [`CHECK_GROUP`]'s offset,
//!   skips what op records decided ([`op_queue`]), and asks a live producer of the group
//!   about the rest (CHECK_TRANSACTION_STATE), re-appending each checked half message with
//!   its check count and its original's CommitLog offset; past `transactionCheckMax` a
//!   message goes to [`CHECK_MAX_TOPIC`].
//! * [`decisions`] keeps one transaction from being stored twice, by the identity the
//!   broker assigned (the original half's CommitLog offset, producer group, real topic);
//!   [`recovery`] rebuilds it from the op queue after a start.

pub mod bridge;
pub mod checker;
pub mod decisions;
pub mod half;
pub mod op_queue;
pub mod recovery;

use std::time::{Duration, Instant};

use decisions::{Decided, Decisions, TransactionId};
use tokio::sync::OnceCell;

use crate::config::BrokerConfig;
use crate::metrics::transactions::TransactionMetrics;

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
/// Late answers after a transaction's last check-back are still caught this long.
const LATE_ANSWER_GRACE: Duration = Duration::from_secs(60);

/// The broker's transaction state besides the store.
pub struct Transactions {
    pub decisions: Decisions,
    /// Set once [`recovery::rebuild`] has run after the start.
    recovered: OnceCell<()>,
}

impl Transactions {
    /// A decision is kept while an answer for one of its transaction's records may still
    /// come: its last copy is made at most `transactionCheckMax` check rounds (each at
    /// least `transactionCheckInterval`, and not before `transactionTimeOut`) after the
    /// original, plus a grace for the producer's answer.
    pub fn new(b: &BrokerConfig) -> Self {
        let round = b.transaction_check_interval.max(b.transaction_time_out);
        let rounds = u64::try_from(b.transaction_check_max.max(0)).unwrap_or(0) + 1;
        let retention = Duration::from_millis(round.saturating_mul(rounds)) + LATE_ANSWER_GRACE;
        Self {
            decisions: Decisions::new(b.transaction_decision_max_entries as usize, retention),
            recovered: OnceCell::new(),
        }
    }

    /// Records a decision for `id` (see [`Decisions::decide`]) and updates the metrics.
    pub fn decide(&self, id: TransactionId, metrics: &TransactionMetrics) -> Decided {
        let (decided, evicted) = self.decisions.decide(id, Instant::now());
        metrics.decisions_changed(self.decisions.len(), self.decisions.bytes(), evicted);
        decided
    }

    pub fn is_decided(&self, id: TransactionId) -> bool {
        self.decisions.contains(id, Instant::now())
    }
}

#[cfg(test)]
mod tests;
