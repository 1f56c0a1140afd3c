//! The one door into the store: what a broker asks of a message store (RocketMQ 4.9's
//! `MessageStore` interface), in the store's own types. The broker's handlers, services
//! and read path hold a `dyn MessageStoreApi`; replication holds the narrower
//! [`crate::replication::ReplicaStore`]. [`MessageStore`](crate::MessageStore) is the
//! implementation on files, [`crate::mem::MemStore`] the in-memory one for unit tests.
//!
//! The put methods take a `Permit` of the caller's choosing that the store never looks
//! at: a caller that wants every put to pass its own admission rules (the broker's fence,
//! flush and replica rules) names a permit type only those rules can make, and a put site
//! that skips them does not compile.

mod disk;

use std::sync::Arc;

use bytes::Bytes;
use protocol::message::{PhysicalOffset, QueueOffset};

use crate::commitlog::{BatchMessage, BrokerMessage};
use crate::dispatch::MessageArrivalListener;
use crate::error::StoreError;
use crate::fs::StoreFs;
use crate::lookup::{GetMessageResult, MessageFilter, QueryMessageResult};
use crate::message_store::PutMessageFuture;

/// One ConsumeQueue unit (`CqUnit`) and its queue offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueUnit {
    pub offset: QueueOffset,
    pub physical_offset: PhysicalOffset,
    /// The record's TOTALSIZE.
    pub size: i32,
    /// Tag hash, or the deliver time for `SCHEDULE_TOPIC_XXXX`.
    pub tags_code: i64,
}

/// What the broker needs from a message store. Records come back whole, in the
/// CommitLog layout, as zero-copy views where the store has them mapped.
pub trait MessageStoreApi<Permit = ()>: Send + Sync {
    /// Stores one message (`asyncPutMessage`). The future resolves at once unless the
    /// message waits for the configured flush (`wait_store_msg_ok` under SYNC_FLUSH).
    fn put_message(&self, msg: &BrokerMessage, permit: Permit) -> PutMessageFuture;
    /// Stores a batch (`asyncPutMessages`): consecutive queue offsets, one file.
    fn put_messages(&self, batch: &BatchMessage, permit: Permit) -> PutMessageFuture;
    /// Reads up to `max_count` messages of the queue from `offset` that pass `filter`
    /// (`getMessage`).
    fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_count: usize,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult;
    /// Next offset to be written in the queue (0 when it does not exist).
    fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset;
    /// First offset still held in the queue (0 when it does not exist).
    fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset;
    /// Whether a pull at `offset` would find a unit it may serve now: one exists and is
    /// within the replication visibility limit (confirm offset) when that is on.
    fn has_visible_message(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> bool;
    /// `getOffsetInQueueByTime`.
    fn offset_in_queue_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> QueueOffset;
    /// Store time of the message at `offset` of the queue (`getMessageStoreTimeStamp`).
    fn message_store_time(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> Option<i64>;
    /// Store time of the queue's first message (`getEarliestMessageTime`).
    fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64>;
    /// `checkInDiskByConsumeOffset`: the message at `offset` is no longer in the hot
    /// (memory) window; false when there is no unit at `offset` yet.
    fn check_in_disk_by_consume_offset(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> bool;
    /// Messages of `topic` carrying `key` stored within `[begin, end]` (`queryMessage`).
    fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryMessageResult;
    /// Up to `max` units of the queue from `from`, in order; empty when none is written
    /// there (yet). Stops at the end of a ConsumeQueue file: ask again from the next offset.
    fn queue_units(
        &self,
        topic: &str,
        queue_id: i32,
        from: QueueOffset,
        max: usize,
    ) -> Vec<QueueUnit>;
    /// The whole record stored at `offset` (`lookMessageByOffset`).
    fn view_message(&self, offset: PhysicalOffset) -> Option<Bytes>;
    /// Deletes the topic's ConsumeQueues and queue offsets (`cleanUnusedTopic` for one
    /// topic); its records stay in the CommitLog until retention. Returns the queues deleted.
    fn delete_topic(&self, topic: &str) -> Result<usize, StoreError>;
    /// CommitLog bytes not yet indexed into ConsumeQueues (`dispatchBehindBytes`).
    fn dispatch_behind_bytes(&self) -> u64;
    /// CommitLog bytes written but not yet flushed to disk.
    fn flush_behind_bytes(&self) -> u64;
    /// Why the store refuses writes: until a restart after a failed CommitLog write or
    /// flush, or while dispatch cannot index a record. The broker is then not ready.
    fn out_of_service(&self) -> Option<String>;
    fn min_phy_offset(&self) -> PhysicalOffset;
    fn max_phy_offset(&self) -> PhysicalOffset;
    /// Called for every message dispatched into a ConsumeQueue (long polling).
    fn set_arrival_listener(&self, listener: Arc<dyn MessageArrivalListener>);
    /// Flushes and stops the store's services; removes the abort file on success.
    /// Idempotent.
    fn shutdown(&self) -> Result<(), StoreError>;
    /// The file system the broker's config files under the store root are written
    /// through (the store's own, so a test's injected faults reach both).
    fn config_fs(&self) -> Arc<dyn StoreFs>;
}
