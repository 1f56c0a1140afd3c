//! Time-based lookups over a ConsumeQueue: the store time of a queue entry, the earliest
//! store time of a queue, and the queue offset for a timestamp (RocketMQ 4.9 rules).

use protocol::message::{PhysicalOffset, QueueOffset, decode};

use crate::consume_queue::{ConsumeQueue, UNIT_SIZE_I64};
use crate::dispatch::Dispatcher;

impl Dispatcher {
    /// STORETIMESTAMP of the record at `offset` of the queue (`getMessageStoreTimeStamp`);
    /// `None` when the entry or its record is gone.
    pub fn message_store_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> Option<i64> {
        let queue = self.shared.consume_queues.find(topic, queue_id)?;
        self.unit_store_timestamp(&queue, offset)
    }

    /// Store time of the queue's first stored message (`getEarliestMessageTime(topic, queueId)`).
    pub fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let queue = self.shared.consume_queues.find(topic, queue_id)?;
        self.unit_store_timestamp(&queue, queue.min_offset())
    }

    /// `ConsumeQueue.getOffsetInQueueByTime` of RocketMQ 4.9, rule for rule, because
    /// clients resetting offsets by time expect exactly its answers:
    ///
    /// - only ONE ConsumeQueue file is searched: the first whose mtime is at or after
    ///   `timestamp`, else the last one;
    /// - a unit with exactly that store time wins (whichever one the bisection hits first
    ///   when several share it, not necessarily the lowest);
    /// - otherwise the closer of the two neighbours in time, the older one on a tie;
    /// - before the file's first message: that message's offset; after its last message:
    ///   the LAST message's offset (max − 1 on the newest file), not the max offset;
    /// - units whose record is below the CommitLog minimum count as older, without a time;
    /// - an unreadable record aborts the search with 0, as does an unknown or empty queue.
    ///
    /// RocketMQ 5 changed this to a lower-bound search; this is deliberately the 4.9 rule.
    pub fn offset_in_queue_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
    ) -> QueueOffset {
        let Some(queue) = self.shared.consume_queues.find(topic, queue_id) else {
            return QueueOffset(0);
        };
        let Some(file) = queue.file_by_time(timestamp) else {
            return QueueOffset(0);
        };
        let unit = UNIT_SIZE_I64;
        let from = file.from();
        let min_physical = self.shared.commit_log.min_offset();
        // Byte positions inside the file, as in Java (the 4.9 code works on positions).
        let mut low = (queue.min_logic_byte() - from).max(0);
        let mut high = file.wrote() as i64 - unit;
        let (mut left, mut right) = (-1i64, -1i64);
        let (mut left_time, mut right_time) = (None, None);
        let mut target = None;
        while high >= low {
            let mid = (low + high) / (2 * unit) * unit;
            let Some(entry) = usize::try_from(mid).ok().and_then(|pos| file.unit_at(pos)) else {
                return QueueOffset(0);
            };
            if entry.physical_offset < min_physical {
                low = mid + unit;
                left = mid;
                continue;
            }
            let Some(store_time) = self.record_store_timestamp(entry.physical_offset, entry.size)
            else {
                return QueueOffset(0);
            };
            match store_time.cmp(&timestamp) {
                std::cmp::Ordering::Equal => {
                    target = Some(mid);
                    break;
                }
                std::cmp::Ordering::Greater => {
                    high = mid - unit;
                    right = mid;
                    right_time = Some(store_time);
                }
                std::cmp::Ordering::Less => {
                    low = mid + unit;
                    left = mid;
                    left_time = Some(store_time);
                }
            }
        }
        let position = match (target, left_time, right_time) {
            (Some(t), _, _) => t,
            (None, None, _) => right,
            (None, Some(_), None) => left,
            (None, Some(l), Some(r)) => {
                if timestamp.abs_diff(l) > timestamp.abs_diff(r) {
                    right
                } else {
                    left
                }
            }
        };
        // Java's truncating division, also for the "-1" of an empty file.
        QueueOffset((from + position) / unit)
    }

    fn unit_store_timestamp(&self, queue: &ConsumeQueue, offset: QueueOffset) -> Option<i64> {
        let unit = queue.get(offset)?;
        if unit.is_pre_blank() {
            return None;
        }
        self.record_store_timestamp(unit.physical_offset, unit.size)
    }

    /// `CommitLog.pickupStoreTimestamp`.
    pub(crate) fn record_store_timestamp(&self, offset: PhysicalOffset, size: i32) -> Option<i64> {
        let bytes = self
            .shared
            .commit_log
            .read(offset, usize::try_from(size).ok()?)?;
        decode(&bytes, false).ok().map(|v| v.store_timestamp())
    }
}
