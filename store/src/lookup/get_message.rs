//! `DefaultMessageStore.getMessage` of RocketMQ 4.9: statuses, next-begin-offset
//! correction, tag filtering on ConsumeQueue units and batch limits.

use bytes::Bytes;
use protocol::message::{PhysicalOffset, QueueOffset};

use super::MessageFilter;
use crate::config::BrokerRole;
use crate::consume_queue::UNIT_SIZE;
use crate::dispatch::{Dispatcher, roll_next_file};

/// `GetMessageStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GetMessageStatus {
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

impl GetMessageStatus {
    /// RocketMQ's enum constant name (the remark of a pull answer).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Found => "FOUND",
            Self::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            Self::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            Self::OffsetFoundNull => "OFFSET_FOUND_NULL",
            Self::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            Self::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            Self::OffsetTooSmall => "OFFSET_TOO_SMALL",
            Self::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            Self::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

#[derive(Debug, Clone)]
pub struct GetMessageResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: QueueOffset,
    pub min_offset: QueueOffset,
    pub max_offset: QueueOffset,
    /// Whole records, each a zero-copy view into the CommitLog mapping.
    pub messages: Vec<Bytes>,
    /// Queue offset of each entry of `messages`.
    pub queue_offsets: Vec<QueueOffset>,
    pub buffer_total_size: usize,
    /// The consumer lags more than `accessMessageInMemoryMaxRatio` % of RAM behind.
    pub suggest_pulling_from_slave: bool,
}

impl GetMessageResult {
    pub(crate) fn new(
        status: GetMessageStatus,
        next: QueueOffset,
        min: QueueOffset,
        max: QueueOffset,
    ) -> Self {
        Self {
            status,
            next_begin_offset: next,
            min_offset: min,
            max_offset: max,
            messages: Vec::new(),
            queue_offsets: Vec::new(),
            buffer_total_size: 0,
            suggest_pulling_from_slave: false,
        }
    }
}

impl Dispatcher {
    /// Reads up to `max_count` messages of `topic`/`queue_id` from `offset`. `_group` is
    /// accepted for API parity with RocketMQ (it only feeds statistics there).
    pub fn get_message(
        &self,
        _group: &str,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_count: usize,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult {
        use GetMessageStatus::*;
        let shared = &self.shared;
        let config = &shared.config;
        // nextOffsetCorrection: a slave without offsetCheckInSlave keeps the asked offset.
        let correct = |to: QueueOffset| {
            if config.broker_role == BrokerRole::Slave {
                offset
            } else {
                to
            }
        };
        let Some(queue) = shared.consume_queues.find(topic, queue_id) else {
            return GetMessageResult::new(
                NoMatchedLogicQueue,
                correct(QueueOffset(0)),
                QueueOffset(0),
                QueueOffset(0),
            );
        };
        let min = queue.min_offset();
        let max = queue.max_offset();
        let result = |status, next| GetMessageResult::new(status, next, min, max);
        if max.0 == 0 {
            return result(NoMessageInQueue, correct(QueueOffset(0)));
        }
        if offset < min {
            return result(OffsetTooSmall, correct(min));
        }
        if offset == max {
            return result(OffsetOverflowOne, correct(offset));
        }
        if offset > max {
            // RocketMQ 4.9: back to 0 when the queue still starts at 0, else to the max.
            let to = if min.0 == 0 { min } else { max };
            return result(OffsetOverflowBadly, correct(to));
        }
        let Some(window) = queue.window_from(offset) else {
            // ConsumeQueue.rollNextFile: first offset of the next file.
            let units_per_file = (queue.file_size() / UNIT_SIZE) as i64;
            let next_file = QueueOffset((offset.0 / units_per_file + 1) * units_per_file);
            return result(OffsetFoundNull, correct(next_file));
        };

        let log = &*shared.commit_log;
        let max_physical = log.max_offset();
        let memory_budget = memory_budget(config);
        // `maxFilterMessageCount`: 16,000 bytes of units or `maxMsgNums` units, here no
        // more than `maxPullScanUnits`, so a pull's filtering work is bounded.
        let max_scan = (16_000 / UNIT_SIZE)
            .max(max_count)
            .min(config.max_pull_scan_units.max(1) as usize);
        let mut out = result(NoMatchedMessage, offset);
        let mut next_file_start: Option<PhysicalOffset> = None;
        let mut scanned = 0usize;
        let mut last_physical = PhysicalOffset(0);
        let visible_limit = shared
            .visible_limit
            .load(std::sync::atomic::Ordering::Acquire);
        let mut hidden = false;
        for (queue_offset, unit) in window.iter() {
            if scanned >= max_scan {
                break;
            }
            if unit.physical_offset.0.saturating_add(i64::from(unit.size)) > visible_limit {
                // Not yet on the in-sync replicas: a failover could take it back.
                hidden = true;
                break;
            }
            last_physical = unit.physical_offset;
            if next_file_start.is_some_and(|start| unit.physical_offset < start) {
                scanned += 1;
                continue;
            }
            let in_disk = max_physical.0 - unit.physical_offset.0 > memory_budget;
            if batch_full(config, unit.size, max_count, &out, in_disk) {
                break;
            }
            scanned += 1;
            if filter.is_some_and(|f| !f.matches_consume_queue(unit.tags_code)) {
                continue;
            }
            let Some(record) = usize::try_from(unit.size)
                .ok()
                .and_then(|len| log.read(unit.physical_offset, len))
            else {
                if out.buffer_total_size == 0 {
                    out.status = MessageWasRemoving;
                }
                next_file_start = Some(roll_next_file(unit.physical_offset, log.file_size()));
                continue;
            };
            if filter.is_some_and(|f| !f.matches_commit_log(&record)) {
                if out.buffer_total_size == 0 {
                    out.status = NoMatchedMessage;
                }
                continue;
            }
            out.buffer_total_size += record.len();
            out.messages.push(record);
            out.queue_offsets.push(queue_offset);
            out.status = Found;
            next_file_start = None;
        }
        out.next_begin_offset = QueueOffset(offset.0 + scanned as i64);
        if hidden && scanned == 0 {
            // Nothing visible yet: answer as "no new message" so the pull is held.
            out.status = OffsetOverflowOne;
        }
        out.suggest_pulling_from_slave = max_physical.0 - last_physical.0 > memory_budget;
        out
    }
}

/// `isTheBatchFull`.
pub(crate) fn batch_full(
    config: &crate::config::MessageStoreConfig,
    size: i32,
    max_count: usize,
    out: &GetMessageResult,
    in_disk: bool,
) -> bool {
    let count = out.messages.len();
    if out.buffer_total_size == 0 || count == 0 {
        return false;
    }
    if max_count <= count {
        return true;
    }
    let (max_bytes, max_msgs) = if in_disk {
        (
            config.max_transfer_bytes_on_message_in_disk,
            config.max_transfer_count_on_message_in_disk,
        )
    } else {
        (
            config.max_transfer_bytes_on_message_in_memory,
            config.max_transfer_count_on_message_in_memory,
        )
    };
    out.buffer_total_size as u64 + u64::try_from(size).unwrap_or(0) > u64::from(max_bytes)
        || count as u64 > u64::from(max_msgs).saturating_sub(1)
}

/// `accessMessageInMemoryMaxRatio` % of the RAM: a consumer further behind the CommitLog
/// end than this reads from disk (`checkInDiskByCommitOffset`).
pub(crate) fn memory_budget(config: &crate::config::MessageStoreConfig) -> i64 {
    physical_memory_bytes() / 100 * i64::from(config.access_message_in_memory_max_ratio)
}

/// Total RAM (`StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE`), read once.
fn physical_memory_bytes() -> i64 {
    static TOTAL: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
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
    })
}
