//! POP consumption, the way RocketMQ 5.x consumers (gRPC `ReceiveMessage`, `AckMessage`,
//! `ChangeInvisibleDuration`) consume: the broker, not the client, owns the consume
//! position. Mirrors 5.x's `PopMessageProcessor`, `AckMessageProcessor` and
//! `ChangeInvisibleTimeProcessor`, with the in-flight state in memory and the consume
//! progress in the ordinary consumer offsets:
//!
//! - per (group, topic, queue) a pop cursor and the messages in flight ([`queue`]);
//! - a pop takes up to N messages from the topic's queues, starting at a rotating queue,
//!   redeliveries (invisible time passed) first; each message gets a deadline, an attempt
//!   number and a receipt handle ([`handle`]);
//! - the committed offset of the queue is its lowest unacked offset, written through
//!   [`crate::services::offsets::OffsetManager`] like a 4.x commit, so it is persisted and
//!   synced to slaves; after a restart or a failover the new state starts there and
//!   redelivers what was in flight (5.x keeps its checkpoints in a revive topic; here a
//!   crash costs duplicates, never losses);
//! - a message delivered `retryMaxTimes + 1` times (5.x's default of 16 retries) is
//!   moved to `%DLQ%<group>` through [`Broker::put`] when next due;
//! - FIFO groups (`consumeMessageOrderly`) do not get a queue while a message of it is in
//!   flight and invisible (5.x locks the whole queue of an orderly group too);
//! - TAG and SQL92 filters are those of 4.x pulls; filtered-out messages move the cursor
//!   and count as acked;
//! - a pop with nothing to deliver parks on the pull hold ([`crate::services::long_polling`])
//!   until a message arrives, a deadline passes, or its poll time ends.

mod filter;
pub mod handle;
mod queue;
mod service;
mod settle;
mod types;

pub use handle::{HandleError, ReceiptHandle};
pub use service::PopService;
pub use types::{PopError, PopRequest, Popped};

/// 5.x's `PopMessageProcessor` refuses more than 32 messages per pop.
pub const MAX_POP_BATCH: usize = 32;

/// 5.x's longest invisible time (its proxy's `maxInvisibleTimeMills`, 12 hours).
pub const MAX_INVISIBLE_MS: i64 = 12 * 3600 * 1000;
