//! Hook through which the broker's long polling learns about newly dispatched messages
//! (`MessageArrivingListener`, called from `ReputMessageService.doReput`).

use protocol::message::QueueOffset;

/// One message that just became readable in a ConsumeQueue.
#[derive(Debug, Clone, Copy)]
pub struct ArrivedMessage<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    /// The queue's max offset after this message (its queue offset + 1), which is what
    /// RocketMQ passes to `arriving` and what parked pulls compare against.
    pub max_offset: QueueOffset,
    pub tags_code: i64,
    pub store_timestamp: i64,
    /// Raw properties string (U+0001/U+0002 separated), for SQL92 filters.
    pub properties: &'a str,
}

/// Called on the reput thread after each dispatched message; must be quick and must not
/// block (hand work to another task).
pub trait MessageArrivalListener: Send + Sync {
    fn arriving(&self, message: &ArrivedMessage<'_>);
}
