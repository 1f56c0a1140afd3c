//! Time-based lookups over a ConsumeQueue: the store time of a queue entry, the earliest
//! store time of a queue, and the queue offset for a timestamp.

use protocol::message::{PhysicalOffset, QueueOffset, decode};

use crate::consume_queue::ConsumeQueue;
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

    /// The first queue offset whose message was stored at or after `timestamp`
    /// (`getOffsetInQueueByTime`): the max offset when every message is older, the min
    /// offset when every message is newer, 0 for an unknown or empty queue. Store times
    /// are non-decreasing along a queue, so this is a binary search over the units.
    ///
    /// RocketMQ 4.9 picks within one file chosen by file mtime and returns whichever
    /// neighbour is closer in time; the lower-bound rule here is RocketMQ 5's and never
    /// skips a message stored at or after `timestamp`.
    pub fn offset_in_queue_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
    ) -> QueueOffset {
        let Some(queue) = self.shared.consume_queues.find(topic, queue_id) else {
            return QueueOffset(0);
        };
        let (mut low, mut high) = (queue.min_offset().0, queue.max_offset().0);
        while low < high {
            let mid = low + (high - low) / 2;
            match self.unit_store_timestamp(&queue, QueueOffset(mid)) {
                Some(t) if t >= timestamp => high = mid,
                // Unreadable (removed) entries count as old.
                _ => low = mid + 1,
            }
        }
        QueueOffset(low)
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
