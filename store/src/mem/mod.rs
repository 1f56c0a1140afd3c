//! [`MemStore`]: a [`MessageStoreApi`] kept in memory, for unit tests of the broker's
//! handlers and services that need a store but no files (as raft-rs ships `MemStorage`
//! beside its real storage).
//!
//! Records are encoded in the CommitLog layout by the same codec, with the same field
//! limits and the same delay rewrite into `SCHEDULE_TOPIC_XXXX`, and indexed at once (no
//! dispatch lag): a put is visible to the next read. What it leaves out: files, flush
//! (every put is durable at once), retention, replication visibility, CommitLog file
//! boundaries (a queue's units are one window), and the 4.9 one-file rule of
//! `getOffsetInQueueByTime` (here: the first unit stored at or after the time, else the
//! last). Tests of those keep the file store.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use protocol::message::properties::{self, UNIQ_KEY};
use protocol::message::record::{MessageRecord, StoreStamp, body_crc, decode};
use protocol::message::{MessageSysFlag, PhysicalOffset, QueueOffset};

use crate::api::{MessageStoreApi, QueueUnit};
use crate::commitlog::{BatchMessage, BrokerMessage, advances_queue, check_lengths, delay_rewrite};
use crate::config::{BrokerRole, DelayLevels, MessageStoreConfig};
use crate::dispatch::{ArrivedMessage, DispatchRequest, MessageArrivalListener};
use crate::error::StoreError;
use crate::fs::{OsFs, StoreFs};
use crate::lookup::{GetMessageResult, MessageFilter, QueryMessageResult};
use crate::message_store::PutMessageFuture;
use crate::put_result::{AppendMessageResult, PutMessageResult, PutMessageStatus};

/// A ConsumeQueue unit with its record's store time.
#[derive(Debug, Clone, Copy)]
struct Unit {
    physical_offset: PhysicalOffset,
    size: i32,
    tags_code: i64,
    store_timestamp: i64,
}

#[derive(Debug, Default)]
struct Queue {
    /// Queue offset of `units[0]`.
    min: i64,
    units: Vec<Unit>,
}

impl Queue {
    fn max(&self) -> i64 {
        self.min + self.units.len() as i64
    }

    fn get(&self, offset: QueueOffset) -> Option<&Unit> {
        let at = usize::try_from(offset.0.checked_sub(self.min)?).ok()?;
        self.units.get(at)
    }
}

#[derive(Debug, Default)]
struct Log {
    /// Every record by physical offset, in order.
    records: Vec<(PhysicalOffset, Bytes)>,
    end: i64,
    queues: HashMap<(String, i32), Queue>,
}

impl Log {
    fn record_at(&self, offset: PhysicalOffset) -> Option<&Bytes> {
        let at = self
            .records
            .binary_search_by_key(&offset, |(o, _)| *o)
            .ok()?;
        Some(&self.records[at].1)
    }
}

/// A message store in memory (see the module docs for what it leaves out).
pub struct MemStore {
    config: MessageStoreConfig,
    delay_levels: DelayLevels,
    log: RwLock<Log>,
    /// Serialises puts so records land in offset order and listeners see them in order.
    put: Mutex<()>,
    listener: RwLock<Option<Arc<dyn MessageArrivalListener>>>,
    shut_down: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore")
            .field("end", &self.log.read().end)
            .finish_non_exhaustive()
    }
}

impl MemStore {
    /// A store with `config`'s limits and delay levels; nothing is read from or written
    /// to `storePathRootDir`.
    pub fn new(config: MessageStoreConfig) -> Result<Self, StoreError> {
        let delay_levels = config.delay_levels()?;
        Ok(Self {
            config,
            delay_levels,
            log: RwLock::new(Log::default()),
            put: Mutex::new(()),
            listener: RwLock::new(None),
            shut_down: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn refused(&self) -> Option<PutMessageStatus> {
        let down = self.shut_down.load(std::sync::atomic::Ordering::Acquire);
        (down || self.config.broker_role == BrokerRole::Slave)
            .then_some(PutMessageStatus::ServiceNotAvailable)
    }

    /// Encodes, stores and indexes `records` as one contiguous append.
    fn append(
        &self,
        records: &[MessageRecord<'_>],
        store_host: std::net::SocketAddr,
        batch: bool,
    ) -> PutMessageResult {
        let _put = self.put.lock();
        let first = &records[0];
        let advances = advances_queue(first.sys_flag);
        let store_timestamp = crate::commitlog::now_ms();
        let mut log = self.log.write();
        let key = (first.topic.to_owned(), first.queue_id);
        let first_queue_offset = if advances {
            log.queues.get(&key).map_or(0, Queue::max)
        } else {
            0
        };
        let wrote_offset = log.end;
        let mut at = wrote_offset;
        let mut encoded = Vec::with_capacity(records.len());
        for (i, p) in records.iter().enumerate() {
            let stamp = StoreStamp {
                queue_offset: QueueOffset(if advances {
                    first_queue_offset + i as i64
                } else {
                    0
                }),
                physical_offset: PhysicalOffset(at),
                store_timestamp,
                store_host,
            };
            let Ok(bytes) = p.encode_to_vec(&stamp) else {
                return PutMessageResult::failed(PutMessageStatus::MessageIllegal);
            };
            at += bytes.len() as i64;
            encoded.push((stamp.physical_offset, Bytes::from(bytes)));
        }
        let mut arrived = Vec::new();
        for (offset, bytes) in &encoded {
            let Ok(view) = decode(bytes, false) else {
                continue;
            };
            let request = DispatchRequest::from_record(&view, &self.delay_levels);
            if !request.goes_to_consume_queue() {
                continue;
            }
            let queue = log
                .queues
                .entry((request.topic.to_owned(), request.queue_id))
                .or_default();
            queue.units.push(Unit {
                physical_offset: *offset,
                size: request.size,
                tags_code: request.tags_code,
                store_timestamp,
            });
            arrived.push((bytes.clone(), queue.max(), request.tags_code));
        }
        log.end = at;
        log.records.extend(encoded.iter().cloned());
        drop(log);
        self.notify(&arrived);
        PutMessageResult {
            status: PutMessageStatus::PutOk,
            append: Some(AppendMessageResult {
                wrote_offset: PhysicalOffset(wrote_offset),
                wrote_bytes: (at - wrote_offset) as u32,
                store_timestamp,
                logics_offset: QueueOffset(first_queue_offset),
                msg_num: records.len() as u32,
                batch_offsets: if batch {
                    encoded.iter().map(|(o, _)| *o).collect()
                } else {
                    Vec::new()
                },
                store_host,
            }),
        }
    }

    /// Tells the listener, outside the log lock, as the reput thread would.
    fn notify(&self, arrived: &[(Bytes, i64, i64)]) {
        let Some(listener) = self.listener.read().clone() else {
            return;
        };
        for (bytes, max_offset, tags_code) in arrived {
            let Ok(view) = decode(bytes, false) else {
                continue;
            };
            listener.arriving(&ArrivedMessage {
                topic: view.topic(),
                queue_id: view.queue_id(),
                max_offset: QueueOffset(*max_offset),
                tags_code: *tags_code,
                store_timestamp: view.store_timestamp(),
                properties: view.properties(),
            });
        }
    }

    fn queue_bounds(&self, topic: &str, queue_id: i32) -> Option<(i64, i64)> {
        let log = self.log.read();
        let q = log.queues.get(&(topic.to_owned(), queue_id))?;
        Some((q.min, q.max()))
    }
}

impl<Permit> MessageStoreApi<Permit> for MemStore {
    fn put_message(&self, msg: &BrokerMessage, _: Permit) -> PutMessageFuture {
        if let Some(status) = self.refused() {
            return PutMessageFuture::ready(PutMessageResult::failed(status));
        }
        let sys_flag = msg
            .sys_flag
            .with_host_families(&msg.born_host, &msg.store_host);
        let (topic, queue_id, props) = delay_rewrite(&self.delay_levels, msg, sys_flag);
        if let Err(status) =
            check_lengths(self.config.max_message_size, &topic, &props, msg.body.len())
        {
            return PutMessageFuture::ready(PutMessageResult::failed(status));
        }
        let pending = [MessageRecord {
            queue_id,
            flag: msg.flag,
            sys_flag,
            born_timestamp: msg.born_timestamp,
            born_host: msg.born_host,
            reconsume_times: msg.reconsume_times,
            prepared_transaction_offset: msg.prepared_transaction_offset,
            body: &msg.body,
            body_crc: Some(body_crc(&msg.body)),
            topic: &topic,
            properties: &props,
        }];
        PutMessageFuture::ready(self.append(&pending, msg.store_host, false))
    }

    fn put_messages(&self, batch: &BatchMessage, _: Permit) -> PutMessageFuture {
        if let Some(status) = self.refused() {
            return PutMessageFuture::ready(PutMessageResult::failed(status));
        }
        let not_transactional =
            batch.sys_flag.transaction_type() == protocol::message::TransactionType::Not;
        if batch.items.is_empty() || !not_transactional {
            return PutMessageFuture::ready(PutMessageResult::failed(
                PutMessageStatus::MessageIllegal,
            ));
        }
        let sys_flag: MessageSysFlag = batch
            .sys_flag
            .with_host_families(&batch.born_host, &batch.store_host);
        let mut pending = Vec::with_capacity(batch.items.len());
        for item in &batch.items {
            let max = self.config.max_message_size;
            if let Err(status) = check_lengths(max, &batch.topic, &item.properties, item.body.len())
            {
                return PutMessageFuture::ready(PutMessageResult::failed(status));
            }
            pending.push(MessageRecord {
                queue_id: batch.queue_id,
                flag: item.flag,
                sys_flag,
                born_timestamp: batch.born_timestamp,
                born_host: batch.born_host,
                reconsume_times: batch.reconsume_times,
                prepared_transaction_offset: PhysicalOffset(0),
                body: &item.body,
                body_crc: Some(body_crc(&item.body)),
                topic: &batch.topic,
                properties: &item.properties,
            });
        }
        PutMessageFuture::ready(self.append(&pending, batch.store_host, true))
    }

    fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_count: usize,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult {
        read::get_message(self, topic, queue_id, offset, max_count, filter)
    }

    fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset {
        QueueOffset(self.queue_bounds(topic, queue_id).map_or(0, |(_, max)| max))
    }

    fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> QueueOffset {
        QueueOffset(self.queue_bounds(topic, queue_id).map_or(0, |(min, _)| min))
    }

    fn has_visible_message(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> bool {
        let log = self.log.read();
        log.queues
            .get(&(topic.to_owned(), queue_id))
            .and_then(|q| q.get(offset))
            .is_some()
    }

    fn offset_in_queue_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> QueueOffset {
        let log = self.log.read();
        let Some(q) = log.queues.get(&(topic.to_owned(), queue_id)) else {
            return QueueOffset(0);
        };
        if q.units.is_empty() {
            return QueueOffset(0);
        }
        let at = q.units.partition_point(|u| u.store_timestamp < timestamp);
        QueueOffset(q.min + at.min(q.units.len() - 1) as i64)
    }

    fn message_store_time(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> Option<i64> {
        let log = self.log.read();
        let q = log.queues.get(&(topic.to_owned(), queue_id))?;
        q.get(offset).map(|u| u.store_timestamp)
    }

    fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let log = self.log.read();
        let q = log.queues.get(&(topic.to_owned(), queue_id))?;
        q.units.first().map(|u| u.store_timestamp)
    }

    /// Everything is in memory: never "in disk".
    fn check_in_disk_by_consume_offset(&self, _: &str, _: i32, _: QueueOffset) -> bool {
        false
    }

    fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryMessageResult {
        let log = self.log.read();
        let max = max_num.min(self.config.max_msgs_num_batch as usize);
        let mut result = QueryMessageResult {
            messages: Vec::new(),
            index_last_update_timestamp: 0,
            index_last_update_phy_offset: PhysicalOffset(0),
        };
        for (offset, bytes) in &log.records {
            let Ok(view) = decode(bytes, false) else {
                continue;
            };
            result.index_last_update_timestamp = view.store_timestamp();
            result.index_last_update_phy_offset = *offset;
            let props = view.properties();
            let in_range = (begin..=end).contains(&view.store_timestamp());
            let has_key = properties::find(props, UNIQ_KEY) == Some(key)
                || properties::keys(props).any(|k| k == key);
            if view.topic() == topic && in_range && has_key && result.messages.len() < max {
                result.messages.push(bytes.clone());
            }
        }
        result
    }

    fn queue_units(
        &self,
        topic: &str,
        queue_id: i32,
        from: QueueOffset,
        max: usize,
    ) -> Vec<QueueUnit> {
        let log = self.log.read();
        let Some(q) = log.queues.get(&(topic.to_owned(), queue_id)) else {
            return Vec::new();
        };
        let Ok(skip) = usize::try_from(from.0 - q.min) else {
            return Vec::new();
        };
        q.units
            .iter()
            .enumerate()
            .skip(skip)
            .take(max)
            .map(|(i, u)| QueueUnit {
                offset: QueueOffset(q.min + i as i64),
                physical_offset: u.physical_offset,
                size: u.size,
                tags_code: u.tags_code,
            })
            .collect()
    }

    fn view_message(&self, offset: PhysicalOffset) -> Option<Bytes> {
        self.log.read().record_at(offset).cloned()
    }

    fn delete_topic(&self, topic: &str) -> Result<usize, StoreError> {
        let mut log = self.log.write();
        let before = log.queues.len();
        log.queues.retain(|(t, _), _| t != topic);
        Ok(before - log.queues.len())
    }

    fn dispatch_behind_bytes(&self) -> u64 {
        0
    }

    fn flush_behind_bytes(&self) -> u64 {
        0
    }

    fn out_of_service(&self) -> Option<String> {
        None
    }

    fn min_phy_offset(&self) -> PhysicalOffset {
        let log = self.log.read();
        log.records
            .first()
            .map_or(PhysicalOffset(log.end), |(o, _)| *o)
    }

    fn max_phy_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.log.read().end)
    }

    fn set_arrival_listener(&self, listener: Arc<dyn MessageArrivalListener>) {
        *self.listener.write() = Some(listener);
    }

    fn shutdown(&self) -> Result<(), StoreError> {
        self.shut_down
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn config_fs(&self) -> Arc<dyn StoreFs> {
        Arc::new(OsFs)
    }
}

mod read;

#[cfg(test)]
mod tests;
