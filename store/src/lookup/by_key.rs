//! `QUERY_MESSAGE` support (`DefaultMessageStore.queryMessage`): candidates from the
//! IndexFiles, each checked against the real record.

use bytes::Bytes;
use protocol::message::{PhysicalOffset, decode};

use protocol::message::properties::{self, UNIQ_KEY};

use crate::dispatch::Dispatcher;

#[derive(Debug, Clone, Default)]
pub struct QueryMessageResult {
    /// Whole records, oldest first, zero-copy views into the CommitLog.
    pub messages: Vec<Bytes>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phy_offset: PhysicalOffset,
}

impl Dispatcher {
    /// Messages of `topic` carrying `key` (in `KEYS` or as `UNIQ_KEY`) stored within
    /// `[begin, end]`, at most `min(max_num, maxMsgsNumBatch)`. Index candidates that are
    /// hash collisions or whose record is gone are dropped.
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryMessageResult {
        let candidates = self.shared.index.query(topic, key, max_num, begin, end);
        let mut offsets = candidates.offsets;
        offsets.sort_unstable();
        offsets.dedup();
        let mut result = QueryMessageResult {
            messages: Vec::new(),
            index_last_update_timestamp: candidates.index_last_update_timestamp,
            index_last_update_phy_offset: candidates.index_last_update_phy_offset,
        };
        for offset in offsets {
            if let Some(record) = self.record_with_key(offset, topic, key) {
                result.messages.push(record);
            }
        }
        result
    }

    /// The record at `offset` (`lookMessageByOffset` / VIEW_MESSAGE_BY_ID), whole.
    pub fn record_at(&self, offset: PhysicalOffset) -> Option<Bytes> {
        let log = &*self.shared.commit_log;
        let head = log.read(offset, 4)?;
        let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let record = log.read(offset, usize::try_from(size).ok()?)?;
        decode(&record, false).ok()?;
        Some(record)
    }

    fn record_with_key(&self, offset: PhysicalOffset, topic: &str, key: &str) -> Option<Bytes> {
        let record = self.record_at(offset)?;
        let view = decode(&record, false).ok()?;
        let props = view.properties();
        let matches = view.topic() == topic
            && (properties::find(props, UNIQ_KEY) == Some(key)
                || properties::keys(props).any(|k| k == key));
        matches.then_some(record)
    }
}
