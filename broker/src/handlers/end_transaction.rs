//! END_TRANSACTION (37, `EndTransactionProcessor`): the producer's decision about a
//! half message. Commit stores the committed copy in the real queue and then writes the
//! op record; rollback writes only the op record; unknown (0) does nothing, so the
//! checker asks again later.

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::response;
use protocol::header::EndTransactionRequestHeader;
use protocol::message::TransactionType;
use store::BrokerRole;

use crate::handlers::{HandlerResult, Reply, error, success};
use crate::services::Broker;
use crate::services::put_path::Put;
use crate::services::transaction::decisions::{Decided, TransactionId};
use crate::services::transaction::{CHECK_GROUP, HALF_TOPIC, QUEUE_ID, bridge, half, recovery};

pub async fn end_transaction(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: EndTransactionRequestHeader = request.header()?;
    if broker.config.store.broker_role == BrokerRole::Slave {
        return error(
            request,
            response::SLAVE_NOT_AVAILABLE,
            "Can't commit or rollback transaction, the broker is a slave",
        );
    }
    let decision = match h.decision() {
        Some(TransactionType::Commit) => TransactionType::Commit,
        Some(TransactionType::Rollback) => TransactionType::Rollback,
        // Unknown: no answer, no record; the checker asks again.
        _ => return Ok(Reply::None),
    };
    tracing::debug!(
        producer_group = %h.producer_group,
        msg_id = %h.msg_id,
        from_check = h.from_transaction_check,
        ?decision,
        "end transaction"
    );
    let half = match bridge::verified_half(broker, &h) {
        Ok(record) => record,
        Err(remark) => return error(request, response::SYSTEM_ERROR, remark),
    };
    let props = half.view().properties().to_owned();
    let Some(id) = half::transaction_id(&props, h.commit_log_offset) else {
        return error(
            request,
            response::SYSTEM_ERROR,
            "the half message has no REAL_TOPIC / REAL_QID",
        );
    };
    // Decisions made before a restart are known before this one is taken.
    recovery::ensure(broker).await;
    let transactions = &broker.transactions;
    let metrics = &broker.metrics.transactions;

    let duplicate = transactions.decide(id, metrics) == Decided::Already
        || (decision == TransactionType::Commit && committed_before(broker, &h, &props, id));
    if duplicate {
        // Decided already (a late answer, or an answer to a check-back of a copy): the
        // half offset is still marked done, nothing is stored again.
        tracing::debug!(msg_id = %h.msg_id, origin = %id.origin, "transaction already decided; only marking the half offset");
        return mark_done(broker, request, &h).await;
    }

    if decision == TransactionType::Commit {
        let Some((topic, queue_id)) = half::real_destination(&props) else {
            transactions.decisions.undo(id);
            return error(
                request,
                response::SYSTEM_ERROR,
                "the half message has no REAL_TOPIC / REAL_QID",
            );
        };
        let msg = bridge::derived(
            broker,
            &half,
            &topic,
            queue_id,
            half::committed_properties(&props),
            half::committed_sys_flag(half.view().sys_flag()),
        );
        let body_len = msg.body.len() as u64;
        let result = broker
            .put(Put::TransactionEnd {
                msg,
                // The original half, whichever copy was answered: the committed copy
                // names its transaction (RocketMQ stores the answered record's offset).
                prepared: id.origin,
            })
            .await;
        if !bridge::stored(&result) {
            transactions.decisions.undo(id);
            return error(
                request,
                response::SYSTEM_ERROR,
                format!("storing the committed message failed: {:?}", result.status),
            );
        }
        broker.metrics.record_put(&topic, 1, body_len);
        metrics.commits.inc();
    } else {
        metrics.rollbacks.inc();
    }
    metrics.decided();
    mark_done(broker, request, &h).await
}

/// Writes the op record for the request's half offset.
async fn mark_done(
    broker: &Broker,
    request: &RemotingCommand,
    h: &EndTransactionRequestHeader,
) -> HandlerResult {
    let op = bridge::put_op(broker, h.tran_state_table_offset).await;
    if !bridge::stored(&op) {
        // The decision stands; the checker may ask once more and the duplicate guard
        // keeps the message single.
        tracing::warn!(status = ?op.status, half_offset = %h.tran_state_table_offset, "op record not stored");
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("storing the op record failed: {:?}", op.status),
        );
    }
    Ok(success(request).into())
}

/// Whether an earlier commit of this transaction may exist outside the in-memory
/// decisions: only a half message the checker has dealt with (a copy, a check-back
/// answer, or one behind the checker's progress) can have another committed copy, and
/// then the real topic's index is asked for a committed copy naming the same original.
fn committed_before(
    broker: &Broker,
    h: &EndTransactionRequestHeader,
    props: &str,
    id: TransactionId,
) -> bool {
    let behind_checker = broker
        .offsets
        .query(CHECK_GROUP, HALF_TOPIC, QUEUE_ID)
        .is_some_and(|progress| h.tran_state_table_offset.0 < progress.0);
    if !(h.from_transaction_check || half::is_copy(props) || behind_checker) {
        return false;
    }
    let (Some((topic, _)), Some(key)) = (half::real_destination(props), half::uniq_key(props))
    else {
        return false;
    };
    let found = bridge::committed_in_index(broker, id, &topic, key);
    if found {
        tracing::info!(msg_id = %h.msg_id, origin = %id.origin, "transaction already committed; commit ignored");
    }
    found
}
