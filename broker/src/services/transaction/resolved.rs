//! Transactions decided recently, by the half message's `UNIQ_KEY`: the broker's guard
//! against storing a transaction's message twice.
//!
//! RocketMQ 4.9 can deliver a transactional message twice: a check-back re-appends the
//! half message under a new offset, so a late commit of the original and a commit
//! answering the check-back both store a copy. Here the first decision for a `UNIQ_KEY`
//! wins and later ones only write their op record. Entries expire after `retention`; past
//! that (and after a restart) the broker looks the key up in the real topic's index.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use protocol::message::TransactionType;

#[derive(Debug)]
pub struct Resolved {
    inner: Mutex<Inner>,
    retention: Duration,
}

#[derive(Debug, Default)]
struct Inner {
    decided: HashMap<String, (TransactionType, Instant)>,
    order: VecDeque<(Instant, String)>,
}

impl Resolved {
    pub fn new(retention: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            retention,
        }
    }

    /// Records `decision` for `key` unless one exists; returns the earlier decision.
    pub fn decide(
        &self,
        key: &str,
        decision: TransactionType,
        now: Instant,
    ) -> Option<TransactionType> {
        let mut inner = self.inner.lock();
        inner.expire(now, self.retention);
        if let Some((earlier, _)) = inner.decided.get(key) {
            return Some(*earlier);
        }
        inner.decided.insert(key.to_owned(), (decision, now));
        inner.order.push_back((now, key.to_owned()));
        None
    }

    /// Forgets a decision whose record could not be stored, so a retry may decide again.
    pub fn undo(&self, key: &str) {
        self.inner.lock().decided.remove(key);
    }

    pub fn get(&self, key: &str) -> Option<TransactionType> {
        self.inner.lock().decided.get(key).map(|(d, _)| *d)
    }
}

impl Inner {
    fn expire(&mut self, now: Instant, retention: Duration) {
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) <= retention {
                break;
            }
            if let Some((at, key)) = self.order.pop_front() {
                // A key undone and decided again has a newer entry of its own.
                if self.decided.get(&key).is_some_and(|(_, t)| *t == at) {
                    self.decided.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_decision_wins_until_it_expires() {
        let r = Resolved::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(r.decide("k", TransactionType::Commit, t0), None);
        assert_eq!(
            r.decide("k", TransactionType::Rollback, t0),
            Some(TransactionType::Commit)
        );
        assert_eq!(r.get("k"), Some(TransactionType::Commit));
        r.undo("k");
        assert_eq!(r.decide("k", TransactionType::Rollback, t0), None);
        let later = t0 + Duration::from_secs(11);
        assert_eq!(r.decide("other", TransactionType::Commit, later), None);
        assert_eq!(r.get("k"), None);
        assert_eq!(r.get("other"), Some(TransactionType::Commit));
    }
}
