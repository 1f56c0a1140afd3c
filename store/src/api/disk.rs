//! [`MessageStoreApi`] on the file-backed [`MessageStore`]: each method forwards to the
//! CommitLog, the dispatcher's ConsumeQueues and IndexFiles, or the read path.

use std::sync::Arc;

use bytes::Bytes;
use protocol::message::{PhysicalOffset, QueueOffset};

use super::{MessageStoreApi, QueueUnit};
use crate::commitlog::{BatchMessage, BrokerMessage};
use crate::dispatch::MessageArrivalListener;
use crate::error::StoreError;
use crate::fs::StoreFs;
use crate::lookup::{GetMessageResult, MessageFilter, QueryMessageResult};
use crate::message_store::{MessageStore, PutMessageFuture};

impl<Permit> MessageStoreApi<Permit> for MessageStore {
    fn put_message(&self, msg: &BrokerMessage, _: Permit) -> PutMessageFuture {
        MessageStore::put_message(self, msg)
    }

    fn put_messages(&self, batch: &BatchMessage, _: Permit) -> PutMessageFuture {
        MessageStore::put_messages(self, batch)
    }

    fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_count: usize,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult {
        self.dispatcher
            .get_message("", topic, queue_id, offset, max_count, filter)
    }

    fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.dispatcher
            .consume_queues()
            .find(topic, queue_id)
            .map_or(QueueOffset(0), |q| q.max_offset())
    }

    fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.dispatcher
            .consume_queues()
            .find(topic, queue_id)
            .map_or(QueueOffset(0), |q| q.min_offset())
    }

    fn has_visible_message(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> bool {
        self.dispatcher.is_visible(topic, queue_id, offset)
    }

    fn offset_in_queue_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> QueueOffset {
        self.dispatcher
            .offset_in_queue_by_time(topic, queue_id, timestamp)
    }

    fn message_store_time(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> Option<i64> {
        self.dispatcher
            .message_store_timestamp(topic, queue_id, offset)
    }

    fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        self.dispatcher.earliest_message_time(topic, queue_id)
    }

    fn check_in_disk_by_consume_offset(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> bool {
        let Some(unit) = self
            .dispatcher
            .consume_queues()
            .find(topic, queue_id)
            .and_then(|queue| queue.get(offset))
        else {
            return false;
        };
        let budget = crate::lookup::memory_budget(&self.config);
        self.max_phy_offset().get() - unit.physical_offset.get() > budget
    }

    fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryMessageResult {
        self.dispatcher
            .query_message(topic, key, max_num, begin, end)
    }

    fn queue_units(
        &self,
        topic: &str,
        queue_id: i32,
        from: QueueOffset,
        max: usize,
    ) -> Vec<QueueUnit> {
        let Some(queue) = self.dispatcher.consume_queues().find(topic, queue_id) else {
            return Vec::new();
        };
        let Some(window) = queue.window_from(from) else {
            return Vec::new();
        };
        window
            .iter()
            .take(max)
            .map(|(offset, unit)| QueueUnit {
                offset,
                physical_offset: unit.physical_offset,
                size: unit.size,
                tags_code: unit.tags_code,
            })
            .collect()
    }

    fn view_message(&self, offset: PhysicalOffset) -> Option<Bytes> {
        self.dispatcher.record_at(offset)
    }

    fn delete_topic(&self, topic: &str) -> Result<usize, StoreError> {
        MessageStore::delete_topic(self, topic)
    }

    fn dispatch_behind_bytes(&self) -> u64 {
        self.dispatcher.dispatch_behind_bytes()
    }

    fn flush_behind_bytes(&self) -> u64 {
        let behind = self.max_phy_offset().0 - self.flushed_phy_offset().0;
        u64::try_from(behind).unwrap_or(0)
    }

    fn out_of_service(&self) -> Option<String> {
        self.fence_reason()
            .or_else(|| self.dispatcher.dispatch_failure())
    }

    fn min_phy_offset(&self) -> PhysicalOffset {
        MessageStore::min_phy_offset(self)
    }

    fn max_phy_offset(&self) -> PhysicalOffset {
        MessageStore::max_phy_offset(self)
    }

    fn set_arrival_listener(&self, listener: Arc<dyn MessageArrivalListener>) {
        self.dispatcher.set_arrival_listener(listener);
    }

    fn shutdown(&self) -> Result<(), StoreError> {
        MessageStore::shutdown(self)
    }

    fn config_fs(&self) -> Arc<dyn StoreFs> {
        Arc::clone(self.fs())
    }
}
