//! What the broker needs from the message store, in the broker's terms
//! (`MessageStore` of RocketMQ). The production implementation adapts `store`'s
//! `MessageStore` (see `store_adapter`); handlers only see this trait, which keeps them
//! independent of the store's internal types.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use protocol::message::{PhysicalOffset, QueueOffset};

use crate::services::filter::MessageFilter;
use crate::services::put_path::PutPermit;

/// One message to append (`MessageExtBrokerInner`). Properties are final: the broker
/// has already removed `WAIT` and added `CLUSTER`.
#[derive(Debug, Clone)]
pub struct PutMessage {
    pub topic: String,
    pub queue_id: i32,
    pub flag: i32,
    pub body: Bytes,
    pub properties: String,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    /// Wait for the configured durability (flush) before reporting.
    pub wait_store_ok: bool,
}

/// A batch body (reference §9.2) to append as one record per inner message
/// (`MessageExtBatch`). `properties` are the batch-level ones appended to every inner
/// message.
#[derive(Debug, Clone)]
pub struct PutBatch {
    pub topic: String,
    pub queue_id: i32,
    pub body: Bytes,
    pub properties: String,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub wait_store_ok: bool,
}

/// `PutMessageStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutStatus {
    PutOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
    ServiceNotAvailable,
    CreateMappedFileFailed,
    MessageIllegal,
    PropertiesSizeExceeded,
    OsPageCacheBusy,
    UnknownError,
}

impl PutStatus {
    /// True when the record is in the CommitLog and only durability or replication
    /// lagged (`sendFinalMessage` and the schedule service treat these as stored).
    pub fn is_stored(self) -> bool {
        matches!(
            self,
            Self::PutOk
                | Self::FlushDiskTimeout
                | Self::FlushSlaveTimeout
                | Self::SlaveNotAvailable
        )
    }

    /// True when the store refused this record for what it is (a field over a limit,
    /// an illegal topic or body): the same record is refused again however often it is
    /// retried. Every other failure is about the store's state at that moment (a slave
    /// or fenced master, the page cache busy, a file that could not be created, a failed
    /// write) and may pass later, so a background service retries rather than skips it.
    pub fn refuses_the_record(self) -> bool {
        matches!(self, Self::MessageIllegal | Self::PropertiesSizeExceeded)
    }
}

/// Where the (first) message landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// Offset message ids of every stored record, in order.
    pub msg_ids: Vec<String>,
    pub queue_offset: QueueOffset,
    pub wrote_offset: PhysicalOffset,
    pub wrote_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutResult {
    pub status: PutStatus,
    pub appended: Option<Appended>,
}

/// `GetMessageStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

#[derive(Debug, Clone)]
pub struct GetResult {
    pub status: GetStatus,
    pub next_begin_offset: QueueOffset,
    pub min_offset: QueueOffset,
    pub max_offset: QueueOffset,
    /// Each element is one whole stored record, a view of the mapped file.
    pub messages: Vec<Bytes>,
    /// The consumer is far enough behind that its data is no longer in memory.
    pub suggest_pull_from_slave: bool,
}

#[derive(Debug, Clone, Default)]
pub struct QueryResult {
    pub messages: Vec<Bytes>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phyoffset: PhysicalOffset,
}

/// One ConsumeQueue unit (`CqUnit`) and its logical offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueUnit {
    pub offset: QueueOffset,
    pub physical_offset: PhysicalOffset,
    pub size: i32,
    /// Tag hash, or the deliver time for `SCHEDULE_TOPIC_XXXX`.
    pub tags_code: i64,
}

/// Called by the store's dispatcher for every message it indexes into a ConsumeQueue:
/// `(topic, queue id, its queue offset, tags code, properties text)`. Drives long polling.
pub type ArrivalListener = Arc<dyn Fn(&str, i32, QueueOffset, i64, &str) + Send + Sync>;

/// The put methods take a [`PutPermit`], which only `crate::services::put_path` makes: every put
/// goes through `Broker::put` and its fence, flush and replica rules.
pub trait MessageStoreApi: Send + Sync + 'static {
    fn put_message(&self, msg: PutMessage, permit: PutPermit) -> BoxFuture<'static, PutResult>;
    fn put_batch(&self, batch: PutBatch, permit: PutPermit) -> BoxFuture<'static, PutResult>;
    /// Like [`Self::put_message`] with the record's `preparedTransactionOffset` set: the
    /// committed copy of a transaction's half message points at the half's CommitLog
    /// offset (`EndTransactionProcessor`).
    fn put_transaction_end(
        &self,
        msg: PutMessage,
        prepared: PhysicalOffset,
        permit: PutPermit,
    ) -> BoxFuture<'static, PutResult>;
    /// Reads up to `max_msgs` messages of the queue from `offset` that pass `filter`.
    fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_msgs: i32,
        filter: &MessageFilter,
    ) -> GetResult;
    /// Next offset to be written in the queue (0 when it does not exist).
    fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset;
    /// Whether a pull at `offset` would find a unit it may serve now: one exists and is
    /// within the replication visibility limit (confirm offset) when that is on.
    fn has_visible_message(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> bool;
    fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset;
    fn offset_in_queue_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> QueueOffset;
    /// Deletes the topic's ConsumeQueues and queue offsets (`cleanUnusedTopic` for one
    /// topic); its records stay in the CommitLog until retention. Returns the queues deleted.
    fn delete_topic(&self, topic: &str) -> Result<usize, store::StoreError>;
    /// Store time of the message at `offset` of the queue.
    fn message_store_time(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> Option<i64>;
    /// Store time of the queue's first message.
    fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64>;
    /// True when the message at `offset` is no longer in the hot (memory) window.
    fn check_in_disk_by_consume_offset(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> bool;
    fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
    ) -> QueryResult;
    /// Up to `max` units of the queue from `from`, in order; empty when none is written
    /// there (yet). Stops at the end of a ConsumeQueue file: ask again from the next offset.
    fn queue_units(
        &self,
        topic: &str,
        queue_id: i32,
        from: QueueOffset,
        max: usize,
    ) -> Vec<QueueUnit>;
    /// The whole record stored at `offset`.
    fn view_message(&self, offset: PhysicalOffset) -> Option<Bytes>;
    fn dispatch_behind_bytes(&self) -> u64;
    /// CommitLog bytes written but not yet flushed to disk.
    fn flush_behind_bytes(&self) -> u64;
    /// Why the store refuses writes: until a restart after a failed CommitLog write or
    /// flush, or while dispatch cannot index a record. The broker is then not ready.
    fn out_of_service(&self) -> Option<String> {
        None
    }
    fn min_phy_offset(&self) -> PhysicalOffset;
    fn max_phy_offset(&self) -> PhysicalOffset;
    fn set_arrival_listener(&self, listener: ArrivalListener);
    /// Flushes and stops the store's services; removes the abort file on success.
    fn shutdown(&self);
    /// The file system the broker's config files under the store root are written
    /// through (the store's own, so a test's injected faults reach both).
    fn config_fs(&self) -> Arc<dyn store::fs::StoreFs> {
        Arc::new(store::fs::OsFs)
    }
}
