//! The transaction code's access to the store (`TransactionalMessageBridge`): reading
//! half and op records, and appending op records, committed copies, re-appended half
//! messages and discarded ones.

use bytes::Bytes;
use protocol::RemotingCommand;
use protocol::header::EndTransactionRequestHeader;
use protocol::message::{
    MessageSysFlag, PhysicalOffset, QueueOffset, RecordView, TransactionType, decode,
};

use super::decisions::TransactionId;
use super::{HALF_TOPIC, OP_TOPIC, QUEUE_ID, half};
use crate::names::perm;
use crate::services::Broker;
use crate::services::filter::MessageFilter;
use crate::services::put_path::Put;
use store::commitlog::BrokerMessage;
use store::lookup::GetMessageStatus;
use store::{AppendMessageResult, PutMessageResult, PutMessageStatus};

/// Op records read per store call (RocketMQ pulls 32 at a time).
const OP_BATCH: usize = 32;
/// Records with the half's `UNIQ_KEY` looked at for its committed copy. Many more
/// records under one key (reused by a client on purpose) may hide it: the commit is then
/// stored again, never lost.
const COMMITTED_LOOKUP_MAX: usize = 64;

/// One whole stored record and a validated view of it.
pub struct StoredRecord {
    pub bytes: Bytes,
}

impl StoredRecord {
    /// `None` when the bytes are not a valid record.
    pub fn new(bytes: Bytes) -> Option<Self> {
        decode(&bytes, false).ok()?;
        Some(Self { bytes })
    }

    pub fn view(&self) -> RecordView<'_> {
        // Validated in `new`; a record that decoded once decodes again.
        match decode(&self.bytes, false) {
            Ok(v) => v,
            Err(_) => unreachable!("record validated at construction"),
        }
    }

    pub fn body(&self) -> Bytes {
        self.bytes.slice_ref(self.view().body())
    }
}

/// Makes sure the transaction system topics exist in the topic table, as RocketMQ
/// creates them on first use (one queue, read + write).
pub fn ensure_topic(broker: &Broker, topic: &str) {
    broker
        .topics
        .get_or_create_system(topic, 1, perm::READ | perm::WRITE, 0);
}

/// What one offset of the half queue holds.
pub enum HalfAt {
    Record(StoredRecord),
    /// Nothing: removed by retention, a hole, or not there yet.
    Gone,
    /// Bytes that are not a valid record.
    Corrupt,
}

/// The record at `offset` of the half queue.
pub fn read_half(broker: &Broker, offset: QueueOffset) -> HalfAt {
    let r = broker
        .store
        .get_message(HALF_TOPIC, QUEUE_ID, offset, 1, Some(&MessageFilter::All));
    if r.status != GetMessageStatus::Found {
        return HalfAt::Gone;
    }
    match r.messages.into_iter().next() {
        None => HalfAt::Gone,
        Some(bytes) => StoredRecord::new(bytes).map_or(HalfAt::Corrupt, HalfAt::Record),
    }
}

/// The record stored at a CommitLog offset (`lookMessageByOffset`).
pub fn read_at(broker: &Broker, offset: PhysicalOffset) -> Option<StoredRecord> {
    broker
        .store
        .view_message(offset)
        .and_then(StoredRecord::new)
}

/// One op record: where it is, the half queue offset it marks (`None` for a body that
/// is not a number) and when it was stored.
#[derive(Debug, Clone, Copy)]
pub struct OpRecord {
    pub offset: QueueOffset,
    pub half: Option<QueueOffset>,
    pub store_timestamp: i64,
}

/// Op records from `from` on, at most `limit`.
pub fn read_ops(broker: &Broker, from: QueueOffset, limit: usize) -> Vec<OpRecord> {
    let mut out = Vec::new();
    let mut next = from;
    while out.len() < limit {
        let r = broker.store.get_message(
            OP_TOPIC,
            QUEUE_ID,
            next,
            OP_BATCH,
            Some(&MessageFilter::All),
        );
        if r.status != GetMessageStatus::Found || r.messages.is_empty() {
            break;
        }
        for bytes in &r.messages {
            if let Ok(view) = decode(bytes, false) {
                out.push(OpRecord {
                    offset: view.queue_offset(),
                    half: half::parse_op_body(view.body()),
                    store_timestamp: view.store_timestamp(),
                });
            }
        }
        if r.next_begin_offset <= next {
            break;
        }
        next = r.next_begin_offset;
    }
    out.truncate(limit);
    out
}

/// `putOpMessage`: marks `half_offset` decided.
pub async fn put_op(broker: &Broker, half_offset: QueueOffset) -> PutMessageResult {
    ensure_topic(broker, OP_TOPIC);
    let host = broker.store_host();
    broker
        .put(Put::Message(BrokerMessage {
            topic: OP_TOPIC.to_owned(),
            queue_id: QUEUE_ID,
            flag: 0,
            body: Bytes::from(half::op_body(half_offset)),
            properties: half::op_properties(),
            sys_flag: MessageSysFlag(0),
            born_timestamp: crate::now_ms(),
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: PhysicalOffset(0),
            wait_store_msg_ok: true,
        }))
        .await
}

/// A new record from a stored one: same body, flag, born time and host, reconsume
/// times; new topic, queue, properties and sysFlag.
pub fn derived(
    broker: &Broker,
    record: &StoredRecord,
    topic: &str,
    queue_id: i32,
    properties: String,
    sys_flag: MessageSysFlag,
) -> BrokerMessage {
    let v = record.view();
    BrokerMessage {
        topic: topic.to_owned(),
        queue_id,
        flag: v.flag(),
        body: record.body(),
        properties,
        sys_flag,
        born_timestamp: v.born_timestamp(),
        born_host: v.born_host(),
        store_host: broker.store_host(),
        reconsume_times: v.reconsume_times(),
        // Deviation from 4.9 (whose transaction bridge puts do not wait): the committed
        // copy, re-put halves and op records wait for flush and slave, so an op record
        // (which retires the half) is never written before what it decides is replicated.
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: true,
    }
}

/// `putBackHalfMsgQueue` / `putImmunityMsgBackToHalfQueue`: the half message again at
/// the end of the half queue, with `properties` and the original's CommitLog offset
/// (`TRAN_ORIGIN_OFFSET`), which every copy carries on.
pub async fn put_back(
    broker: &Broker,
    record: &StoredRecord,
    properties: String,
) -> PutMessageResult {
    let v = record.view();
    let (flag, properties) = (
        v.sys_flag(),
        half::with_origin(&properties, v.physical_offset()),
    );
    let msg = derived(broker, record, HALF_TOPIC, QUEUE_ID, properties, flag);
    broker.put(Put::Message(msg)).await
}

/// `DefaultTransactionalMessageCheckListener.resolveDiscardMsg`.
pub async fn put_discarded(broker: &Broker, record: &StoredRecord) -> PutMessageResult {
    ensure_topic(broker, super::CHECK_MAX_TOPIC);
    let v = record.view();
    let msg = derived(
        broker,
        record,
        super::CHECK_MAX_TOPIC,
        QUEUE_ID,
        v.properties().to_owned(),
        v.sys_flag(),
    );
    broker.put(Put::Message(msg)).await
}

/// True when the store kept the record (`sendFinalMessage` treats the flush and slave
/// timeouts as stored).
pub fn stored(r: &PutMessageResult) -> bool {
    r.status.is_stored() && r.append.is_some()
}

/// A put's result as the checker acts on it.
pub enum PutOutcome {
    Stored(AppendMessageResult),
    /// The store could not take anything now (see [`PutMessageStatus::refuses_the_record`]);
    /// the same put may pass later.
    Unavailable(PutMessageStatus),
    /// The store refuses this record for what it is; it never passes.
    Refused(PutMessageStatus),
}

pub fn outcome(r: PutMessageResult) -> PutOutcome {
    match r.append {
        Some(appended) if r.status.is_stored() => PutOutcome::Stored(appended),
        _ if r.status.refuses_the_record() => PutOutcome::Refused(r.status),
        _ => PutOutcome::Unavailable(r.status),
    }
}

/// True when the real topic already holds the committed copy of transaction `id` (an
/// earlier commit found through the index). The committed copy's
/// `preparedTransactionOffset` names the original half, so it identifies the
/// transaction; `uniq_key` (the client's, as the half carries it) only narrows the
/// index lookup, as the index knows no other key.
pub fn committed_in_index(
    broker: &Broker,
    id: TransactionId,
    real_topic: &str,
    uniq_key: &str,
) -> bool {
    let found = broker
        .store
        .query_message(real_topic, uniq_key, COMMITTED_LOOKUP_MAX, 0, i64::MAX);
    found.messages.iter().any(|bytes| {
        decode(bytes, false).is_ok_and(|v| {
            v.topic() == real_topic
                && v.prepared_transaction_offset() == id.origin
                && v.sys_flag().transaction_type() == TransactionType::Commit
                && half::producer_group(v.properties())
                    .is_some_and(|g| TransactionId::new(id.origin, g, real_topic) == id)
        })
    })
}

/// The real topic of the half message an END_TRANSACTION names, for the ACL check
/// (`crate::dispatch::acl`); `None` when the header or the half message does not check out (the
/// handler then answers the error).
pub fn half_real_topic(broker: &Broker, request: &RemotingCommand) -> Option<String> {
    let h: EndTransactionRequestHeader = request.header().ok()?;
    let record = verified_half(broker, &h).ok()?;
    half::real_destination(record.view().properties()).map(|(topic, _)| topic)
}

/// `checkPrepareMessage`: the half message an END_TRANSACTION header names, read at its
/// CommitLog offset and checked to be a half message of the request's producer group at
/// the request's half queue offset, or the remark of the failure.
pub fn verified_half(
    broker: &Broker,
    h: &EndTransactionRequestHeader,
) -> Result<StoredRecord, &'static str> {
    let record =
        read_at(broker, h.commit_log_offset).ok_or("Find prepared transaction message failed")?;
    let v = record.view();
    if v.topic() != HALF_TOPIC || v.queue_id() != QUEUE_ID {
        return Err("Find prepared transaction message failed");
    }
    if half::producer_group(v.properties()) != Some(h.producer_group.as_str()) {
        return Err("The producer group wrong");
    }
    if v.queue_offset() != h.tran_state_table_offset {
        return Err("The transaction state table offset wrong");
    }
    if v.physical_offset() != h.commit_log_offset {
        return Err("The commit log offset wrong");
    }
    Ok(record)
}
