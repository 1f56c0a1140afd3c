//! The append path (`CommitLog.asyncPutMessage(s)` + `DefaultAppendMessageCallback`).
//!
//! Everything that does not depend on the position (validation, delay rewrite, body
//! CRC, record length) happens before the put lock; inside it only the offsets and the
//! store timestamp are assigned and the bytes are encoded straight into the mapping, or
//! under SYNC_FLUSH into the file's stage buffer (`mapped_file/stage.rs`).

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use protocol::message::record::{
    END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LEN, MAX_TOPIC_LEN, body_crc,
};
use protocol::message::{
    BLANK_MAGIC_CODE, MessageRecord, MessageSysFlag, PhysicalOffset, QueueOffset, StoreStamp,
    TransactionType,
};

use protocol::message::properties::{self, Properties};

use super::{BatchMessage, BrokerMessage, CommitLog};
use crate::config::DelayLevels;
use crate::mapped_file::{AppendTo, MappedFile};
use crate::put_result::{AppendMessageResult, PutMessageStatus};

/// `TopicValidator.RMQ_SYS_SCHEDULE_TOPIC`.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
pub const PROPERTY_DELAY: &str = "DELAY";
pub const PROPERTY_REAL_TOPIC: &str = "REAL_TOPIC";
pub const PROPERTY_REAL_QUEUE_ID: &str = "REAL_QID";

/// The whole record may exceed the body limit by this much (`MessageExtEncoder`).
const RECORD_OVERHEAD_LIMIT: usize = 64 * 1024;

/// Staged bytes at which a put commits them itself instead of leaving it to the group
/// commit (bounds the stage buffer while a sync stalls).
const STAGE_COMMIT_LIMIT: u32 = 4 * 1024 * 1024;

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn advances_queue(sys_flag: MessageSysFlag) -> bool {
    matches!(
        sys_flag.transaction_type(),
        TransactionType::Not | TransactionType::Commit
    )
}

/// Delay messages (`DELAY` > 0 on NOT/COMMIT types) are stored in
/// `SCHEDULE_TOPIC_XXXX`, queue `level - 1`, with the real destination in
/// `REAL_TOPIC` / `REAL_QID`; the level is clamped to the table.
pub(crate) fn delay_rewrite<'m>(
    levels: &DelayLevels,
    msg: &'m BrokerMessage,
    sys_flag: MessageSysFlag,
) -> (Cow<'m, str>, i32, Cow<'m, str>) {
    let unchanged = (
        Cow::Borrowed(msg.topic.as_str()),
        msg.queue_id,
        Cow::Borrowed(msg.properties.as_str()),
    );
    // Cheap pre-check: almost no message carries DELAY.
    if !advances_queue(sys_flag) || !msg.properties.contains(PROPERTY_DELAY) {
        return unchanged;
    }
    let Some(level) = properties::find(&msg.properties, PROPERTY_DELAY)
        .and_then(|d| d.trim().parse::<i32>().ok())
    else {
        return unchanged;
    };
    if level <= 0 {
        return unchanged;
    }
    let level = level.min(levels.max_level());
    let mut props = Properties::parse(&msg.properties);
    props.insert(PROPERTY_REAL_TOPIC, msg.topic.as_str());
    props.insert(PROPERTY_REAL_QUEUE_ID, msg.queue_id.to_string());
    let mut encoded = String::with_capacity(props.encoded_len());
    props.write_to(&mut encoded);
    (
        Cow::Borrowed(SCHEDULE_TOPIC),
        level - 1,
        Cow::Owned(encoded),
    )
}

/// A message after validation, ready to be placed.
struct Prepared<'a> {
    record: MessageRecord<'a>,
    len: u32,
}

/// The field limits of a record (`CommitLog.asyncPutMessage` and the encoder's checks).
pub(crate) fn check_lengths(
    max_message_size: u32,
    topic: &str,
    properties: &str,
    body_len: usize,
) -> Result<(), PutMessageStatus> {
    if topic.is_empty() || topic.len() > MAX_TOPIC_LEN {
        return Err(PutMessageStatus::MessageIllegal);
    }
    if properties.len() > MAX_PROPERTIES_LEN {
        return Err(PutMessageStatus::PropertiesSizeExceeded);
    }
    if body_len > max_message_size as usize {
        return Err(PutMessageStatus::MessageIllegal);
    }
    Ok(())
}

impl CommitLog {
    fn check_lengths(
        &self,
        topic: &str,
        properties: &str,
        body_len: usize,
    ) -> Result<(), PutMessageStatus> {
        check_lengths(self.max_message_size, topic, properties, body_len)
    }

    /// Checks the whole-record limits and that the record(s) fit a file at all.
    fn check_record_len(&self, len: usize) -> Result<u32, PutMessageStatus> {
        let limit = self.max_message_size as usize + RECORD_OVERHEAD_LIMIT;
        let fits_file = len + END_FILE_MIN_BLANK_LENGTH <= self.file_size as usize;
        if len > limit || !fits_file {
            return Err(PutMessageStatus::MessageIllegal);
        }
        u32::try_from(len).map_err(|_| PutMessageStatus::MessageIllegal)
    }

    /// True when the put lock has been held longer than `timeout_ms` (`isOSPageCacheBusy`).
    pub fn is_page_cache_busy(&self, timeout_ms: u64) -> bool {
        let since = self.lock_since.load(Ordering::Relaxed);
        since != 0 && now_ms() - since > timeout_ms as i64
    }

    /// Appends one message; the caller has checked the store is writable.
    pub fn append(&self, msg: &BrokerMessage) -> Result<AppendMessageResult, PutMessageStatus> {
        let sys_flag = msg
            .sys_flag
            .with_host_families(&msg.born_host, &msg.store_host);
        let (topic, queue_id, properties) = delay_rewrite(&self.delay_levels, msg, sys_flag);
        self.check_lengths(&topic, &properties, msg.body.len())?;
        let record = MessageRecord {
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
            properties: &properties,
        };
        let len = self.check_record_len(record.encoded_len())?;
        let prepared = [Prepared { record, len }];
        self.place(&prepared, len, msg.store_host, false)
    }

    /// Appends a batch: one record per item, consecutive queue offsets, all in one file.
    pub fn append_batch(
        &self,
        batch: &BatchMessage,
    ) -> Result<AppendMessageResult, PutMessageStatus> {
        // `CommitLog.asyncPutMessages`: a batch is never transactional (its records
        // would be stored as half or decided messages no checker tracks).
        if batch.items.is_empty() || batch.sys_flag.transaction_type() != TransactionType::Not {
            return Err(PutMessageStatus::MessageIllegal);
        }
        let sys_flag = batch
            .sys_flag
            .with_host_families(&batch.born_host, &batch.store_host);
        let mut prepared = Vec::with_capacity(batch.items.len());
        let mut total = 0usize;
        for item in &batch.items {
            self.check_lengths(&batch.topic, &item.properties, item.body.len())?;
            let record = MessageRecord {
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
            };
            let len = self.check_record_len(record.encoded_len())?;
            total += len as usize;
            prepared.push(Prepared { record, len });
        }
        let total = self.check_record_len(total)?;
        self.place(&prepared, total, batch.store_host, true)
    }

    /// The critical section: choose the file (writing a BLANK and rolling when the
    /// records plus the 8-byte minimum blank do not fit), assign offsets and timestamp,
    /// encode.
    fn place(
        &self,
        records: &[Prepared<'_>],
        total: u32,
        store_host: std::net::SocketAddr,
        batch: bool,
    ) -> Result<AppendMessageResult, PutMessageStatus> {
        let first = &records[0].record;
        let advances = advances_queue(first.sys_flag);
        let mut state = self.put.lock();
        if self.fence().is_tripped() {
            return Err(PutMessageStatus::ServiceNotAvailable);
        }
        let store_timestamp = now_ms();
        self.lock_since.store(store_timestamp, Ordering::Relaxed);
        let result = (|| {
            let create = || {
                self.queue
                    .last_or_create(0)
                    .map_err(|_| PutMessageStatus::CreateMapedFileFailed)
            };
            let mut file = match state.file.take() {
                Some(file) if !file.is_full() => file,
                _ => create()?,
            };
            if total as usize + END_FILE_MIN_BLANK_LENGTH > file.remaining() as usize {
                write_blank(&file, self.append_to());
                // The file is full only once its staged bytes (the BLANK last) are in
                // it; later commits only look at the last file.
                if self.write_through && self.commit_file(&file).is_err() {
                    return Err(PutMessageStatus::UnknownError);
                }
                file = create()?;
            }
            let wrote_offset = file.from_offset() + u64::from(file.append_position());
            let count = records.len() as i64;
            let first_queue_offset = if advances {
                state.offsets.take(first.topic, first.queue_id, count)
            } else {
                0
            };
            let mut batch_offsets = Vec::new();
            let encode = |out: &mut [u8]| {
                let mut at = 0usize;
                for (i, p) in records.iter().enumerate() {
                    let physical_offset = PhysicalOffset((wrote_offset + at as u64) as i64);
                    let queue_offset = if advances {
                        first_queue_offset + i as i64
                    } else {
                        0
                    };
                    let stamp = StoreStamp {
                        queue_offset: QueueOffset(queue_offset),
                        physical_offset,
                        store_timestamp,
                        store_host,
                    };
                    p.record
                        .encode_into(&stamp, &mut out[at..at + p.len as usize])?;
                    if batch {
                        batch_offsets.push(physical_offset);
                    }
                    at += p.len as usize;
                }
                Ok::<_, protocol::message::EncodeError>(())
            };
            // `None`: no room (checked above, so never) or the write failed. A failed
            // write fences the log: what reached the file is unknown (see `crate::fence`).
            let encoded = file
                .append_with(total, store_timestamp, self.append_to(), encode)
                .ok_or(PutMessageStatus::UnknownError)
                .inspect_err(|_| {
                    self.fence().trip(format!(
                        "writing a record to {} at {wrote_offset} failed",
                        file.path().display()
                    ));
                });
            self.queue.keep_prefaulted(&file);
            // Staged bytes are normally committed by the group commit right away; a sync
            // that stalls lets them pile up, so past a bound the put commits them itself.
            if self.write_through
                && file.staged_len() >= STAGE_COMMIT_LIMIT
                && self.commit_file(&file).is_err()
            {
                state.file = Some(file);
                return Err(PutMessageStatus::UnknownError);
            }
            state.file = Some(file);
            if let Err(e) = encoded.and_then(|r| {
                r.map_err(|e| {
                    tracing::error!(error = %e, "encoding a validated record failed");
                    PutMessageStatus::MessageIllegal
                })
            }) {
                if advances {
                    // Nothing was written: give the reserved queue offsets back.
                    state
                        .offsets
                        .set(first.topic, first.queue_id, first_queue_offset);
                }
                return Err(e);
            }
            Ok(AppendMessageResult {
                wrote_offset: PhysicalOffset(wrote_offset as i64),
                wrote_bytes: total,
                store_timestamp,
                logics_offset: QueueOffset(first_queue_offset),
                msg_num: records.len() as u32,
                batch_offsets,
                store_host,
            })
        })();
        self.lock_since.store(0, Ordering::Relaxed);
        drop(state);
        let result = result?;
        if !self.write_through {
            // Staged records are published when committed.
            self.signal.publish(result.end_offset());
        }
        Ok(result)
    }
}

/// Fills the rest of `file` with a BLANK record: TOTALSIZE = bytes left, BLANK magic; the
/// remaining bytes stay as they are (zeros).
fn write_blank(file: &MappedFile, to: AppendTo) {
    let remaining = file.remaining();
    let _ = file.append_with(remaining, 0, to, |out| {
        if out.len() >= END_FILE_MIN_BLANK_LENGTH {
            out[..4].copy_from_slice(&(remaining as i32).to_be_bytes());
            out[4..8].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
        }
        Ok::<(), ()>(())
    });
}
