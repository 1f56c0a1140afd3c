//! The master's view of its slaves (`HAService.connectionList` + `push2SlaveMaxOffset`):
//! each connection's acknowledged offset, the highest acknowledged offset any connected
//! slave reports (what SYNC_MASTER puts wait for), and which slaves are in sync.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use protocol::body::ha::HaConnectionInfo;
use tokio::sync::watch;

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
}

impl Default for Acks {
    fn default() -> Self {
        Self {
            slaves: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            acked: watch::channel(-1).0,
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
    }

    pub fn count(&self) -> usize {
        self.slaves.lock().len()
    }

    /// `push2SlaveMaxOffset`.
    pub fn max_ack(&self) -> i64 {
        *self.acked.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.acked.subscribe()
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
}
