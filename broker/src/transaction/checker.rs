//! The transaction checker (`TransactionalMessageCheckService` +
//! `TransactionalMessageServiceImpl.check` + `AbstractTransactionalMessageCheckListener`):
//! every `transactionCheckInterval` it walks the half queue from `CID_RMQ_SYS_TRANS`'s
//! offset, asks a live producer of each undecided, old-enough half message's group for
//! the outcome (CHECK_TRANSACTION_STATE, oneway), and saves its half and op progress as
//! that group's consumer offsets, so a restarted broker resumes where it stopped.
//!
//! Each checked message is first re-appended to the half queue with
//! `TRANSACTION_CHECK_TIMES` incremented and the check-back names the copy, so the
//! producer's answer decides the copy and the original offset is left behind. A message
//! checked `transactionCheckMax` times is moved to `TRANS_CHECK_MAX_TIME_TOPIC`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::RemotingCommand;
use protocol::code::request as rq;
use protocol::header::CheckTransactionStateRequestHeader;
use protocol::message::{ConsumerOffset, QueueOffset, offset_msg_id};
use store::BrokerRole;

use super::bridge::{self, StoredRecord};
use super::half::{self, CheckCount};
use super::op_queue::OpState;
use super::{CHECK_GROUP, HALF_TOPIC, OP_TOPIC, QUEUE_ID};
use crate::state::Broker;

/// A round stops after this long and continues in the next (`MAX_PROCESS_TIME_LIMIT`).
const MAX_ROUND_TIME: Duration = Duration::from_secs(60);
/// Op records read per round at most; the rest are read in later rounds.
const MAX_OPS_PER_ROUND: usize = 1_000_000;

/// Runs rounds until shutdown. A slave never checks (RocketMQ starts the service on
/// masters only).
pub async fn run(broker: Arc<Broker>) {
    if broker.config.store.broker_role == BrokerRole::Slave {
        return;
    }
    let interval = Duration::from_millis(broker.config.broker.transaction_check_interval.max(1));
    loop {
        tokio::select! {
            _ = broker.shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let stats = check_round(&broker, crate::now_ms()).await;
        if stats.checked + stats.discarded > 0 {
            tracing::info!(?stats, "transaction check round");
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RoundStats {
    pub checked: u64,
    pub discarded: u64,
    pub decided_skipped: u64,
    pub outstanding: u64,
}

/// One pass over the half queue (`TransactionalMessageServiceImpl.check`).
pub async fn check_round(broker: &Broker, round_start_ms: i64) -> RoundStats {
    let started = Instant::now();
    let mut stats = RoundStats::default();
    let store = &broker.store;
    let half_max = store.max_offset_in_queue(HALF_TOPIC, QUEUE_ID);
    if half_max.0 == 0 {
        broker.metrics.transactions.half_outstanding.set(0);
        return stats;
    }
    let half_start = progress(broker, HALF_TOPIC);
    let op_start = progress(broker, OP_TOPIC);
    let mut ops = OpState::default();
    for (op_offset, half_offset) in bridge::read_ops(broker, op_start, MAX_OPS_PER_ROUND) {
        ops.record(op_offset, half_offset, half_start);
    }

    let b = &broker.config.broker;
    let timeout_ms = i64::try_from(b.transaction_time_out).unwrap_or(i64::MAX);
    let reserved_ms = i64::try_from(broker.config.store.file_reserved_time)
        .unwrap_or(i64::MAX)
        .saturating_mul(3_600_000);
    let mut next = half_start;
    while next < half_max && started.elapsed() < MAX_ROUND_TIME {
        let i = next;
        if ops.take(i) {
            next = QueueOffset(i.0 + 1);
            continue;
        }
        let Some(record) = bridge::read_half(broker, i) else {
            // Removed by retention or a hole: nothing to check there.
            next = QueueOffset(i.0 + 1);
            continue;
        };
        let v = record.view();
        let props = v.properties().to_owned();
        if v.store_timestamp() >= round_start_ms {
            // Appended during this round (our own copies among them).
            break;
        }
        let age = crate::now_ms() - v.born_timestamp();
        if let Some(original) = half::prepared_queue_offset(&props)
            && ops.take(original)
        {
            // An immunity copy whose original offset has been decided.
            next = QueueOffset(i.0 + 1);
            continue;
        }
        let check_props = match half::next_check(&props, b.transaction_check_max) {
            CheckCount::Discard => {
                if !discard(broker, &record).await {
                    break;
                }
                stats.discarded += 1;
                next = QueueOffset(i.0 + 1);
                continue;
            }
            CheckCount::Again(p) => p,
        };
        if age > reserved_ms {
            // Older than the CommitLog keeps files (`needSkip`).
            next = QueueOffset(i.0 + 1);
            continue;
        }
        let immunity = half::immunity_ms(&props, timeout_ms);
        if (0..immunity).contains(&age) {
            if half::has_own_immunity(&props) && half::prepared_queue_offset(&props).is_none() {
                // `checkPrepareQueueOffset`: move the long-immune message behind so
                // younger ones can be checked meanwhile.
                let copy = half::immunity_copy_properties(&props, i);
                if !bridge::stored(&bridge::put_back(broker, &record, copy).await) {
                    break;
                }
                next = QueueOffset(i.0 + 1);
                continue;
            }
            break;
        }
        if already_decided(broker, &props) {
            stats.decided_skipped += 1;
            next = QueueOffset(i.0 + 1);
            continue;
        }
        let put = bridge::put_back(broker, &record, check_props).await;
        let Some(appended) = put.appended.as_ref().filter(|_| bridge::stored(&put)) else {
            tracing::warn!(status = ?put.status, half_offset = %i, "re-appending a half message failed");
            break;
        };
        match bridge::read_at(broker, appended.wrote_offset) {
            Some(copy) => send_check(broker, &copy),
            None => {
                tracing::warn!(offset = %appended.wrote_offset, "re-appended half message not readable")
            }
        }
        stats.checked += 1;
        next = QueueOffset(i.0 + 1);
    }
    ops.passed(next);
    let op_next = ops.op_progress(op_start);
    broker
        .offsets
        .commit(CHECK_GROUP, HALF_TOPIC, QUEUE_ID, ConsumerOffset(next.0));
    broker
        .offsets
        .commit(CHECK_GROUP, OP_TOPIC, QUEUE_ID, ConsumerOffset(op_next.0));
    let waiting = (half_max.0 - next.0).max(0) as u64;
    stats.outstanding = waiting.saturating_sub(ops.pending() as u64);
    broker
        .metrics
        .transactions
        .half_outstanding
        .set(i64::try_from(stats.outstanding).unwrap_or(i64::MAX));
    stats
}

/// The checker's saved offset in `topic`, clamped into the queue's stored range.
fn progress(broker: &Broker, topic: &str) -> QueueOffset {
    let min = broker.store.min_offset_in_queue(topic, QUEUE_ID);
    let max = broker.store.max_offset_in_queue(topic, QUEUE_ID);
    let saved = broker
        .offsets
        .query(CHECK_GROUP, topic, QUEUE_ID)
        .map_or(min, |o| QueueOffset(o.0));
    saved.clamp(min, max.max(min))
}

/// A transaction decided since the message was copied (its `UNIQ_KEY` decided in memory,
/// or a copy whose commit is already in the real topic) needs no check-back.
fn already_decided(broker: &Broker, props: &str) -> bool {
    let Some(key) = half::uniq_key(props) else {
        return false;
    };
    if broker.transactions.resolved.get(key).is_some() {
        return true;
    }
    half::is_copy(props)
        && half::real_destination(props)
            .is_some_and(|(topic, _)| bridge::committed_in_index(broker, &topic, key))
}

async fn discard(broker: &Broker, record: &StoredRecord) -> bool {
    let r = bridge::put_discarded(broker, record).await;
    if !bridge::stored(&r) {
        tracing::warn!(status = ?r.status, "moving a half message to TRANS_CHECK_MAX_TIME_TOPIC failed");
        return false;
    }
    let m = &broker.metrics.transactions;
    m.discarded.inc();
    m.decided();
    tracing::info!(
        uniq_key = half::uniq_key(record.view().properties()).unwrap_or(""),
        "half message checked transactionCheckMax times; moved to TRANS_CHECK_MAX_TIME_TOPIC"
    );
    true
}

/// `sendCheckMessage` + `Broker2Client.checkProducerTransactionState`: the header names
/// the re-appended copy; the body is the copy in store layout with the real topic and
/// queue id. Without a live producer connection nothing is sent (the copy is checked
/// again next time).
pub fn send_check(broker: &Broker, copy: &StoredRecord) {
    let v = copy.view();
    let props = v.properties();
    let Some(group) = half::producer_group(props) else {
        tracing::warn!("half message without PGROUP; no producer to check");
        return;
    };
    let Some(channel) = broker.clients.producer_channel(group) else {
        tracing::warn!(
            group,
            "no live producer connection of the group; check-back skipped"
        );
        return;
    };
    let Some(body) = check_body(copy) else {
        tracing::warn!(
            group,
            "half message cannot be re-encoded for the check-back"
        );
        return;
    };
    let uniq = half::uniq_key(props).map(str::to_owned);
    let header = CheckTransactionStateRequestHeader {
        tran_state_table_offset: v.queue_offset(),
        commit_log_offset: v.physical_offset(),
        msg_id: uniq.clone(),
        transaction_id: uniq,
        offset_msg_id: Some(offset_msg_id(v.store_host(), v.physical_offset())),
        bname: Some(broker.config.broker.broker_name.clone()),
    };
    let mut cmd = RemotingCommand::request(rq::CHECK_TRANSACTION_STATE, &header).with_body(body);
    cmd.mark_oneway();
    if channel.outbound.try_send(cmd).is_err() {
        tracing::debug!(peer = %channel.peer, group, "check-back dropped: connection busy or closed");
        return;
    }
    broker.metrics.transactions.check_backs.inc();
}

/// The copy re-encoded with `REAL_TOPIC` / `REAL_QID` as topic and queue
/// (`msgExt.setTopic(realTopic)` before `MessageDecoder.encode`).
fn check_body(copy: &StoredRecord) -> Option<Vec<u8>> {
    let v = copy.view();
    let (topic, queue_id) = half::real_destination(v.properties())?;
    let mut record = v.to_message_record();
    record.topic = &topic;
    record.queue_id = queue_id;
    record.encode_to_vec(&v.store_stamp()).ok()
}
