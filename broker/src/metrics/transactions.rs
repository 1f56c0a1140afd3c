//! Transaction metrics, registered into the broker's registry by `crate::metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Default)]
pub struct TransactionMetrics {
    /// Half messages the checker has not seen decided, as of its last round (plus sends
    /// and minus decisions since).
    pub half_outstanding: Gauge,
    pub check_backs: Counter,
    pub commits: Counter,
    pub rollbacks: Counter,
    /// Half messages moved to `TRANS_CHECK_MAX_TIME_TOPIC`.
    pub discarded: Counter,
    /// Checker rounds completed, whether or not they found anything to check.
    pub check_rounds: Counter,
    /// Decided transactions remembered (bounded by `transactionDecisionMaxEntries`).
    pub decisions_tracked: Gauge,
    /// Bytes held for them.
    pub decisions_bytes: Gauge,
    /// Decisions dropped before their retention ended, to stay within the bound.
    pub decisions_evicted: Counter,
}

impl TransactionMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "rocketmq_transaction_half_outstanding",
            "Transactional half messages not decided yet",
            self.half_outstanding.clone(),
        );
        r.register(
            "rocketmq_transaction_check_backs",
            "CHECK_TRANSACTION_STATE requests sent to producers",
            self.check_backs.clone(),
        );
        r.register(
            "rocketmq_transaction_commits",
            "Transactions committed (message stored in its real topic)",
            self.commits.clone(),
        );
        r.register(
            "rocketmq_transaction_rollbacks",
            "Transactions rolled back",
            self.rollbacks.clone(),
        );
        r.register(
            "rocketmq_transaction_discarded",
            "Half messages moved to TRANS_CHECK_MAX_TIME_TOPIC after transactionCheckMax checks",
            self.discarded.clone(),
        );
        r.register(
            "rocketmq_transaction_check_rounds",
            "Rounds of the transaction checker over the half queue, completed",
            self.check_rounds.clone(),
        );
        r.register(
            "rocketmq_transaction_decisions_tracked",
            "Decided transactions the broker remembers to keep a repeated answer from storing twice (transactionDecisionMaxEntries)",
            self.decisions_tracked.clone(),
        );
        r.register(
            "rocketmq_transaction_decisions_bytes",
            "Bytes held for the remembered transaction decisions",
            self.decisions_bytes.clone(),
        );
        r.register(
            "rocketmq_transaction_decisions_evicted",
            "Remembered transaction decisions dropped early to stay within transactionDecisionMaxEntries",
            self.decisions_evicted.clone(),
        );
    }

    /// After the decisions changed: `tracked` entries in `bytes`, `evicted` of them
    /// dropped early.
    pub fn decisions_changed(&self, tracked: usize, bytes: usize, evicted: u64) {
        self.decisions_evicted.inc_by(evicted);
        self.decisions_tracked
            .set(i64::try_from(tracked).unwrap_or(i64::MAX));
        self.decisions_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    pub fn half_sent(&self) {
        self.half_outstanding.inc();
    }

    pub fn decided(&self) {
        if self.half_outstanding.get() > 0 {
            self.half_outstanding.dec();
        }
    }
}
