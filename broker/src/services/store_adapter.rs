//! [`MessageStoreApi`] over the `store` crate's `MessageStore`.

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use protocol::message::properties::join_batch_properties;
use protocol::message::{MessageSysFlag, PhysicalOffset, QueueOffset};
use store::commitlog::{BatchItem, BatchMessage, BrokerMessage};
use store::dispatch::{ArrivedMessage, MessageArrivalListener};
use store::lookup::{GetMessageStatus, MessageFilter as StoreFilter};
use store::{MessageStore, PutMessageResult, PutMessageStatus};

use crate::services::filter::MessageFilter;
use crate::services::put_path::PutPermit;
use crate::services::store_api::{
    Appended, ArrivalListener, GetResult, GetStatus, MessageStoreApi, PutBatch, PutMessage,
    PutResult, PutStatus, QueryResult, QueueUnit,
};

pub struct StoreAdapter {
    store: Arc<MessageStore>,
    /// `accessMessageInMemoryMaxRatio` % of physical memory, in bytes.
    memory_budget: i64,
}

impl StoreAdapter {
    pub fn new(store: Arc<MessageStore>) -> Self {
        let ratio = i64::from(store.config().access_message_in_memory_max_ratio);
        Self {
            memory_budget: physical_memory_bytes() / 100 * ratio,
            store,
        }
    }

    pub fn inner(&self) -> &Arc<MessageStore> {
        &self.store
    }
}

fn physical_memory_bytes() -> i64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page <= 0 {
        return i64::MAX / 2;
    }
    pages.saturating_mul(page)
}

fn put_status(s: PutMessageStatus) -> PutStatus {
    match s {
        PutMessageStatus::PutOk => PutStatus::PutOk,
        PutMessageStatus::FlushDiskTimeout => PutStatus::FlushDiskTimeout,
        PutMessageStatus::FlushSlaveTimeout => PutStatus::FlushSlaveTimeout,
        PutMessageStatus::SlaveNotAvailable => PutStatus::SlaveNotAvailable,
        PutMessageStatus::ServiceNotAvailable => PutStatus::ServiceNotAvailable,
        PutMessageStatus::CreateMapedFileFailed => PutStatus::CreateMappedFileFailed,
        PutMessageStatus::MessageIllegal => PutStatus::MessageIllegal,
        PutMessageStatus::PropertiesSizeExceeded => PutStatus::PropertiesSizeExceeded,
        PutMessageStatus::OsPageCacheBusy => PutStatus::OsPageCacheBusy,
        PutMessageStatus::UnknownError => PutStatus::UnknownError,
    }
}

fn put_result(r: PutMessageResult) -> PutResult {
    let appended = r.append.map(|a| {
        let msg_ids = if a.batch_offsets.is_empty() {
            vec![a.msg_id()]
        } else {
            a.batch_offsets
                .iter()
                .map(|o| store::put_result::offset_msg_id(a.store_host, *o))
                .collect()
        };
        Appended {
            msg_ids,
            queue_offset: a.logics_offset,
            wrote_offset: a.wrote_offset,
            wrote_bytes: u64::from(a.wrote_bytes),
        }
    });
    PutResult {
        status: put_status(r.status),
        appended,
    }
}

fn batch_items(batch: &PutBatch) -> Option<Vec<BatchItem>> {
    let mut items = Vec::new();
    for entry in protocol::message::batch::decode(&batch.body) {
        let entry = entry.ok()?;
        let mut properties =
            String::with_capacity(entry.properties.len() + batch.properties.len() + 1);
        join_batch_properties(entry.properties, &batch.properties, &mut properties);
        items.push(BatchItem {
            flag: entry.flag,
            body: batch.body.slice_ref(entry.body),
            properties,
        });
    }
    (!items.is_empty()).then_some(items)
}

struct TagFilter<'a>(&'a MessageFilter);

impl StoreFilter for TagFilter<'_> {
    fn matches_consume_queue(&self, tags_code: i64) -> bool {
        self.0.matches_tags_code(tags_code)
    }

    fn matches_commit_log(&self, record: &[u8]) -> bool {
        self.0.matches_record(record)
    }
}

struct Listener(ArrivalListener);

impl MessageArrivalListener for Listener {
    fn arriving(&self, m: &ArrivedMessage<'_>) {
        // The store reports the queue's new max offset; the message sits just below it.
        (self.0)(
            m.topic,
            m.queue_id,
            QueueOffset(m.max_offset.get() - 1),
            m.tags_code,
            m.properties,
        );
    }
}

impl MessageStoreApi for StoreAdapter {
    fn put_message(&self, m: PutMessage, permit: PutPermit) -> BoxFuture<'static, PutResult> {
        self.put_transaction_end(m, PhysicalOffset(0), permit)
    }

    fn put_transaction_end(
        &self,
        m: PutMessage,
        prepared: PhysicalOffset,
        _: PutPermit,
    ) -> BoxFuture<'static, PutResult> {
        let msg = BrokerMessage {
            topic: m.topic,
            queue_id: m.queue_id,
            flag: m.flag,
            body: m.body,
            properties: m.properties,
            sys_flag: MessageSysFlag(m.sys_flag),
            born_timestamp: m.born_timestamp,
            born_host: m.born_host,
            store_host: m.store_host,
            reconsume_times: m.reconsume_times,
            prepared_transaction_offset: prepared,
            wait_store_msg_ok: m.wait_store_ok,
        };
        self.store.put_message(&msg).map(put_result).boxed()
    }

    fn put_batch(&self, b: PutBatch, _: PutPermit) -> BoxFuture<'static, PutResult> {
        let Some(items) = batch_items(&b) else {
            return futures::future::ready(PutResult {
                status: PutStatus::MessageIllegal,
                appended: None,
            })
            .boxed();
        };
        let batch = BatchMessage {
            topic: b.topic,
            queue_id: b.queue_id,
            sys_flag: MessageSysFlag(b.sys_flag),
            born_timestamp: b.born_timestamp,
            born_host: b.born_host,
            store_host: b.store_host,
            reconsume_times: b.reconsume_times,
            wait_store_msg_ok: b.wait_store_ok,
            items,
        };
        self.store.put_messages(&batch).map(put_result).boxed()
    }

    fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_msgs: i32,
        filter: &MessageFilter,
    ) -> GetResult {
        let f = TagFilter(filter);
        let r = self.store.dispatcher().get_message(
            "",
            topic,
            queue_id,
            offset,
            usize::try_from(max_msgs).unwrap_or(0),
            Some(&f),
        );
        let status = match r.status {
            GetMessageStatus::Found => GetStatus::Found,
            GetMessageStatus::NoMatchedMessage => GetStatus::NoMatchedMessage,
            GetMessageStatus::MessageWasRemoving => GetStatus::MessageWasRemoving,
            GetMessageStatus::OffsetFoundNull => GetStatus::OffsetFoundNull,
            GetMessageStatus::OffsetOverflowBadly => GetStatus::OffsetOverflowBadly,
            GetMessageStatus::OffsetOverflowOne => GetStatus::OffsetOverflowOne,
            GetMessageStatus::OffsetTooSmall => GetStatus::OffsetTooSmall,
            GetMessageStatus::NoMatchedLogicQueue => GetStatus::NoMatchedLogicQueue,
            GetMessageStatus::NoMessageInQueue => GetStatus::NoMessageInQueue,
        };
        GetResult {
            status,
            next_begin_offset: r.next_begin_offset,
            min_offset: r.min_offset,
            max_offset: r.max_offset,
            messages: r.messages,
            suggest_pull_from_slave: r.suggest_pulling_from_slave,
        }
    }

    fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.store
            .dispatcher()
            .consume_queues()
            .find(topic, queue_id)
            .map_or(QueueOffset(0), |q| q.max_offset())
    }

    fn has_visible_message(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> bool {
        self.store.dispatcher().is_visible(topic, queue_id, offset)
    }

    fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.store
            .dispatcher()
            .consume_queues()
            .find(topic, queue_id)
            .map_or(QueueOffset(0), |q| q.min_offset())
    }

    fn offset_in_queue_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> QueueOffset {
        self.store
            .dispatcher()
            .offset_in_queue_by_time(topic, queue_id, timestamp)
    }

    fn delete_topic(&self, topic: &str) -> Result<usize, store::StoreError> {
        self.store.delete_topic(topic)
    }

    fn message_store_time(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> Option<i64> {
        self.store
            .dispatcher()
            .message_store_timestamp(topic, queue_id, offset)
    }

    fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        self.store
            .dispatcher()
            .earliest_message_time(topic, queue_id)
    }

    /// `checkInDiskByConsumeOffset`: false when there is no unit at `offset` yet.
    fn check_in_disk_by_consume_offset(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> bool {
        let Some(queue) = self
            .store
            .dispatcher()
            .consume_queues()
            .find(topic, queue_id)
        else {
            return false;
        };
        let Some(unit) = queue.get(offset) else {
            return false;
        };
        self.store.max_phy_offset().get() - unit.physical_offset.get() > self.memory_budget
    }

    fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
    ) -> QueryResult {
        let r = self.store.dispatcher().query_message(
            topic,
            key,
            usize::try_from(max_num).unwrap_or(0),
            begin,
            end,
        );
        QueryResult {
            messages: r.messages,
            index_last_update_timestamp: r.index_last_update_timestamp,
            index_last_update_phyoffset: r.index_last_update_phy_offset,
        }
    }

    fn queue_units(
        &self,
        topic: &str,
        queue_id: i32,
        from: QueueOffset,
        max: usize,
    ) -> Vec<QueueUnit> {
        let Some(queue) = self
            .store
            .dispatcher()
            .consume_queues()
            .find(topic, queue_id)
        else {
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
        self.store.dispatcher().record_at(offset)
    }

    fn dispatch_behind_bytes(&self) -> u64 {
        self.store.dispatcher().dispatch_behind_bytes()
    }

    fn flush_behind_bytes(&self) -> u64 {
        let behind = self.store.max_phy_offset().0 - self.store.flushed_phy_offset().0;
        u64::try_from(behind).unwrap_or(0)
    }

    fn out_of_service(&self) -> Option<String> {
        self.store
            .fence_reason()
            .or_else(|| self.store.dispatcher().dispatch_failure())
    }

    fn min_phy_offset(&self) -> PhysicalOffset {
        self.store.min_phy_offset()
    }

    fn max_phy_offset(&self) -> PhysicalOffset {
        self.store.max_phy_offset()
    }

    fn set_arrival_listener(&self, listener: ArrivalListener) {
        self.store
            .dispatcher()
            .set_arrival_listener(Arc::new(Listener(listener)));
    }

    fn shutdown(&self) {
        if let Err(e) = self.store.shutdown() {
            tracing::error!(error = %e, "store shutdown failed");
        }
    }

    fn config_fs(&self) -> Arc<dyn store::fs::StoreFs> {
        Arc::clone(self.store.fs())
    }
}
