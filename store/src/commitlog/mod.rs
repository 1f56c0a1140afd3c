//! The CommitLog: every message of every topic, appended to one stream of segment files
//! (`S/CommitLog.java`). Appends go through one critical section that assigns the
//! physical offset, the queue offset (from the `topic-queueId` table) and the store
//! timestamp; readers get zero-copy views below the write position.

mod append;
mod message;
mod recover;
mod replica;
mod signal;

pub(crate) use append::{advances_queue, check_lengths, delay_rewrite, now_ms};
pub use message::{BatchItem, BatchMessage, BrokerMessage};
pub use recover::Recovered;
pub use replica::PlaceError;
pub use signal::AppendSignal;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use bytes::Bytes;
use parking_lot::Mutex;
use protocol::message::{PhysicalOffset, QueueOffset, RecordError, decode};

use crate::config::{DelayLevels, FlushDiskType, MessageStoreConfig};
use crate::error::StoreError;
use crate::fs::StoreFs;
use crate::mapped_file::{AppendTo, FlushOutcome, MappedFile, MappedFileQueue, QueueOptions};

/// `topicQueueTable`: next queue offset per topic and queue id.
#[derive(Debug, Default)]
struct QueueOffsets(HashMap<String, HashMap<i32, i64>>);

impl QueueOffsets {
    fn get(&self, topic: &str, queue_id: i32) -> i64 {
        self.0
            .get(topic)
            .and_then(|q| q.get(&queue_id))
            .copied()
            .unwrap_or(0)
    }

    /// Returns the next offset and reserves `count` offsets from it.
    fn take(&mut self, topic: &str, queue_id: i32, count: i64) -> i64 {
        if let Some(next) = self.0.get_mut(topic).and_then(|q| q.get_mut(&queue_id)) {
            let first = *next;
            *next += count;
            return first;
        }
        self.set(topic, queue_id, count);
        0
    }

    fn set(&mut self, topic: &str, queue_id: i32, next: i64) {
        match self.0.get_mut(topic) {
            Some(queues) => {
                queues.insert(queue_id, next);
            }
            None => {
                self.0
                    .insert(topic.to_owned(), HashMap::from([(queue_id, next)]));
            }
        }
    }
}

/// Everything the put lock protects.
#[derive(Debug, Default)]
struct PutState {
    offsets: QueueOffsets,
    /// The file being appended to (the queue's last file), cached to skip the lookup.
    file: Option<Arc<MappedFile>>,
}

#[derive(Debug)]
pub struct CommitLog {
    queue: MappedFileQueue,
    file_size: u32,
    max_message_size: u32,
    delay_levels: DelayLevels,
    put: Mutex<PutState>,
    /// Appends are staged and reach the file by one `pwrite(2)` per commit rather than
    /// through the mapping: under SYNC_FLUSH, where every put waits for a sync (see
    /// `mapped_file/stage.rs`). Staged records become readable when committed, and the
    /// append signal is published then.
    write_through: bool,
    /// Wall-clock ms at which the current put took the put lock, 0 when free
    /// (`beginTimeInLock`, for OS_PAGECACHE_BUSY).
    lock_since: AtomicI64,
    signal: AppendSignal,
}

/// One record found by [`CommitLog::records_from`]: its offset and a zero-copy view.
#[derive(Debug, Clone)]
pub struct StoredRecord {
    pub offset: PhysicalOffset,
    pub bytes: Bytes,
}

impl CommitLog {
    /// Maps the CommitLog files of `config` (positions are "full" until recovery).
    pub fn open(config: &MessageStoreConfig, fs: Arc<dyn StoreFs>) -> Result<Self, StoreError> {
        config.validate()?;
        let write_through = config.flush_disk_type == FlushDiskType::SyncFlush;
        let options = QueueOptions {
            preallocate: true,
            warm: config.warm_mapped_file_enable,
            // Pre-faulting dirties pages through the mapping, which is what
            // write-through avoids (see `MappedFile::append_with`).
            prefault_ahead: !write_through,
            // Group commits then sync data blocks only, no extent conversions.
            write_ahead: write_through,
        };
        let queue = MappedFileQueue::open(
            &config.commit_log_dir(),
            config.mapped_file_size_commit_log,
            fs,
            options,
        )?;
        let max = PhysicalOffset(queue.max_offset() as i64);
        Ok(Self {
            queue,
            file_size: config.mapped_file_size_commit_log,
            max_message_size: config.max_message_size,
            delay_levels: config.delay_levels()?,
            put: Mutex::new(PutState::default()),
            write_through,
            lock_since: AtomicI64::new(0),
            signal: AppendSignal::new(max),
        })
    }

    /// How appends reach the files (see `write_through`).
    fn append_to(&self) -> AppendTo {
        if self.write_through {
            AppendTo::Stage
        } else {
            AppendTo::Mapping
        }
    }

    /// Commits what `file` has staged and publishes the new end to readers; a failed
    /// write trips the fence (nothing more may be acknowledged, see [`crate::fence`]).
    fn commit_file(&self, file: &MappedFile) -> std::io::Result<()> {
        file.commit(self.queue.fs()).inspect_err(|e| {
            self.fence().trip(format!(
                "writing staged records to {} failed: {e}",
                file.path().display()
            ));
        })?;
        self.signal.publish(self.max_offset());
        Ok(())
    }

    /// Makes every staged record readable (one `pwrite` of what the last file staged);
    /// without staging, nothing to do. Only the last file can hold staged bytes: a put
    /// that rolls to a new file commits the old one first.
    pub fn commit(&self) -> std::io::Result<()> {
        match self.queue.last() {
            Some(last) if self.write_through => self.commit_file(&last),
            _ => Ok(()),
        }
    }

    /// Tripped by the first failed write or flush (see [`crate::fence`]).
    pub fn fence(&self) -> &crate::fence::WriteFence {
        self.queue.fence()
    }

    pub fn mapped_files(&self) -> &MappedFileQueue {
        &self.queue
    }

    pub fn file_size(&self) -> u64 {
        u64::from(self.file_size)
    }

    /// Start of the oldest stored byte.
    pub fn min_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.queue.min_offset() as i64)
    }

    /// End of the written (readable) data.
    pub fn max_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.queue.max_offset() as i64)
    }

    /// End of the durable data.
    pub fn flushed_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.queue.flushed_offset() as i64)
    }

    /// Start of the file after the one holding `offset` (where a reader goes after a BLANK).
    pub fn roll_next_file(&self, offset: PhysicalOffset) -> PhysicalOffset {
        PhysicalOffset(self.queue.roll_next(offset.0.max(0) as u64) as i64)
    }

    /// Wake-ups on every append, for the dispatch service.
    pub fn append_signal(&self) -> &AppendSignal {
        &self.signal
    }

    fn locate(&self, offset: PhysicalOffset) -> Option<(Arc<MappedFile>, u32)> {
        let offset = u64::try_from(offset.0).ok()?;
        let file = self.queue.find(offset)?;
        let pos = (offset - file.from_offset()) as u32;
        Some((file, pos))
    }

    /// Zero-copy view of `len` written bytes at `offset`; `None` if deleted, not yet
    /// written, or straddling two files. The view keeps its file mapped.
    pub fn read(&self, offset: PhysicalOffset, len: usize) -> Option<Bytes> {
        let (file, pos) = self.locate(offset)?;
        file.read(pos, u32::try_from(len).ok()?)
    }

    /// View from `offset` to the end of the written data of the file holding it.
    pub fn read_to_file_end(&self, offset: PhysicalOffset) -> Option<Bytes> {
        let (file, pos) = self.locate(offset)?;
        file.read_to_end(pos)
    }

    /// The whole record at `offset` (view by message id): its size comes from its own
    /// TOTALSIZE, checked by decoding (without CRC).
    pub fn read_record(&self, offset: PhysicalOffset) -> Option<Bytes> {
        let window = self.read_to_file_end(offset)?;
        let len = decode(&window, false).ok()?.total_size();
        Some(window.slice(..len))
    }

    /// Records from `offset` (a record boundary) up to the current end, skipping BLANK
    /// fillers into the next file; stops at the first undecodable bytes.
    pub fn records_from(&self, offset: PhysicalOffset) -> RecordIter<'_> {
        RecordIter {
            log: self,
            next: offset,
            window: None,
        }
    }

    /// Flushes everything written (`least_pages == 0`) or only files with that many
    /// dirty pages. Staged records are committed first (readable before the sync) and
    /// are inside what the flush makes durable.
    pub fn flush(&self, least_pages: u32) -> std::io::Result<FlushOutcome> {
        self.commit()?;
        let outcome = self.queue.flush(least_pages)?;
        if self.write_through {
            // A put that rolled to a new file meanwhile left it staged; the flush
            // committed it.
            self.signal.publish(self.max_offset());
        }
        Ok(outcome)
    }

    /// Next queue offset of `topic`/`queue_id`.
    pub fn queue_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        QueueOffset(self.put.lock().offsets.get(topic, queue_id))
    }

    /// Recovery (`recoverTopicQueueTable`): sets the next queue offsets.
    pub fn set_queue_offsets(&self, entries: impl IntoIterator<Item = (String, i32, QueueOffset)>) {
        let mut state = self.put.lock();
        state.offsets.0.clear();
        for (topic, queue_id, next) in entries {
            state.offsets.set(&topic, queue_id, next.0);
        }
    }

    /// Forgets a deleted topic's queues (`removeQueueFromTopicQueueTable`), so its next
    /// message gets queue offset 0. Returns the CommitLog end taken under the same put
    /// lock: every record of the topic's old life lies below it, every new one at or
    /// above it.
    pub fn remove_topic(&self, topic: &str) -> PhysicalOffset {
        let mut state = self.put.lock();
        state.offsets.0.remove(topic);
        // Staged records of the old life must lie below the end returned. A failed
        // write fences the log: nothing is written after it any more.
        let _ = self.commit();
        self.max_offset()
    }

    /// Deletes CommitLog files from the oldest on while `expired` says so (never the
    /// file being written), at most `max`. Returns the deleted paths.
    pub fn delete_oldest_while(
        &self,
        max: usize,
        expired: impl FnMut(&MappedFile) -> bool,
    ) -> Vec<std::path::PathBuf> {
        self.queue.delete_oldest_while(max, expired)
    }

    pub(crate) fn shutdown(&self) {
        self.signal.close();
        self.queue.shutdown();
    }
}

impl crate::dispatch::CommitLogReader for CommitLog {
    fn min_offset(&self) -> PhysicalOffset {
        CommitLog::min_offset(self)
    }

    fn max_offset(&self) -> PhysicalOffset {
        CommitLog::max_offset(self)
    }

    fn file_size(&self) -> u64 {
        CommitLog::file_size(self)
    }

    fn read(&self, offset: PhysicalOffset, len: usize) -> Option<Bytes> {
        CommitLog::read(self, offset, len)
    }

    fn read_to_file_end(&self, offset: PhysicalOffset) -> Option<Bytes> {
        CommitLog::read_to_file_end(self, offset)
    }

    fn wait_beyond(&self, offset: PhysicalOffset, timeout: std::time::Duration) -> bool {
        self.signal.wait_beyond_timeout(offset, timeout)
    }

    fn readable_in_groups(&self) -> bool {
        // Staged records are published by `commit_file` / `flush`, once per commit.
        self.write_through
    }
}

/// Iterator behind [`CommitLog::records_from`].
#[derive(Debug)]
pub struct RecordIter<'a> {
    log: &'a CommitLog,
    next: PhysicalOffset,
    window: Option<Bytes>,
}

impl RecordIter<'_> {
    /// Where the next record would start (after the last yielded one).
    pub fn position(&self) -> PhysicalOffset {
        self.next
    }
}

impl Iterator for RecordIter<'_> {
    type Item = StoredRecord;

    fn next(&mut self) -> Option<StoredRecord> {
        loop {
            let window = match self.window.take() {
                Some(w) if !w.is_empty() => w,
                _ => self.log.read_to_file_end(self.next)?,
            };
            if window.is_empty() {
                return None;
            }
            match decode(&window, false) {
                Ok(view) => {
                    let len = view.total_size();
                    let record = StoredRecord {
                        offset: self.next,
                        bytes: window.slice(..len),
                    };
                    self.next = PhysicalOffset(self.next.0 + len as i64);
                    self.window = Some(window.slice(len..));
                    return Some(record);
                }
                Err(RecordError::Blank { .. }) => self.next = self.log.roll_next_file(self.next),
                Err(_) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod tests_support {
    pub(crate) use super::tests::{config, message};
}
#[cfg(test)]
mod tests_recover_hosts;
#[cfg(test)]
mod tests_truncate_live;
