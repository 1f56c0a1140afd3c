//! Receipt handles: what a POP consumer hands back to ack a message or change its
//! invisible time (5.x `ReceiptHandle`, built from `ExtraInfoUtil`'s fields). The string is
//! opaque to clients; it names the queue entry (topic, queue, offset), when it was popped
//! and for how long, the broker that holds it, and two ids:
//!
//! - `delivery`: one per delivery of the message. Every handle of the same delivery acks
//!   it, so a handle replaced by ChangeInvisibleDuration still acks, as in 5.x; a handle
//!   of an earlier delivery (the message was redelivered since) does not.
//! - `generation`: one per handle. Only the newest handle of a delivery may change its
//!   invisible time again.
//!
//! Both come from one counter seeded by the wall clock at start, so ids issued before a
//! restart never match an entry created after it.

use std::fmt;

use protocol::message::QueueOffset;

const VERSION: &str = "p1";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptHandle {
    pub broker_name: String,
    pub topic: String,
    pub queue_id: i32,
    pub offset: QueueOffset,
    /// When the message was popped (or its invisible time last changed), ms since the epoch.
    pub pop_time_ms: i64,
    pub invisible_ms: i64,
    pub delivery: u64,
    pub generation: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("receipt handle is malformed: {0}")]
pub struct HandleError(&'static str);

impl ReceiptHandle {
    /// When the message becomes visible again unless acked, ms since the epoch.
    pub fn deadline_ms(&self) -> i64 {
        self.pop_time_ms.saturating_add(self.invisible_ms)
    }

    /// Parses a handle this broker (or one of its group) issued. Topic names may contain
    /// `|` (RocketMQ allows it), so the broker name is length-prefixed and the topic is
    /// the rest of the string.
    pub fn parse(text: &str) -> Result<Self, HandleError> {
        let mut parts = text.splitn(9, '|');
        let mut next = |what| parts.next().ok_or(HandleError(what));
        if next("version")? != VERSION {
            return Err(HandleError("unknown version"));
        }
        let queue_id = number(next("queue id")?, "queue id")?;
        let offset = QueueOffset(number(next("offset")?, "offset")?);
        let pop_time_ms = number(next("pop time")?, "pop time")?;
        let invisible_ms = number(next("invisible time")?, "invisible time")?;
        let delivery = number(next("delivery")?, "delivery")?;
        let generation = number(next("generation")?, "generation")?;
        let name_len: usize = number(next("broker name length")?, "broker name length")?;
        let rest = next("broker name and topic")?;
        if offset.get() < 0 || queue_id < 0 || invisible_ms < 0 {
            return Err(HandleError("negative field"));
        }
        let (broker_name, topic) = rest
            .split_at_checked(name_len)
            .ok_or(HandleError("broker name length"))?;
        if topic.is_empty() {
            return Err(HandleError("no topic"));
        }
        Ok(Self {
            broker_name: broker_name.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            offset,
            pop_time_ms,
            invisible_ms,
            delivery,
            generation,
        })
    }
}

fn number<T: std::str::FromStr>(text: &str, what: &'static str) -> Result<T, HandleError> {
    text.parse().map_err(|_| HandleError(what))
}

impl fmt::Display for ReceiptHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{VERSION}|{}|{}|{}|{}|{}|{}|{}|{}{}",
            self.queue_id,
            self.offset.get(),
            self.pop_time_ms,
            self.invisible_ms,
            self.delivery,
            self.generation,
            self.broker_name.len(),
            self.broker_name,
            self.topic
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn handle(broker: &str, topic: &str) -> ReceiptHandle {
        ReceiptHandle {
            broker_name: broker.into(),
            topic: topic.into(),
            queue_id: 3,
            offset: QueueOffset(42),
            pop_time_ms: 1_700_000_000_000,
            invisible_ms: 30_000,
            delivery: 7,
            generation: 9,
        }
    }

    #[test]
    fn round_trips_names_with_separators() {
        let h = handle("broker|a", "T|x|%RETRY%g");
        let text = h.to_string();
        assert_eq!(ReceiptHandle::parse(&text).unwrap(), h);
        assert_eq!(h.deadline_ms(), 1_700_000_030_000);
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            "",
            "p1",
            "p0|3|42|1|1|1|1|1|bT",
            "p1|x|42|1|1|1|1|1|bT",
            "p1|3|-1|1|1|1|1|1|bT",
            "p1|3|42|1|1|1|1|9|bT",
            "p1|3|42|1|1|1|1|1|b",
            "p1|3|42|1|1|1|1|1|\u{e9}T",
        ] {
            assert!(ReceiptHandle::parse(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn any_handle_round_trips(
            broker in "[a-z|_-]{0,12}",
            topic in "[%|a-zA-Z0-9_-]{1,20}",
            queue_id in 0i32..1024,
            offset in 0i64..i64::MAX,
            pop in any::<i64>(),
            invisible in 0i64..i64::MAX,
            delivery in any::<u64>(),
            generation in any::<u64>(),
        ) {
            let h = ReceiptHandle {
                broker_name: broker, topic, queue_id, offset: QueueOffset(offset),
                pop_time_ms: pop, invisible_ms: invisible, delivery, generation,
            };
            prop_assert_eq!(ReceiptHandle::parse(&h.to_string()).unwrap(), h);
        }

        #[test]
        fn parse_never_panics(text in ".{0,64}") {
            let _ = ReceiptHandle::parse(&text);
        }
    }
}
