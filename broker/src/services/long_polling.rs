//! Parked pulls (`PullRequestHoldService`): a pull that found nothing and may suspend
//! waits here, keyed by `topic@queueId`, until the store dispatches a message for that
//! queue that passes the pull's filter, or its hold time ends.

use std::collections::HashMap;

use parking_lot::Mutex;
use protocol::message::QueueOffset;
use tokio::sync::oneshot;

use crate::services::filter::MessageFilter;
use crate::services::filter::sql92::DecodedProperties;

struct Waiter {
    /// The offset the pull asked for; only messages at or past it wake it.
    offset: QueueOffset,
    filter: MessageFilter,
    wake: oneshot::Sender<()>,
}

#[derive(Default)]
pub struct PullHold {
    waiters: Mutex<HashMap<(String, i32), Vec<Waiter>>>,
}

impl PullHold {
    /// Parks a pull; the receiver completes when a matching message arrives. Dropping it
    /// (timeout) abandons the slot, which the next arrival on the queue cleans up.
    pub fn park(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        filter: MessageFilter,
    ) -> oneshot::Receiver<()> {
        let (wake, rx) = oneshot::channel();
        let mut w = self.waiters.lock();
        let list = w.entry((topic.to_owned(), queue_id)).or_default();
        list.retain(|waiter| !waiter.wake.is_closed());
        list.push(Waiter {
            offset,
            filter,
            wake,
        });
        rx
    }

    /// `notifyMessageArriving`: wakes the queue's waiters whose filter accepts the message
    /// dispatched at `offset`: its tags code, then (SQL92) its properties, decoded at most
    /// once for all the queue's waiters.
    pub fn on_arrival(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        tags_code: i64,
        properties: &str,
    ) {
        let mut w = self.waiters.lock();
        let key = (topic.to_owned(), queue_id);
        let Some(list) = w.get_mut(&key) else { return };
        let mut kept = Vec::with_capacity(list.len());
        let mut decoded: Option<DecodedProperties<'_>> = None;
        for waiter in list.drain(..) {
            if waiter.wake.is_closed() {
                continue;
            }
            let matches = offset >= waiter.offset
                && waiter.filter.matches_tags_code(tags_code)
                && (!waiter.filter.needs_properties()
                    || waiter.filter.matches_properties(
                        decoded.get_or_insert_with(|| DecodedProperties::parse(properties)),
                    ));
            if matches {
                let _ = waiter.wake.send(());
            } else {
                kept.push(waiter);
            }
        }
        if kept.is_empty() {
            w.remove(&key);
        } else {
            *list = kept;
        }
    }

    /// Wakes the parked pulls for which `ready(topic, queue_id, offset)` holds: the
    /// confirm offset advanced, which makes already-dispatched units visible without a new
    /// arrival. Pulls whose unit is still invisible stay parked.
    pub fn wake_where(&self, ready: impl Fn(&str, i32, QueueOffset) -> bool) {
        let mut w = self.waiters.lock();
        w.retain(|(topic, queue_id), list| {
            list.retain(|waiter| !waiter.wake.is_closed());
            let (wake, keep): (Vec<_>, Vec<_>) = list
                .drain(..)
                .partition(|waiter| ready(topic, *queue_id, waiter.offset));
            for waiter in wake {
                let _ = waiter.wake.send(());
            }
            *list = keep;
            !list.is_empty()
        });
    }

    pub fn parked(&self) -> usize {
        self.waiters
            .lock()
            .values()
            .map(|l| l.iter().filter(|w| !w.wake.is_closed()).count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::message::java_string_hash;

    #[test]
    fn wakes_matching_waiters_only() {
        let hold = PullHold::default();
        let tag_a = MessageFilter::parse(None, "A", &Default::default()).unwrap();
        let mut a = hold.park("T", 0, QueueOffset(5), tag_a);
        let mut all = hold.park("T", 0, QueueOffset(5), MessageFilter::All);
        let mut other_queue = hold.park("T", 1, QueueOffset(0), MessageFilter::All);
        assert_eq!(hold.parked(), 3);
        // An older message (below the requested offset) wakes nobody.
        hold.on_arrival("T", 0, QueueOffset(4), 0, "");
        assert!(all.try_recv().is_err());
        hold.on_arrival("T", 0, QueueOffset(5), i64::from(java_string_hash("B")), "");
        assert!(all.try_recv().is_ok());
        assert!(a.try_recv().is_err());
        hold.on_arrival("T", 0, QueueOffset(6), i64::from(java_string_hash("A")), "");
        assert!(a.try_recv().is_ok());
        assert!(other_queue.try_recv().is_err());
        drop(other_queue);
        hold.on_arrival("T", 1, QueueOffset(0), 0, "");
        assert_eq!(hold.parked(), 0);
    }

    #[test]
    fn sql92_waiters_wake_only_for_matching_properties() {
        let hold = PullHold::default();
        let sql = MessageFilter::parse(Some("SQL92"), "a > 5", &Default::default()).unwrap();
        let mut parked = hold.park("T", 0, QueueOffset(0), sql);
        let mut all = hold.park("T", 0, QueueOffset(0), MessageFilter::All);
        hold.on_arrival("T", 0, QueueOffset(0), 0, "a\u{1}3\u{2}b\u{1}x");
        assert!(all.try_recv().is_ok());
        assert!(parked.try_recv().is_err());
        hold.on_arrival("T", 0, QueueOffset(1), 0, "");
        assert!(parked.try_recv().is_err());
        hold.on_arrival("T", 0, QueueOffset(2), 0, "b\u{1}x\u{2}a\u{1}6");
        assert!(parked.try_recv().is_ok());
        assert_eq!(hold.parked(), 0);
    }

    #[test]
    fn wake_where_wakes_only_the_ready_waiters() {
        let hold = PullHold::default();
        let tag_a = MessageFilter::parse(None, "A", &Default::default()).unwrap();
        let mut a = hold.park("T", 0, QueueOffset(5), tag_a);
        let mut later = hold.park("T", 0, QueueOffset(9), MessageFilter::All);
        let mut other = hold.park("U", 3, QueueOffset(0), MessageFilter::All);
        hold.wake_where(|topic, _, offset| topic == "U" || offset < QueueOffset(6));
        assert!(a.try_recv().is_ok());
        assert!(other.try_recv().is_ok());
        assert!(later.try_recv().is_err());
        assert_eq!(hold.parked(), 1);
    }
}
