//! Transactions decided recently: the broker's guard against storing one transaction's
//! message twice, keyed by what the broker itself stored.
//!
//! RocketMQ 4.9 can deliver a transactional message twice: a check-back re-appends the
//! half message under a new offset, so a late commit of the original and a commit
//! answering the check-back both store a copy. Here a transaction is identified by its
//! original half message's CommitLog offset (every copy names it in
//! `TRAN_ORIGIN_OFFSET`), its producer group and its real topic ([`TransactionId`]),
//! never by a property the client chose; the first decision for an identity wins and
//! later ones only write their op record.
//!
//! # Bounds
//!
//! An entry is a fixed-size [`TransactionId`] and a time, whatever the message carries:
//! [`ENTRY_BYTES`] each, at most `transactionDecisionMaxEntries` of them. An entry is
//! kept for the retention the checker's schedule needs (a decided transaction's last
//! copy is checked at most `transactionCheckMax` rounds after its birth, and answered
//! shortly after), then dropped; when the bound forces an earlier drop it is counted.
//! Past either, a repeated commit is still caught through the real topic's index
//! ([`super::bridge::committed_in_index`]).
//!
//! # After a restart
//!
//! The op queue is the durable record of decisions (its body is the decided half queue
//! offset, as 4.9 writes it). Before the first decision or check round after a start,
//! [`super::recovery`] reads the op records of the retention window and enters the
//! identity of each half they name.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use protocol::message::PhysicalOffset;

/// One transaction: its original half's CommitLog offset and a digest of its producer
/// group and real topic. The digest keeps the entry's size independent of the names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransactionId {
    pub origin: PhysicalOffset,
    owner: u64,
}

impl TransactionId {
    pub fn new(origin: PhysicalOffset, producer_group: &str, real_topic: &str) -> Self {
        // Deterministic within the process (the map never leaves it).
        let mut h = DefaultHasher::new();
        producer_group.hash(&mut h);
        real_topic.hash(&mut h);
        Self {
            origin,
            owner: h.finish(),
        }
    }
}

/// Bytes one entry takes: its map slot (key, time, control byte) and its place in the
/// expiry order. Hash maps keep up to twice their length in slots; [`Decisions::bytes`]
/// counts the capacity actually held.
pub const ENTRY_BYTES: usize = std::mem::size_of::<(TransactionId, Instant)>()
    + 1
    + std::mem::size_of::<(Instant, TransactionId)>();

#[derive(Debug)]
pub struct Decisions {
    inner: Mutex<Inner>,
    max_entries: usize,
    retention: Duration,
}

#[derive(Debug, Default)]
struct Inner {
    decided: HashMap<TransactionId, Instant>,
    order: VecDeque<(Instant, TransactionId)>,
}

/// What [`Decisions::decide`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// The first decision: recorded.
    First,
    /// Decided before; nothing is stored again.
    Already,
}

impl Decisions {
    pub fn new(max_entries: usize, retention: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_entries: max_entries.max(1),
            retention,
        }
    }

    /// Records a decision for `id` unless one exists. The second value counts entries
    /// dropped before their retention ended to make room.
    pub fn decide(&self, id: TransactionId, now: Instant) -> (Decided, u64) {
        let mut inner = self.inner.lock();
        inner.expire(now, self.retention);
        if inner.decided.contains_key(&id) {
            return (Decided::Already, 0);
        }
        let evicted = inner.make_room(self.max_entries);
        inner.decided.insert(id, now);
        inner.order.push_back((now, id));
        (Decided::First, evicted)
    }

    /// Enters a decision read back from the op queue, made at `at`; older than the
    /// retention, it is not kept. Returns the entries evicted to make room.
    pub fn restore(&self, id: TransactionId, at: Instant, now: Instant) -> u64 {
        if now.saturating_duration_since(at) > self.retention {
            return 0;
        }
        let mut inner = self.inner.lock();
        if inner.decided.contains_key(&id) {
            return 0;
        }
        let evicted = inner.make_room(self.max_entries);
        inner.decided.insert(id, at);
        // Op records are read in order, so `at` rarely goes back; keep the queue sorted
        // anyway, expiry pops from its front.
        let at_pos = inner.order.partition_point(|(t, _)| *t <= at);
        inner.order.insert(at_pos, (at, id));
        evicted
    }

    /// Forgets a decision whose record could not be stored, so a retry may decide again.
    pub fn undo(&self, id: TransactionId) {
        self.inner.lock().decided.remove(&id);
    }

    pub fn contains(&self, id: TransactionId, now: Instant) -> bool {
        let mut inner = self.inner.lock();
        inner.expire(now, self.retention);
        inner.decided.contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.inner.lock().decided.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held for the entries, by the capacity of the map and the queue.
    pub fn bytes(&self) -> usize {
        let inner = self.inner.lock();
        inner.decided.capacity() * (std::mem::size_of::<(TransactionId, Instant)>() + 1)
            + inner.order.capacity() * std::mem::size_of::<(Instant, TransactionId)>()
    }

    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    pub fn retention(&self) -> Duration {
        self.retention
    }
}

impl Inner {
    fn expire(&mut self, now: Instant, retention: Duration) {
        let before = self.decided.len();
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) <= retention {
                break;
            }
            if let Some((at, id)) = self.order.pop_front() {
                self.forget(at, id);
            }
        }
        if before != self.decided.len() {
            self.shrink();
        }
    }

    /// Drops the oldest entries until one more fits; returns how many.
    fn make_room(&mut self, max_entries: usize) -> u64 {
        let mut evicted = 0;
        while self.decided.len() >= max_entries {
            let Some((at, id)) = self.order.pop_front() else {
                break;
            };
            if self.forget(at, id) {
                evicted += 1;
            }
        }
        evicted
    }

    /// Removes `id` when its entry is the one queued at `at` (a key undone and decided
    /// again has a newer entry of its own).
    fn forget(&mut self, at: Instant, id: TransactionId) -> bool {
        if self.decided.get(&id).is_some_and(|t| *t == at) {
            self.decided.remove(&id);
            true
        } else {
            false
        }
    }

    /// Gives memory back once the entries fill a quarter of what is held.
    fn shrink(&mut self) {
        if self.decided.capacity() > 64 && self.decided.len() * 4 < self.decided.capacity() {
            self.decided.shrink_to(self.decided.len() * 2);
        }
        if self.order.capacity() > 64 && self.order.len() * 4 < self.order.capacity() {
            self.order.shrink_to(self.order.len() * 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(origin: i64) -> TransactionId {
        TransactionId::new(PhysicalOffset(origin), "pg", "T")
    }

    #[test]
    fn first_decision_wins_until_it_expires() {
        let d = Decisions::new(10, Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(d.decide(id(1), t0), (Decided::First, 0));
        assert_eq!(d.decide(id(1), t0), (Decided::Already, 0));
        d.undo(id(1));
        assert_eq!(d.decide(id(1), t0).0, Decided::First);
        let later = t0 + Duration::from_secs(11);
        assert_eq!(d.decide(id(2), later).0, Decided::First);
        assert!(!d.contains(id(1), later));
        assert!(d.contains(id(2), later));
    }

    #[test]
    fn identity_is_the_origin_offset_group_and_topic() {
        let d = Decisions::new(10, Duration::from_secs(10));
        let t0 = Instant::now();
        d.decide(id(1), t0);
        assert!(!d.contains(id(2), t0));
        assert!(!d.contains(TransactionId::new(PhysicalOffset(1), "other", "T"), t0));
        assert!(!d.contains(TransactionId::new(PhysicalOffset(1), "pg", "U"), t0));
    }

    #[test]
    fn the_entry_bound_evicts_the_oldest_and_counts_it() {
        let d = Decisions::new(3, Duration::from_secs(3600));
        let t0 = Instant::now();
        for i in 0..3 {
            assert_eq!(d.decide(id(i), t0).1, 0);
        }
        assert_eq!(d.decide(id(3), t0), (Decided::First, 1));
        assert_eq!(d.len(), 3);
        assert!(!d.contains(id(0), t0));
        assert!(d.contains(id(3), t0));
    }

    #[test]
    fn restored_entries_older_than_the_retention_are_not_kept() {
        let d = Decisions::new(10, Duration::from_secs(10));
        let now = Instant::now() + Duration::from_secs(100);
        d.restore(id(1), now - Duration::from_secs(20), now);
        d.restore(id(2), now - Duration::from_secs(5), now);
        d.restore(id(3), now - Duration::from_secs(8), now);
        assert!(!d.contains(id(1), now));
        assert!(d.contains(id(2), now) && d.contains(id(3), now));
        // Expiry follows the decision times, not the order of restoring.
        let later = now + Duration::from_secs(3);
        assert!(!d.contains(id(3), later));
        assert!(d.contains(id(2), later));
    }

    /// 100,000 decisions: the bytes held depend on the entry count alone (an entry holds
    /// no name or key), within twice the entries' size for the map's spare capacity.
    #[test]
    fn bytes_per_entry_are_fixed() {
        let d = Decisions::new(100_000, Duration::from_secs(3600));
        let t0 = Instant::now();
        for i in 0..100_000 {
            let group = format!("pg-{}", "x".repeat(i % 64));
            d.decide(
                TransactionId::new(PhysicalOffset(i as i64), &group, "T"),
                t0,
            );
        }
        assert_eq!(d.len(), 100_000);
        assert!(d.bytes() <= 100_000 * ENTRY_BYTES * 2, "{}", d.bytes());
        const { assert!(ENTRY_BYTES <= 96) };
        // Past the retention everything goes, and the memory with it.
        assert!(!d.contains(id(0), t0 + Duration::from_secs(3601)));
        assert!(d.is_empty());
        assert!(d.bytes() < 64 * ENTRY_BYTES * 4, "{}", d.bytes());
    }
}
