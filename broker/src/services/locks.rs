//! Queue locks for orderly consumption (`RebalanceLockManager`): a client holds a queue
//! of a group until it unlocks or stops renewing for 60 s
//! (`rocketmq.broker.rebalance.lockMaxLiveTime`).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use protocol::body::MessageQueue;

use super::clients::ClientManager;

pub const LOCK_MAX_LIVE_TIME: Duration = Duration::from_secs(60);

struct LockEntry {
    client_id: String,
    last_update: Instant,
}

#[derive(Default)]
pub struct LockManager {
    groups: Mutex<HashMap<String, HashMap<MessageQueue, LockEntry>>>,
}

impl LockManager {
    /// `tryLockBatch`: locks (or renews) every queue that is free, expired or already
    /// held by `client_id`; returns the queues `client_id` now holds.
    pub fn try_lock_batch(
        &self,
        group: &str,
        queues: &BTreeSet<MessageQueue>,
        client_id: &str,
        now: Instant,
    ) -> BTreeSet<MessageQueue> {
        let mut groups = self.groups.lock();
        let table = groups.entry(group.to_owned()).or_default();
        let mut locked = BTreeSet::new();
        for mq in queues {
            let entry = table.entry(mq.clone()).or_insert_with(|| LockEntry {
                client_id: client_id.to_owned(),
                last_update: now,
            });
            let expired = now.saturating_duration_since(entry.last_update) > LOCK_MAX_LIVE_TIME;
            if entry.client_id == client_id || expired {
                if entry.client_id != client_id {
                    tracing::info!(group, queue = ?mq, old = %entry.client_id, new = client_id, "expired queue lock taken over");
                }
                entry.client_id = client_id.to_owned();
                entry.last_update = now;
                locked.insert(mq.clone());
            }
        }
        locked
    }

    /// `unlockBatch`: releases the queues held by `client_id`.
    pub fn unlock_batch(&self, group: &str, queues: &BTreeSet<MessageQueue>, client_id: &str) {
        let mut groups = self.groups.lock();
        if let Some(table) = groups.get_mut(group) {
            for mq in queues {
                if table.get(mq).is_some_and(|e| e.client_id == client_id) {
                    table.remove(mq);
                }
            }
            if table.is_empty() {
                groups.remove(group);
            }
        }
    }
}

impl LockManager {
    /// Drops locks nobody renewed for [`LOCK_MAX_LIVE_TIME`] (they could only be taken
    /// over anyway); returns how many.
    pub fn purge_expired(&self, now: Instant) -> usize {
        let mut groups = self.groups.lock();
        let mut purged = 0;
        groups.retain(|_, table| {
            let before = table.len();
            table.retain(|_, e| now.saturating_duration_since(e.last_update) <= LOCK_MAX_LIVE_TIME);
            purged += before - table.len();
            !table.is_empty()
        });
        purged
    }

    /// Releases every queue of `group` held by `client_id`, when the client left the
    /// group (UNREGISTER_CLIENT) or its connection closed. RocketMQ 4.9 leaves such locks
    /// to expire after 60 s, stalling the queues of a crashed orderly consumer for that
    /// long; releasing at once lets the next rebalance hand them over. Returns how many
    /// were released.
    pub fn release_client(&self, group: &str, client_id: &str) -> usize {
        let mut groups = self.groups.lock();
        let Some(table) = groups.get_mut(group) else {
            return 0;
        };
        let before = table.len();
        table.retain(|_, e| e.client_id != client_id);
        let released = before - table.len();
        if table.is_empty() {
            groups.remove(group);
        }
        released
    }
}

/// Releases the locks of consumers that left their groups (a closed connection, an
/// UNREGISTER_CLIENT): `memberships` are `(group, client id)` pairs; a client still a
/// member of the group through another connection keeps its locks.
pub fn release_departed(
    locks: &LockManager,
    clients: &ClientManager,
    memberships: Vec<(String, String)>,
) {
    for (group, client_id) in memberships {
        if clients.is_consumer_member(&group, &client_id) {
            continue;
        }
        let released = locks.release_client(&group, &client_id);
        if released > 0 {
            tracing::info!(
                group,
                client = client_id,
                released,
                "queue locks of a departed consumer released"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue {
            topic: "T".into(),
            broker_name: "b".into(),
            queue_id: q,
        }
    }

    #[test]
    fn lock_renew_steal_after_expiry_unlock() {
        let m = LockManager::default();
        let t0 = Instant::now();
        let both: BTreeSet<_> = [mq(0), mq(1)].into();
        assert_eq!(m.try_lock_batch("g", &both, "c1", t0), both);
        assert!(
            m.try_lock_batch("g", &both, "c2", t0 + Duration::from_secs(30))
                .is_empty()
        );
        // c1 renews queue 0 only; queue 1 expires and c2 takes it.
        let q0: BTreeSet<_> = [mq(0)].into();
        m.try_lock_batch("g", &q0, "c1", t0 + Duration::from_secs(50));
        let t = t0 + Duration::from_secs(61);
        assert_eq!(m.try_lock_batch("g", &both, "c2", t), [mq(1)].into());
        m.unlock_batch("g", &both, "c1");
        assert_eq!(m.try_lock_batch("g", &both, "c2", t), both);
    }

    #[test]
    fn a_departed_client_frees_its_queues_at_once() {
        let m = LockManager::default();
        let t0 = Instant::now();
        let both: BTreeSet<_> = [mq(0), mq(1)].into();
        m.try_lock_batch("g", &[mq(0)].into(), "c1", t0);
        m.try_lock_batch("other", &both, "c1", t0);
        assert_eq!(m.try_lock_batch("g", &both, "c2", t0), [mq(1)].into());
        assert_eq!(m.release_client("g", "c1"), 1);
        assert_eq!(m.release_client("g", "c1"), 0);
        assert_eq!(m.try_lock_batch("g", &both, "c2", t0), both);
        // Other groups' locks of the same client are untouched.
        assert!(m.try_lock_batch("other", &both, "c3", t0).is_empty());
        // Locks nobody renews go.
        assert_eq!(m.purge_expired(t0 + Duration::from_secs(30)), 0);
        assert_eq!(m.purge_expired(t0 + Duration::from_secs(61)), 4);
        assert!(m.groups.lock().is_empty());
    }
}
