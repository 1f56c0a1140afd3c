//! The master's view of its slaves (`HAService.connectionList` + `push2SlaveMaxOffset`):
//! each connection's acknowledged offset, the highest acknowledged offset any connected
//! slave reports (what SYNC_MASTER puts wait for), and which slaves are in sync.
//!
//! SYNC_MASTER puts wait in an ordered queue keyed by the end offset they need
//! (`GroupTransferService`'s request list): an ack completes exactly the waiters at or
//! below it, in one pass under one lock. A broadcast (every waiter woken to re-check the
//! offset on every ack) would cost each ack one task wake-up per put in flight.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use protocol::body::ha::HaConnectionInfo;
use tokio::sync::{oneshot, watch};

#[derive(Debug, Clone)]
struct Slave {
    addr: String,
    ack: i64,
}

#[derive(Debug)]
pub struct Acks {
    slaves: Mutex<HashMap<u64, Slave>>,
    next_id: AtomicU64,
    /// Highest offset acknowledged by a connected slave (-1: none).
    acked: watch::Sender<i64>,
    /// Puts waiting for an ack, by (end offset, ticket).
    waiters: Mutex<Waiters>,
}

#[derive(Debug, Default)]
struct Waiters {
    /// The highest ack published so far, read under this lock so that a waiter cannot
    /// register after the ack that covers it and miss it.
    max: i64,
    next_ticket: u64,
    queue: BTreeMap<(i64, u64), oneshot::Sender<()>>,
}

impl Default for Acks {
    fn default() -> Self {
        Self {
            slaves: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            acked: watch::channel(-1).0,
            waiters: Mutex::new(Waiters {
                max: -1,
                ..Waiters::default()
            }),
        }
    }
}

/// A put waiting for a slave to acknowledge its end offset; dropping it (timeout) takes
/// it out of the queue.
#[derive(Debug)]
pub struct AckWait<'a> {
    acks: &'a Acks,
    key: Option<(i64, u64)>,
    rx: Option<oneshot::Receiver<()>>,
}

impl AckWait<'_> {
    /// Resolves once a connected slave acknowledged the offset.
    pub async fn acked(&mut self) {
        if let Some(rx) = self.rx.as_mut() {
            // The sender is only dropped after sending or with the whole `Acks`.
            let _ = rx.await;
            self.rx = None;
        }
    }
}

impl Drop for AckWait<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.acks.waiters.lock().queue.remove(&key);
        }
    }
}

/// A slave is in sync while it is connected and less than `fallbehind_max` bytes behind.
pub fn in_sync(master_max: i64, ack: i64, fallbehind_max: u64) -> bool {
    ack >= 0 && ((master_max - ack).max(0) as u64) < fallbehind_max
}

impl Acks {
    /// A new slave connection whose first report was `ack`.
    pub fn register(&self, addr: String, ack: i64) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.slaves.lock().insert(id, Slave { addr, ack });
        self.publish();
        id
    }

    pub fn update(&self, id: u64, ack: i64) {
        if let Some(s) = self.slaves.lock().get_mut(&id) {
            s.ack = ack;
        }
        self.publish();
    }

    pub fn remove(&self, id: u64) {
        self.slaves.lock().remove(&id);
        self.publish();
    }

    fn publish(&self) {
        // Under the waiters' lock: two publishes racing cannot leave an older maximum
        // behind the newer one.
        let mut w = self.waiters.lock();
        let max = self
            .slaves
            .lock()
            .values()
            .map(|s| s.ack)
            .max()
            .unwrap_or(-1);
        self.acked.send_if_modified(|v| {
            let changed = *v != max;
            *v = max;
            changed
        });
        w.max = max;
        if w.queue
            .first_key_value()
            .is_some_and(|((end, _), _)| *end <= max)
        {
            // Everything at or below `max` is acknowledged; the rest keeps waiting.
            let rest = w.queue.split_off(&(max.saturating_add(1), 0));
            let done = std::mem::replace(&mut w.queue, rest);
            drop(w);
            for (_, tx) in done {
                let _ = tx.send(());
            }
        }
    }

    /// A wait for a connected slave to acknowledge `end`: already resolved when one has.
    pub fn wait_for(&self, end: i64) -> AckWait<'_> {
        let mut w = self.waiters.lock();
        if w.max >= end {
            return AckWait {
                acks: self,
                key: None,
                rx: None,
            };
        }
        let ticket = w.next_ticket;
        w.next_ticket += 1;
        let (tx, rx) = oneshot::channel();
        w.queue.insert((end, ticket), tx);
        AckWait {
            acks: self,
            key: Some((end, ticket)),
            rx: Some(rx),
        }
    }

    /// Puts waiting for an ack.
    pub fn waiting(&self) -> usize {
        self.waiters.lock().queue.len()
    }

    pub fn count(&self) -> usize {
        self.slaves.lock().len()
    }

    /// `push2SlaveMaxOffset`.
    pub fn max_ack(&self) -> i64 {
        *self.acked.borrow()
    }

    /// Lowest acknowledged offset among in-sync slaves (`None` without one).
    pub fn confirm(&self, master_max: i64, fallbehind_max: u64) -> Option<i64> {
        self.slaves
            .lock()
            .values()
            .filter(|s| in_sync(master_max, s.ack, fallbehind_max))
            .map(|s| s.ack)
            .min()
    }

    pub fn snapshot(&self, master_max: i64, fallbehind_max: u64) -> Vec<HaConnectionInfo> {
        let mut out: Vec<HaConnectionInfo> = self
            .slaves
            .lock()
            .values()
            .map(|s| HaConnectionInfo {
                addr: s.addr.clone(),
                slave_ack_offset: s.ack,
                diff: (master_max - s.ack).max(0),
                in_sync: in_sync(master_max, s.ack, fallbehind_max),
            })
            .collect();
        out.sort_by(|a, b| a.addr.cmp(&b.addr));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_ack_confirm_and_in_sync() {
        let acks = Acks::default();
        assert_eq!(acks.max_ack(), -1);
        let a = acks.register("a".into(), 100);
        let b = acks.register("b".into(), 40);
        assert_eq!(acks.max_ack(), 100);
        assert_eq!(acks.confirm(120, 1000), Some(40));
        // b is too far behind to count.
        assert_eq!(acks.confirm(120, 50), Some(100));
        acks.update(b, 120);
        assert_eq!(acks.confirm(120, 50), Some(100));
        acks.remove(a);
        assert_eq!(acks.max_ack(), 120);
        assert_eq!(acks.snapshot(150, 100)[0].diff, 30);
        acks.remove(b);
        assert_eq!((acks.count(), acks.max_ack()), (0, -1));
        assert_eq!(acks.confirm(150, 100), None);
    }

    #[tokio::test]
    async fn an_ack_completes_exactly_the_waiters_it_covers() {
        let acks = Acks::default();
        let id = acks.register("a".into(), 0);
        let mut low = acks.wait_for(100);
        let mut mid = acks.wait_for(200);
        let mut high = acks.wait_for(300);
        assert_eq!(acks.waiting(), 3);
        acks.update(id, 200);
        low.acked().await;
        mid.acked().await;
        assert_eq!(acks.waiting(), 1);
        let pending = futures::FutureExt::now_or_never(high.acked());
        assert!(
            pending.is_none(),
            "300 is not acknowledged by an ack of 200"
        );
        // Already covered: resolved without queueing.
        let mut done = acks.wait_for(150);
        assert_eq!(acks.waiting(), 1);
        done.acked().await;
        // A wait given up (timeout) leaves the queue.
        drop(high);
        assert_eq!(acks.waiting(), 0);
        // A slave that leaves does not acknowledge anything.
        let mut later = acks.wait_for(400);
        acks.remove(id);
        assert!(futures::FutureExt::now_or_never(later.acked()).is_none());
        let id = acks.register("b".into(), 400);
        later.acked().await;
        acks.remove(id);
    }
}
