//! Test double of the CommitLog: fixed-size "files" in memory, filled with records encoded
//! by the protocol codec, BLANK fillers at file ends, per-queue offsets like
//! `CommitLog.topicQueueTable`, and deletable oldest files.

use std::collections::HashMap;
use std::net::SocketAddr;

use bytes::Bytes;
use parking_lot::Mutex;
use protocol::message::{
    BLANK_MAGIC_CODE, MessageRecord, MessageSysFlag, PhysicalOffset, QueueOffset, StoreStamp,
    TransactionType,
};

use super::CommitLogReader;

pub struct TestMessage<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub properties: String,
    pub transaction: TransactionType,
    pub body: &'a [u8],
    pub store_timestamp: i64,
}

/// `TAGS`/`KEYS`/`UNIQ_KEY` properties string (omitting `None`s).
pub fn props(tags: Option<&str>, keys: Option<&str>, uniq: Option<&str>) -> String {
    let mut out = String::new();
    for (name, value) in [("TAGS", tags), ("KEYS", keys), ("UNIQ_KEY", uniq)] {
        if let Some(v) = value {
            out.push_str(name);
            out.push('\u{1}');
            out.push_str(v);
            out.push('\u{2}');
        }
    }
    out
}

pub struct MemoryLog {
    file_size: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (start offset, bytes written so far)
    files: Vec<(i64, Vec<u8>)>,
    queue_offsets: HashMap<(String, i32), i64>,
}

impl MemoryLog {
    pub fn new(file_size: usize) -> Self {
        Self {
            file_size,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Appends a record, returning where it went and its queue offset.
    pub fn append(&self, m: &TestMessage<'_>) -> (PhysicalOffset, QueueOffset) {
        let host: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let record = MessageRecord {
            queue_id: m.queue_id,
            flag: 0,
            sys_flag: MessageSysFlag(0).with_transaction_type(m.transaction),
            born_timestamp: m.store_timestamp - 1,
            born_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: PhysicalOffset(0),
            body: m.body,
            body_crc: None,
            topic: m.topic,
            properties: &m.properties,
        };
        let len = record.encoded_len();
        let mut inner = self.inner.lock();
        let need_new = match inner.files.last() {
            None => true,
            Some((_, bytes)) => len + 8 > self.file_size - bytes.len(),
        };
        if need_new {
            let next_from = match inner.files.last_mut() {
                None => 0,
                Some((from, bytes)) => {
                    let blank = self.file_size - bytes.len();
                    bytes.extend_from_slice(&(blank as i32).to_be_bytes());
                    bytes.extend_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
                    bytes.resize(self.file_size, 0);
                    *from + self.file_size as i64
                }
            };
            inner
                .files
                .push((next_from, Vec::with_capacity(self.file_size)));
        }
        let advances = matches!(
            m.transaction,
            TransactionType::Not | TransactionType::Commit
        );
        let counter = inner
            .queue_offsets
            .entry((m.topic.to_string(), m.queue_id))
            .or_insert(0);
        let queue_offset = if advances { *counter } else { 0 };
        if advances {
            *counter += 1;
        }
        let (from, bytes) = inner.files.last_mut().unwrap();
        let physical = PhysicalOffset(*from + bytes.len() as i64);
        let stamp = StoreStamp {
            queue_offset: QueueOffset(queue_offset),
            physical_offset: physical,
            store_timestamp: m.store_timestamp,
            store_host: host,
        };
        bytes.extend_from_slice(&record.encode_to_vec(&stamp).unwrap());
        (physical, QueueOffset(queue_offset))
    }

    /// Drops every file that ends at or below `offset` (retention).
    /// Drops `topic`'s queue offsets (as `CommitLog::remove_topic`) and returns the log end
    /// taken under the same lock.
    pub fn forget_topic(&self, topic: &str) -> PhysicalOffset {
        let mut inner = self.inner.lock();
        inner.queue_offsets.retain(|(t, _), _| t != topic);
        PhysicalOffset(
            inner
                .files
                .last()
                .map_or(0, |(from, b)| from + b.len() as i64),
        )
    }

    pub fn delete_files_below(&self, offset: PhysicalOffset) {
        let size = self.file_size as i64;
        self.inner
            .lock()
            .files
            .retain(|(from, _)| from + size > offset.0);
    }

    /// Cuts the log at `end` (a record boundary), like CommitLog recovery would.
    pub fn truncate(&self, end: PhysicalOffset) {
        let size = self.file_size as i64;
        let mut inner = self.inner.lock();
        inner
            .files
            .retain(|(from, _)| *from < end.0 || (*from == end.0 && end.0 == 0));
        if let Some((from, bytes)) = inner.files.last_mut() {
            bytes.truncate(((end.0 - *from).min(size)) as usize);
        }
    }

    /// Queue offsets continue from `next` for that queue (topicQueueTable rebuild).
    pub fn set_queue_offset(&self, topic: &str, queue_id: i32, next: QueueOffset) {
        self.inner
            .lock()
            .queue_offsets
            .insert((topic.to_string(), queue_id), next.0);
    }
}

impl CommitLogReader for MemoryLog {
    fn min_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.inner.lock().files.first().map_or(0, |f| f.0))
    }

    fn max_offset(&self) -> PhysicalOffset {
        let inner = self.inner.lock();
        PhysicalOffset(
            inner
                .files
                .last()
                .map_or(0, |(from, b)| from + b.len() as i64),
        )
    }

    fn file_size(&self) -> u64 {
        self.file_size as u64
    }

    fn read(&self, offset: PhysicalOffset, len: usize) -> Option<Bytes> {
        let window = self.read_to_file_end(offset)?;
        (len <= window.len()).then(|| window.slice(..len))
    }

    fn read_to_file_end(&self, offset: PhysicalOffset) -> Option<Bytes> {
        let inner = self.inner.lock();
        let (from, bytes) = inner
            .files
            .iter()
            .find(|(from, _)| *from <= offset.0 && offset.0 < from + self.file_size as i64)?;
        let pos = (offset.0 - from) as usize;
        (pos < bytes.len()).then(|| Bytes::copy_from_slice(&bytes[pos..]))
    }
}
