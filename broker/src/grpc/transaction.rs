//! EndTransaction: a 5.x producer's commit or rollback, carried out by the 4.x
//! END_TRANSACTION handler (`EndTransactionProcessor`) so both protocols follow the same
//! rules: the half message is found at the CommitLog offset the transaction id names,
//! and its stored identity (UNIQ_KEY, producer group) must match the request.
//!
//! A 5.x transaction id is the broker's own handle on the half message:
//! `<commitLogOffset>-<halfQueueOffset>` in hex (the 4.x client carries the same two
//! numbers in its END_TRANSACTION header).

use std::sync::Arc;

use grpc_api::v2::{Code, EndTransactionRequest, TransactionResolution, TransactionSource};
use protocol::RemotingCommand;
use protocol::code::{request as rq, response};
use protocol::header::EndTransactionRequestHeader;
use protocol::message::{MessageSysFlag, PhysicalOffset, QueueOffset};

use crate::handlers::Reply;
use crate::services::Broker;
use crate::services::transaction::{bridge, half};

pub fn encode_id(commit_log: PhysicalOffset, queue: QueueOffset) -> String {
    format!("{:016X}-{:016X}", commit_log.0, queue.0)
}

pub fn decode_id(id: &str) -> Option<(PhysicalOffset, QueueOffset)> {
    let (a, b) = id.trim().split_once('-')?;
    let c = i64::from_str_radix(a, 16).ok().filter(|v| *v >= 0)?;
    let q = i64::from_str_radix(b, 16).ok().filter(|v| *v >= 0)?;
    Some((PhysicalOffset(c), QueueOffset(q)))
}

/// The producer group 5.x transactions are kept under: the topic's name. 5.x producers
/// declare topics, not groups; they are registered under each topic they publish to
/// (Telemetry settings), so the checker finds them by the half message's `PGROUP`.
pub fn producer_group(topic: &str) -> String {
    topic.to_owned()
}

/// Carries out `req`; the v2 status to answer.
pub async fn end(broker: &Arc<Broker>, req: &EndTransactionRequest) -> (Code, String) {
    let Some((commit_log, queue)) = decode_id(&req.transaction_id) else {
        return (
            Code::InvalidTransactionId,
            format!(
                "transaction id {:?} is not one this broker issued",
                req.transaction_id
            ),
        );
    };
    let topic = req.topic.as_ref().map(|t| t.name.as_str()).unwrap_or("");
    let decision = match TransactionResolution::try_from(req.resolution) {
        Ok(TransactionResolution::Commit) => MessageSysFlag::TRANSACTION_COMMIT_TYPE,
        Ok(TransactionResolution::Rollback) => MessageSysFlag::TRANSACTION_ROLLBACK_TYPE,
        _ => {
            return (
                Code::Ok,
                "unknown resolution: the broker will check back".into(),
            );
        }
    };
    let header = EndTransactionRequestHeader {
        producer_group: producer_group(topic),
        tran_state_table_offset: queue,
        commit_log_offset: commit_log,
        commit_or_rollback: decision,
        from_transaction_check: req.source == TransactionSource::SourceServerCheck as i32,
        msg_id: req.message_id.clone(),
        transaction_id: Some(req.transaction_id.clone()),
        bname: None,
    };
    // 4.9's END_TRANSACTION trusts the message id; a 5.x client names it beside the
    // transaction id, and a decision for another message's half is refused.
    if let Ok(record) = bridge::verified_half(broker, &header)
        && half::uniq_key(record.view().properties()) != Some(req.message_id.as_str())
    {
        return (
            Code::InvalidTransactionId,
            format!(
                "transaction id {} does not belong to message {}",
                req.transaction_id, req.message_id
            ),
        );
    }
    let cmd = RemotingCommand::request(rq::END_TRANSACTION, &header);
    match crate::handlers::end_transaction::end_transaction(broker, &cmd).await {
        Ok(Reply::Response(out)) if out.command.code == response::SUCCESS => {
            (Code::Ok, "OK".into())
        }
        Ok(Reply::Response(out)) => (
            super::status::from_remoting(out.command.code),
            out.command.remark.unwrap_or_default(),
        ),
        Ok(Reply::None) => (Code::Ok, "OK".into()),
        Err(e) => (Code::InternalServerError, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_ids_round_trip_and_refuse_garbage() {
        let id = encode_id(PhysicalOffset(123_456), QueueOffset(7));
        assert_eq!(
            decode_id(&id),
            Some((PhysicalOffset(123_456), QueueOffset(7)))
        );
        for bad in ["", "12", "x-1", "1-y", "-1-2", "7FFFFFFFFFFFFFFFF-1"] {
            assert_eq!(decode_id(bad), None, "{bad}");
        }
    }
}
