//! Offset resets the broker enforces on the next pulls of a group, as 5.x's server-side
//! reset does (`ConsumerOffsetManager.assignResetOffset` / `queryThenEraseResetOffset`
//! / `hasOffsetReset`, used by `PullMessageProcessor` and `ConsumerManageProcessor`).
//!
//! RESET_CONSUMER_CLIENT_OFFSET (220) only works for clients that decode it: the C++
//! client expects a different body and ignores the notice, keeps pulling where it was,
//! and its next commit restores the old offset. So a reset is also remembered per
//! (group, topic, queue) and enforced by the broker:
//!
//! 1. `Redirect`: the group's next pull of the queue at any other offset is answered
//!    PULL_OFFSET_MOVED with `nextBeginOffset` = the reset offset. Every client moves
//!    its pull position there (the C++ client's `OFFSET_ILLEGAL` case; the Java and Rust
//!    clients' `OFFSET_ILLEGAL` also store it as their offset).
//! 2. `Delivered`: a pull at the reset offset has been served; the reset is done once
//!    the group pulls past both what that answer delivered and the queue's end at the
//!    time of the reset. A client whose notice was ignored holds its old offset in
//!    memory (at most that end) until it has consumed what was delivered again, and
//!    sends it with its next pulls and its periodic commits.
//!
//! Until the reset is done the group's commits of that queue (UPDATE_CONSUMER_OFFSET and
//! the commit carried by a pull) are ignored, so none of them can move the committed
//! offset back to where it was before the reset. Ignoring a commit only ever means
//! re-delivery, never loss. Resets are bounded (`maxPendingOffsetResets`); past the
//! bound the oldest is forgotten and counted.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use protocol::message::{ConsumerOffset, QueueOffset};

type Key = (String, String, i32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Redirect,
    /// A pull at the reset offset was answered; `next` is where that answer ended.
    Delivered {
        next: QueueOffset,
    },
}

#[derive(Debug)]
struct Pending {
    offset: ConsumerOffset,
    /// The queue's max offset when the reset was made.
    until: QueueOffset,
    phase: Phase,
    seq: u64,
}

#[derive(Default)]
struct Table {
    entries: HashMap<Key, Pending>,
    /// Insertion order, for evicting the oldest past the bound.
    order: BTreeMap<u64, Key>,
    next_seq: u64,
}

/// What a pull of a queue with a pending reset must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullVerdict {
    /// No reset pending: serve the pull and apply its commit.
    Serve,
    /// Serve the pull, but ignore the commit it carries.
    ServeIgnoringCommit,
    /// Answer PULL_OFFSET_MOVED with this `nextBeginOffset`; ignore the commit.
    Redirect(QueueOffset),
}

pub struct PendingResets {
    table: Mutex<Table>,
    capacity: usize,
    /// `table.entries.len()`, written under the lock: every pull and commit asks, and
    /// almost always nothing is pending, so they skip the lock and the key's allocation.
    pending: AtomicUsize,
}

impl PendingResets {
    pub fn new(capacity: usize) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            capacity: capacity.max(1),
            pending: AtomicUsize::new(0),
        }
    }

    /// Remembers that `group` was reset to `offset` on the queue, whose max offset is
    /// `until` now, replacing an earlier reset of it. Answers how many older resets were
    /// forgotten to stay in bounds.
    pub fn assign(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: ConsumerOffset,
        until: QueueOffset,
    ) -> u64 {
        let mut t = self.table.lock();
        let key = (group.to_owned(), topic.to_owned(), queue_id);
        let seq = t.next_seq;
        t.next_seq += 1;
        if let Some(old) = t.entries.remove(&key) {
            t.order.remove(&old.seq);
        }
        let mut evicted = 0;
        while t.entries.len() >= self.capacity {
            let Some((_, oldest)) = t.order.pop_first() else {
                break;
            };
            t.entries.remove(&oldest);
            evicted += 1;
        }
        t.order.insert(seq, key.clone());
        t.entries.insert(
            key,
            Pending {
                offset,
                until,
                phase: Phase::Redirect,
                seq,
            },
        );
        self.pending.store(t.entries.len(), Ordering::Release);
        evicted
    }

    /// Whether commits of the group on the queue are ignored now.
    pub fn holds(&self, group: &str, topic: &str, queue_id: i32) -> bool {
        if self.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.table
            .lock()
            .entries
            .contains_key(&(group.to_owned(), topic.to_owned(), queue_id))
    }

    /// Decides a pull of the group at `at` before it is served, advancing the reset.
    pub fn on_pull(&self, group: &str, topic: &str, queue_id: i32, at: QueueOffset) -> PullVerdict {
        if self.pending.load(Ordering::Acquire) == 0 {
            return PullVerdict::Serve;
        }
        let mut t = self.table.lock();
        let key = (group.to_owned(), topic.to_owned(), queue_id);
        let Some(p) = t.entries.get(&key) else {
            return PullVerdict::Serve;
        };
        let reset = QueueOffset::from(p.offset);
        let until = p.until;
        match p.phase {
            Phase::Redirect if at != reset => PullVerdict::Redirect(reset),
            // Served by the caller, which reports where the answer ends (`delivered`).
            Phase::Redirect => PullVerdict::ServeIgnoringCommit,
            Phase::Delivered { next } if at > reset && at >= next.max(until) => {
                if let Some(done) = t.entries.remove(&key) {
                    t.order.remove(&done.seq);
                }
                self.pending.store(t.entries.len(), Ordering::Release);
                PullVerdict::ServeIgnoringCommit
            }
            Phase::Delivered { .. } => PullVerdict::ServeIgnoringCommit,
        }
    }

    /// A pull at the reset offset was answered, ending at `next`.
    pub fn delivered(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        at: QueueOffset,
        next: QueueOffset,
    ) {
        let mut t = self.table.lock();
        let key = (group.to_owned(), topic.to_owned(), queue_id);
        if let Some(p) = t.entries.get_mut(&key)
            && QueueOffset::from(p.offset) == at
        {
            p.phase = Phase::Delivered { next };
        }
    }

    pub fn remove_group(&self, group: &str) {
        self.retain(|(g, _, _)| g != group);
    }

    pub fn remove_topic(&self, topic: &str) {
        self.retain(|(_, t, _)| t != topic);
    }

    fn retain(&self, keep: impl Fn(&Key) -> bool) {
        let mut t = self.table.lock();
        let Table { entries, order, .. } = &mut *t;
        entries.retain(|k, _| keep(k));
        order.retain(|_, k| entries.contains_key(k));
        self.pending.store(entries.len(), Ordering::Release);
    }

    pub fn len(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: &str = "g";
    const T: &str = "T";

    #[test]
    fn redirect_then_deliver_then_done() {
        let r = PendingResets::new(16);
        assert_eq!(r.on_pull(G, T, 0, QueueOffset(8)), PullVerdict::Serve);
        r.assign(G, T, 0, ConsumerOffset(0), QueueOffset(8));
        assert!(r.holds(G, T, 0));
        assert!(!r.holds(G, T, 1));
        // Any pull elsewhere is sent to the reset offset, again and again.
        for at in [8, 3, 8] {
            assert_eq!(
                r.on_pull(G, T, 0, QueueOffset(at)),
                PullVerdict::Redirect(QueueOffset(0))
            );
        }
        assert_eq!(
            r.on_pull(G, T, 0, QueueOffset(0)),
            PullVerdict::ServeIgnoringCommit
        );
        r.delivered(G, T, 0, QueueOffset(0), QueueOffset(8));
        // A repeated pull of the re-delivered range keeps the reset.
        assert_eq!(
            r.on_pull(G, T, 0, QueueOffset(0)),
            PullVerdict::ServeIgnoringCommit
        );
        assert_eq!(
            r.on_pull(G, T, 0, QueueOffset(4)),
            PullVerdict::ServeIgnoringCommit
        );
        assert!(r.holds(G, T, 0));
        // Pulling past it ends the reset; that pull's commit is still ignored.
        assert_eq!(
            r.on_pull(G, T, 0, QueueOffset(8)),
            PullVerdict::ServeIgnoringCommit
        );
        assert!(!r.holds(G, T, 0));
        assert_eq!(r.on_pull(G, T, 0, QueueOffset(8)), PullVerdict::Serve);
    }

    #[test]
    fn a_reset_lasts_until_the_group_is_past_the_old_end() {
        let r = PendingResets::new(16);
        // The queue held 100 messages; a pull delivers 32 at a time.
        r.assign(G, T, 0, ConsumerOffset(0), QueueOffset(100));
        assert_eq!(
            r.on_pull(G, T, 0, QueueOffset(0)),
            PullVerdict::ServeIgnoringCommit
        );
        r.delivered(G, T, 0, QueueOffset(0), QueueOffset(32));
        for at in [32, 64, 96] {
            assert_eq!(
                r.on_pull(G, T, 0, QueueOffset(at)),
                PullVerdict::ServeIgnoringCommit
            );
            assert!(r.holds(G, T, 0), "still re-reading at {at}");
        }
        assert_eq!(
            r.on_pull(G, T, 0, QueueOffset(100)),
            PullVerdict::ServeIgnoringCommit
        );
        assert!(!r.holds(G, T, 0));
        // A skip to the end: done only once the group pulls past the reset offset.
        r.assign(G, T, 1, ConsumerOffset(100), QueueOffset(100));
        assert_eq!(
            r.on_pull(G, T, 1, QueueOffset(40)),
            PullVerdict::Redirect(QueueOffset(100))
        );
        assert_eq!(
            r.on_pull(G, T, 1, QueueOffset(100)),
            PullVerdict::ServeIgnoringCommit
        );
        r.delivered(G, T, 1, QueueOffset(100), QueueOffset(100));
        assert_eq!(
            r.on_pull(G, T, 1, QueueOffset(100)),
            PullVerdict::ServeIgnoringCommit
        );
        r.delivered(G, T, 1, QueueOffset(100), QueueOffset(103));
        assert!(r.holds(G, T, 1));
        assert_eq!(
            r.on_pull(G, T, 1, QueueOffset(103)),
            PullVerdict::ServeIgnoringCommit
        );
        assert!(!r.holds(G, T, 1));
    }

    #[test]
    fn oldest_is_forgotten_past_the_bound_and_removal_by_group_or_topic() {
        let r = PendingResets::new(2);
        assert_eq!(r.assign(G, T, 0, ConsumerOffset(0), QueueOffset(8)), 0);
        assert_eq!(r.assign(G, T, 1, ConsumerOffset(0), QueueOffset(8)), 0);
        // Re-assigning an existing reset does not evict.
        assert_eq!(r.assign(G, T, 0, ConsumerOffset(5), QueueOffset(8)), 0);
        assert_eq!(r.assign(G, T, 2, ConsumerOffset(0), QueueOffset(8)), 1);
        assert!(!r.holds(G, T, 1), "queue 1 was the oldest");
        assert!(r.holds(G, T, 0) && r.holds(G, T, 2));
        assert_eq!(
            r.on_pull(G, T, 0, QueueOffset(9)),
            PullVerdict::Redirect(QueueOffset(5))
        );
        r.assign("h", "U", 0, ConsumerOffset(0), QueueOffset(8));
        r.remove_group(G);
        assert_eq!(r.len(), 1);
        r.remove_topic("U");
        assert_eq!(r.len(), 0);
    }
}
