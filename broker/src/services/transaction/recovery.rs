//! Decisions after a start, from the op queue: what [`super::decisions`] must know
//! survives kill -9 because the op records are its durable form. Each op record names a
//! decided half queue offset (`TransactionalMessageBridge.addRemoveTagInTransactionOp`);
//! the half record there, an original or a copy, names its transaction.
//!
//! Only the op records a decision could still be needed for are read: those stored
//! within the decisions' retention, at most `transactionDecisionMaxEntries` of the
//! newest. END_TRANSACTION and the checker wait for this to finish once
//! ([`ensure`]), so neither decides before the broker knows what was decided.

use std::time::{Duration, Instant};

use protocol::message::QueueOffset;

use super::bridge::{self, HalfAt};
use super::{OP_TOPIC, QUEUE_ID, half};
use crate::services::Broker;

/// Runs [`rebuild`] once per process; later calls return at once.
pub async fn ensure(broker: &Broker) {
    broker
        .transactions
        .recovered
        .get_or_init(|| rebuild(broker))
        .await;
}

/// Reads the recent op records into the decisions (see the module docs).
async fn rebuild(broker: &Broker) {
    // After an unclean stop the op queue's ConsumeQueue is rebuilt from the CommitLog.
    crate::services::schedule::recovery::wait_for_dispatch(broker).await;
    let started = Instant::now();
    let decisions = &broker.transactions.decisions;
    let store = &broker.store;
    let (min, max) = (
        store.min_offset_in_queue(OP_TOPIC, QUEUE_ID),
        store.max_offset_in_queue(OP_TOPIC, QUEUE_ID),
    );
    let limit = decisions.max_entries();
    let from = QueueOffset(max.0.saturating_sub(limit as i64).max(min.0));
    let now = Instant::now();
    let now_ms = crate::now_ms();
    let retention_ms = i64::try_from(decisions.retention().as_millis()).unwrap_or(i64::MAX);
    let (mut restored, mut evicted) = (0u64, 0u64);
    for op in bridge::read_ops(broker, from, limit) {
        let age_ms = now_ms.saturating_sub(op.store_timestamp).max(0);
        if age_ms > retention_ms {
            continue;
        }
        let Some(half_offset) = op.half else {
            continue;
        };
        let HalfAt::Record(record) = bridge::read_half(broker, half_offset) else {
            continue;
        };
        let v = record.view();
        let Some(id) = half::transaction_id(v.properties(), v.physical_offset()) else {
            continue;
        };
        let at = now
            .checked_sub(Duration::from_millis(age_ms.unsigned_abs()))
            .unwrap_or(now);
        evicted += decisions.restore(id, at, now);
        restored += 1;
    }
    broker
        .metrics
        .transactions
        .decisions_changed(decisions.len(), decisions.bytes(), evicted);
    if restored > 0 {
        tracing::info!(
            restored,
            kept = decisions.len(),
            elapsed = ?started.elapsed(),
            "transaction decisions recovered from the op queue"
        );
    }
}
