//! The POP state of one (group, topic, queue): the pop cursor and the messages in flight.
//! Pure bookkeeping over queue offsets and wall-clock milliseconds, so its rules are tested
//! without a store.
//!
//! Invariants:
//! - every offset below `cursor` is either in flight or done (acked, filtered out, sent
//!   to the DLQ, or gone from the store); nothing at or past `cursor` was delivered;
//! - the committed offset is the lowest offset in flight, or `cursor` when none is, so a
//!   restart from it (5.x's `PopMessageProcessor` restarts from the consumer offset too)
//!   redelivers whatever was not acked and skips nothing.

use std::collections::BTreeMap;

use protocol::message::QueueOffset;

/// One message in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InFlight {
    /// The current delivery; handles carrying it ack the message.
    pub delivery: u64,
    /// The newest handle of this delivery; only it may change the invisible time.
    pub generation: u64,
    /// Deliveries so far, 1 on the first.
    pub attempt: u32,
    /// When the message becomes visible again, ms since the epoch.
    pub deadline_ms: i64,
    /// A dead-letter copy is being stored; nobody may pop or ack it meanwhile.
    pub forwarding: bool,
}

/// What an ack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckOutcome {
    Acked,
    /// Acked before, skipped, or below a committed offset: nothing to do.
    AlreadyDone,
    /// The handle belongs to an earlier delivery, or to an offset never delivered.
    Stale,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueState {
    cursor: QueueOffset,
    in_flight: BTreeMap<QueueOffset, InFlight>,
}

impl QueueState {
    /// A queue whose pops start at `start` (the committed offset).
    pub fn new(start: QueueOffset) -> Self {
        Self {
            cursor: start,
            in_flight: BTreeMap::new(),
        }
    }

    pub fn cursor(&self) -> QueueOffset {
        self.cursor
    }

    /// The offset to commit: the lowest one not acked.
    pub fn committed(&self) -> QueueOffset {
        self.in_flight.keys().next().copied().unwrap_or(self.cursor)
    }

    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    /// Offsets whose deadline passed at `now_ms`, lowest first.
    pub fn expired(&self, now_ms: i64) -> Vec<(QueueOffset, u32)> {
        self.in_flight
            .iter()
            .filter(|(_, e)| !e.forwarding && e.deadline_ms <= now_ms)
            .map(|(o, e)| (*o, e.attempt))
            .collect()
    }

    /// The earliest deadline still ahead (for how long a parked pop may wait).
    pub fn next_deadline(&self) -> Option<i64> {
        self.in_flight
            .values()
            .filter(|e| !e.forwarding)
            .map(|e| e.deadline_ms)
            .min()
    }

    /// FIFO: a queue with a message in flight and invisible is not popped (5.x blocks the
    /// whole queue of an orderly group until the message is acked or visible again).
    pub fn blocks_fifo(&self, now_ms: i64) -> bool {
        self.in_flight
            .values()
            .any(|e| e.forwarding || e.deadline_ms > now_ms)
    }

    /// Delivers the message at `offset` (new when at or past the cursor, else a
    /// redelivery of an in-flight one); the cursor moves past it. The attempt number.
    pub fn deliver(&mut self, offset: QueueOffset, id: u64, deadline_ms: i64) -> u32 {
        if offset >= self.cursor {
            self.cursor = QueueOffset(offset.get() + 1);
        }
        let entry = self.in_flight.entry(offset).or_insert(InFlight {
            delivery: id,
            generation: id,
            attempt: 0,
            deadline_ms,
            forwarding: false,
        });
        entry.attempt = entry.attempt.saturating_add(1);
        entry.delivery = id;
        entry.generation = id;
        entry.deadline_ms = deadline_ms;
        entry.forwarding = false;
        entry.attempt
    }

    /// Moves the cursor to `to` (messages skipped by the filter, or no longer stored);
    /// never backwards.
    pub fn advance(&mut self, to: QueueOffset) {
        if to > self.cursor {
            self.cursor = to;
        }
    }

    /// Acks by a handle of `delivery`.
    pub fn ack(&mut self, offset: QueueOffset, delivery: u64) -> AckOutcome {
        match self.in_flight.get(&offset) {
            Some(e) if e.delivery == delivery && !e.forwarding => {
                self.in_flight.remove(&offset);
                AckOutcome::Acked
            }
            Some(_) => AckOutcome::Stale,
            None if offset < self.cursor => AckOutcome::AlreadyDone,
            None => AckOutcome::Stale,
        }
    }

    /// Forgets an in-flight message (stored in the DLQ, or no longer in the store).
    pub fn remove(&mut self, offset: QueueOffset) {
        self.in_flight.remove(&offset);
    }

    /// ChangeInvisibleDuration by the newest handle (`generation`): a new handle
    /// generation and deadline; the delivery stays, so older handles still ack.
    pub fn change_invisible(
        &mut self,
        offset: QueueOffset,
        generation: u64,
        new_generation: u64,
        deadline_ms: i64,
    ) -> Option<&InFlight> {
        let e = self.in_flight.get_mut(&offset)?;
        if e.generation != generation || e.forwarding {
            return None;
        }
        e.generation = new_generation;
        e.deadline_ms = deadline_ms;
        Some(e)
    }

    /// Marks the message as being sent to the DLQ (by `delivery`'s handle, or `None` for
    /// the broker's own max-attempts rule); its attempt count.
    pub fn start_forwarding(&mut self, offset: QueueOffset, delivery: Option<u64>) -> Option<u32> {
        let e = self.in_flight.get_mut(&offset)?;
        if e.forwarding || delivery.is_some_and(|d| d != e.delivery) {
            return None;
        }
        e.forwarding = true;
        Some(e.attempt)
    }

    /// The DLQ put failed: the message is in flight again and visible at once.
    pub fn forwarding_failed(&mut self, offset: QueueOffset, now_ms: i64) {
        if let Some(e) = self.in_flight.get_mut(&offset) {
            e.forwarding = false;
            e.deadline_ms = now_ms;
        }
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
