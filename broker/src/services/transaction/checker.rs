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
//! checked `transactionCheckMax` times is moved to `TRANS_CHECK_MAX_TIME_TOPIC`. A
//! message with its own `CHECK_IMMUNITY_TIME_IN_SECONDS` that is still immune is
//! re-appended as an immunity copy naming its original offset
//! (`TRAN_PREPARED_QUEUE_OFFSET`), and so is that copy at every round until the immunity
//! ends or the original is decided (`checkPrepareQueueOffset` /
//! `putImmunityMsgBackToHalfQueue`), so it never holds up the halves behind it.
//!
//! # What stops a round, and what is passed over
//!
//! A round ends early only where the halves behind cannot be due either (the first one
//! younger than `transactionTimeOut`, or one appended during the round) or where the
//! store itself cannot take a put now (not writable, page cache busy, a slave, a file it
//! could not create: [`PutMessageStatus::refuses_the_record`] is false). Then the next round
//! starts at the same offset: passing the half would leave it unchecked for ever.
//!
//! A half the checker can never process is passed over, counted in
//! `rocketmq_broker_transaction_check_skipped_total{reason}` and logged (rate-limited,
//! `crate::metrics::skips`), and the walk goes on:
//!
//! * `corrupt`: the unit points at bytes that are not a record; nothing to check or move.
//! * `reappend_refused`: the store refuses every copy of the half for what it is (its
//!   properties within a few bytes of the 32,767-byte limit, so adding
//!   `TRANSACTION_CHECK_TIMES` or `TRAN_PREPARED_QUEUE_OFFSET` overflows it; a body
//!   over a since-lowered `maxMessageSize`). The checker could never come back to it, as
//!   its only way back is a copy at the tail; RocketMQ 4.9 retries the put until the
//!   round's time limit and so stops there every round. Here it gets what 4.9 gives a
//!   half after its last check (`needDiscard` → `resolveDiscardMsg`): one check-back
//!   naming the original record (its half queue and CommitLog offsets; none while it
//!   is still immune, as its producer asked), and a copy in `TRANS_CHECK_MAX_TIME_TOPIC`
//!   (same properties, so it fits) where operators find given-up halves. The original
//!   stays where it is, so the producer's answer to that check-back, or its own late
//!   END_TRANSACTION, still commits or rolls it back (END_TRANSACTION reads the half at
//!   its CommitLog offset) until retention removes its file.
//! * `discard_refused`: a half past `transactionCheckMax` whose copy the store refuses
//!   for `TRANS_CHECK_MAX_TIME_TOPIC` too; it stays at its offset, where END_TRANSACTION
//!   still decides it.
//!
//! A failed move to `TRANS_CHECK_MAX_TIME_TOPIC` for a store-side reason stops the round
//! like any other (4.9 logs it and moves on, losing the half from both places).

use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::RemotingCommand;
use protocol::code::request as rq;
use protocol::header::CheckTransactionStateRequestHeader;
use protocol::message::{ConsumerOffset, PhysicalOffset, QueueOffset, offset_msg_id};

use super::bridge::{self, HalfAt, PutOutcome, StoredRecord};
use super::half::{self, CheckCount};
use super::op_queue::OpState;
use super::{CHECK_GROUP, HALF_TOPIC, OP_TOPIC, QUEUE_ID};
use crate::services::Broker;
use crate::services::clients::{Channel, ClientInfo};
use security::acl::{Perm, Requirement, Resource};
use store::PutMessageStatus;

/// A round stops after this long and continues in the next (`MAX_PROCESS_TIME_LIMIT`).
const MAX_ROUND_TIME: Duration = Duration::from_secs(60);
/// Op records read per round at most; the rest are read in later rounds.
const MAX_OPS_PER_ROUND: usize = 1_000_000;

/// Runs rounds until shutdown. A slave never checks (RocketMQ starts the service on
/// masters only).
pub async fn run(broker: Arc<Broker>) {
    let interval = Duration::from_millis(broker.config.broker.transaction_check_interval.max(1));
    loop {
        tokio::select! {
            _ = broker.shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        // Only a master checks (a slave's halves arrive by replication and its master
        // decides them); a slave promoted at runtime starts here.
        if !broker.until_master().await {
            return;
        }
        let stats = check_round(&broker, crate::now_ms()).await;
        broker.metrics.transactions.check_rounds.inc();
        if stats.checked + stats.discarded + stats.skipped > 0 {
            tracing::info!(?stats, "transaction check round");
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RoundStats {
    pub checked: u64,
    pub discarded: u64,
    pub decided_skipped: u64,
    /// Halves the checker could not process and passed over (see the module docs).
    pub skipped: u64,
    pub outstanding: u64,
}

/// Why a half was passed over: the `reason` label of the skip counter.
#[derive(Debug, Clone, Copy)]
enum Skip {
    Corrupt,
    ReappendRefused,
    DiscardRefused,
}

impl Skip {
    fn label(self) -> &'static str {
        match self {
            Self::Corrupt => "corrupt",
            Self::ReappendRefused => "reappend_refused",
            Self::DiscardRefused => "discard_refused",
        }
    }
}

/// Where the walk goes after one half queue offset.
enum Step {
    Next,
    /// End the round here; the next one starts at this offset.
    Stop,
}

/// One pass over the half queue (`TransactionalMessageServiceImpl.check`).
pub async fn check_round(broker: &Broker, round_start_ms: i64) -> RoundStats {
    // Decisions made before a restart are known before any half is checked.
    super::recovery::ensure(broker).await;
    let started = Instant::now();
    let store = &broker.store;
    let half_max = store.max_offset_in_queue(HALF_TOPIC, QUEUE_ID);
    if half_max.0 == 0 {
        broker.metrics.transactions.half_outstanding.set(0);
        return RoundStats::default();
    }
    let half_start = progress(broker, HALF_TOPIC);
    let op_start = progress(broker, OP_TOPIC);
    let mut ops = OpState::default();
    for op in bridge::read_ops(broker, op_start, MAX_OPS_PER_ROUND) {
        ops.record(op.offset, op.half, half_start);
    }

    let b = &broker.config.broker;
    let mut round = Round {
        broker,
        start_ms: round_start_ms,
        timeout_ms: i64::try_from(b.transaction_time_out).unwrap_or(i64::MAX),
        reserved_ms: i64::try_from(broker.config.store.file_reserved_time)
            .unwrap_or(i64::MAX)
            .saturating_mul(3_600_000),
        check_max: b.transaction_check_max,
        ops,
        stats: RoundStats::default(),
    };
    let mut next = half_start;
    while next < half_max && started.elapsed() < MAX_ROUND_TIME {
        let step = if round.ops.take(next) {
            Step::Next
        } else {
            match bridge::read_half(broker, next) {
                HalfAt::Record(record) => round.visit(next, &record).await,
                HalfAt::Gone => Step::Next,
                HalfAt::Corrupt => {
                    round.skip(
                        Skip::Corrupt,
                        format_args!("half queue offset {next} holds no valid record"),
                    );
                    Step::Next
                }
            }
        };
        match step {
            Step::Next => next = QueueOffset(next.0 + 1),
            Step::Stop => break,
        }
    }
    let Round {
        mut ops, mut stats, ..
    } = round;
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

/// One round's settings and bookkeeping.
struct Round<'a> {
    broker: &'a Broker,
    start_ms: i64,
    timeout_ms: i64,
    reserved_ms: i64,
    check_max: i32,
    ops: OpState,
    stats: RoundStats,
}

impl Round<'_> {
    /// Decides about the undecided half `record` at offset `i`.
    async fn visit(&mut self, i: QueueOffset, record: &StoredRecord) -> Step {
        let broker = self.broker;
        let v = record.view();
        let props = v.properties();
        if v.store_timestamp() >= self.start_ms {
            // Appended during this round (our own copies among them).
            return Step::Stop;
        }
        let age = crate::now_ms() - v.born_timestamp();
        if let Some(original) = half::prepared_queue_offset(props)
            && self.ops.take(original)
        {
            // An immunity copy whose original offset has been decided.
            return Step::Next;
        }
        let check_props = match half::next_check(props, self.check_max) {
            CheckCount::Discard => return self.discard(i, record).await,
            CheckCount::Again(p) => p,
        };
        if age > self.reserved_ms {
            // Older than the CommitLog keeps files (`needSkip`).
            return Step::Next;
        }
        if (0..half::immunity_ms(props, self.timeout_ms)).contains(&age) {
            if !half::has_own_immunity(props) {
                // Not due yet, and the halves behind it are younger still.
                return Step::Stop;
            }
            // `checkPrepareQueueOffset`: move the long-immune message (or its immunity
            // copy, which keeps naming the original offset) behind, so younger ones are
            // checked meanwhile.
            let original = half::prepared_queue_offset(props).unwrap_or(i);
            let copy = half::immunity_copy_properties(props, original);
            return match bridge::outcome(bridge::put_back(broker, record, copy).await) {
                PutOutcome::Stored(_) => Step::Next,
                PutOutcome::Unavailable(status) => {
                    tracing::warn!(?status, half_offset = %i, "moving an immune half message behind failed; retried next round");
                    Step::Stop
                }
                PutOutcome::Refused(status) => {
                    self.never_reappendable(i, record, status, false).await
                }
            };
        }
        if already_decided(broker, props, v.physical_offset()) {
            self.stats.decided_skipped += 1;
            return Step::Next;
        }
        match bridge::outcome(bridge::put_back(broker, record, check_props).await) {
            PutOutcome::Stored(appended) => {
                match bridge::read_at(broker, appended.wrote_offset) {
                    Some(copy) => send_check(broker, &copy),
                    None => {
                        tracing::warn!(offset = %appended.wrote_offset, "re-appended half message not readable")
                    }
                }
                self.stats.checked += 1;
                Step::Next
            }
            PutOutcome::Unavailable(status) => {
                tracing::warn!(?status, half_offset = %i, "re-appending a half message failed; retried next round");
                Step::Stop
            }
            PutOutcome::Refused(status) => self.never_reappendable(i, record, status, true).await,
        }
    }

    /// `needDiscard` → `resolveDiscardMsg`: the half goes to `TRANS_CHECK_MAX_TIME_TOPIC`.
    async fn discard(&mut self, i: QueueOffset, record: &StoredRecord) -> Step {
        let uniq = half::uniq_key(record.view().properties()).unwrap_or("");
        match bridge::outcome(bridge::put_discarded(self.broker, record).await) {
            PutOutcome::Stored(_) => {
                let m = &self.broker.metrics.transactions;
                m.discarded.inc();
                m.decided();
                self.stats.discarded += 1;
                tracing::info!(
                    uniq_key = uniq,
                    "half message checked transactionCheckMax times; moved to TRANS_CHECK_MAX_TIME_TOPIC"
                );
                Step::Next
            }
            PutOutcome::Unavailable(status) => {
                tracing::warn!(?status, half_offset = %i, "moving a half message to TRANS_CHECK_MAX_TIME_TOPIC failed; retried next round");
                Step::Stop
            }
            PutOutcome::Refused(status) => {
                self.skip(
                    Skip::DiscardRefused,
                    format_args!(
                        "half message at offset {i} (UNIQ_KEY {uniq}) checked transactionCheckMax times; \
                         the store refuses its copy for TRANS_CHECK_MAX_TIME_TOPIC ({status:?}), so it stays \
                         where it is (END_TRANSACTION still decides it)"
                    ),
                );
                Step::Next
            }
        }
    }

    /// A half whose copies the store refuses for what it is (see the module docs):
    /// checked once from its original offset unless still `immune`, and moved to
    /// `TRANS_CHECK_MAX_TIME_TOPIC`.
    async fn never_reappendable(
        &mut self,
        i: QueueOffset,
        record: &StoredRecord,
        refused: PutMessageStatus,
        check: bool,
    ) -> Step {
        let broker = self.broker;
        let moved = match bridge::outcome(bridge::put_discarded(broker, record).await) {
            PutOutcome::Stored(_) => true,
            PutOutcome::Unavailable(status) => {
                tracing::warn!(?status, half_offset = %i, "moving a half message to TRANS_CHECK_MAX_TIME_TOPIC failed; retried next round");
                return Step::Stop;
            }
            PutOutcome::Refused(_) => false,
        };
        if check {
            // The original names itself: an answer decides it at its own offset.
            send_check(broker, record);
        }
        let uniq = half::uniq_key(record.view().properties()).unwrap_or("");
        let checked = if check {
            "checked once from its original offset"
        } else {
            "not checked (still immune)"
        };
        let placed = if moved {
            "copied to TRANS_CHECK_MAX_TIME_TOPIC"
        } else {
            "refused for TRANS_CHECK_MAX_TIME_TOPIC too, so only its original remains"
        };
        self.skip(
            Skip::ReappendRefused,
            format_args!(
                "half message at offset {i} (UNIQ_KEY {uniq}) cannot be re-appended ({refused:?}); \
                 {checked}, {placed}; END_TRANSACTION for its original offset still decides it"
            ),
        );
        Step::Next
    }

    fn skip(&mut self, reason: Skip, what: std::fmt::Arguments<'_>) {
        self.stats.skipped += 1;
        self.broker
            .metrics
            .skips
            .transaction_check
            .record(reason.label(), what);
    }
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

/// A transaction decided since the message was copied (its identity decided in memory,
/// or a copy whose commit is already in the real topic) needs no check-back. Another
/// transaction's decision never counts, whatever keys the two carry.
fn already_decided(broker: &Broker, props: &str, own: PhysicalOffset) -> bool {
    let Some(id) = half::transaction_id(props, own) else {
        return false;
    };
    if broker.transactions.is_decided(id) {
        return true;
    }
    half::is_copy(props)
        && half::real_destination(props)
            .zip(half::uniq_key(props))
            .is_some_and(|((topic, _), key)| bridge::committed_in_index(broker, id, &topic, key))
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
    // The body is the pending half: with the ACL on, only a connection whose account
    // may publish to the half's real topic is asked (a producer group is a name any
    // account may heartbeat under; 4.9 asks whichever connection registered it).
    let real_topic = half::real_destination(props).map(|(topic, _)| topic);
    let acl = broker.acl.as_ref().map(|acl| acl.table());
    let allowed = |channel: &Channel, info: &ClientInfo| {
        let Some(table) = &acl else {
            return true;
        };
        let Some(topic) = real_topic.as_deref() else {
            return false;
        };
        table.permits(
            Some(channel.peer.ip()),
            info.access_key.as_deref(),
            &Requirement::Resources(vec![(Resource::Topic(topic), Perm::PUB)]),
        )
    };
    let Some(channel) = broker.clients.producer_channel(group, allowed) else {
        tracing::warn!(
            group,
            "no live producer connection of the group allowed to publish to its topic; check-back skipped"
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
