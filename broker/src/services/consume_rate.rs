//! Messages each consumer group pulled from each topic over the last minute: the figure
//! GET_CONSUME_STATS reports as `consumeTps` (RocketMQ's `BrokerStatsManager`
//! GROUP_GET_NUMS, which `ConsumeStats` reads as a per-minute rate).
//!
//! The pairs are named by clients (any existing group and topic), so the table is
//! bounded: at most `maxConsumeRateEntries` pairs, a new pair past it is not rated (its
//! `consumeTps` reads 0), and a pair that pulled nothing for a minute, whose rate is 0
//! anyway, is dropped by [`ConsumeRate::purge_idle`]. Pairs already rated are never
//! evicted to make room.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

const WINDOW_SECS: u64 = 60;

/// group → topic → window; nested so the per-pull lookup borrows the names instead of
/// allocating a key.
pub struct ConsumeRate {
    table: Mutex<Table>,
    max_entries: usize,
}

#[derive(Default)]
struct Table {
    windows: HashMap<String, HashMap<String, Window>>,
    /// Windows in all groups.
    entries: usize,
}

impl Default for ConsumeRate {
    fn default() -> Self {
        Self::new(65_536)
    }
}

/// Per-second buckets of the last minute, indexed by `second % 60`.
struct Window {
    buckets: [u64; WINDOW_SECS as usize],
    last_sec: u64,
}

impl Window {
    fn new(now: u64) -> Self {
        Self {
            buckets: [0; WINDOW_SECS as usize],
            last_sec: now,
        }
    }

    /// Zeroes the buckets of the seconds that passed since the last touch.
    fn advance(&mut self, now: u64) {
        if now <= self.last_sec {
            return;
        }
        if now - self.last_sec >= WINDOW_SECS {
            self.buckets = [0; WINDOW_SECS as usize];
        } else {
            for s in self.last_sec + 1..=now {
                self.buckets[(s % WINDOW_SECS) as usize] = 0;
            }
        }
        self.last_sec = now;
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl ConsumeRate {
    /// `maxConsumeRateEntries`: how many (group, topic) pairs are rated at most.
    pub fn new(max_entries: usize) -> Self {
        Self {
            table: Mutex::default(),
            max_entries,
        }
    }

    /// Counts `messages` pulled by `group` from `topic`; `false` when the pair is new and
    /// the table is full (the pull is not rated).
    pub fn record(&self, group: &str, topic: &str, messages: u64) -> bool {
        self.record_at(group, topic, messages, now_secs())
    }

    /// Drops the pairs that pulled nothing within the last minute (their rate is 0);
    /// returns how many.
    pub fn purge_idle(&self) -> usize {
        self.purge_idle_at(now_secs())
    }

    /// Pairs rated now.
    pub fn entries(&self) -> usize {
        self.table.lock().entries
    }

    /// Average messages per second over the last minute.
    pub fn tps(&self, group: &str, topic: &str) -> f64 {
        self.tps_at(group, topic, now_secs())
    }

    fn record_at(&self, group: &str, topic: &str, messages: u64, now: u64) -> bool {
        let mut table = self.table.lock();
        let known = table
            .windows
            .get(group)
            .is_some_and(|topics| topics.contains_key(topic));
        if !known {
            if table.entries >= self.max_entries {
                return false;
            }
            table.entries += 1;
            table
                .windows
                .entry(group.to_owned())
                .or_default()
                .insert(topic.to_owned(), Window::new(now));
        }
        let Some(w) = table.windows.get_mut(group).and_then(|t| t.get_mut(topic)) else {
            return false;
        };
        w.advance(now);
        w.buckets[(now % WINDOW_SECS) as usize] += messages;
        true
    }

    fn purge_idle_at(&self, now: u64) -> usize {
        let mut table = self.table.lock();
        let mut purged = 0;
        table.windows.retain(|_, topics| {
            topics.retain(|_, w| {
                let idle = now.saturating_sub(w.last_sec) >= WINDOW_SECS;
                purged += usize::from(idle);
                !idle
            });
            !topics.is_empty()
        });
        table.entries -= purged;
        purged
    }

    fn tps_at(&self, group: &str, topic: &str, now: u64) -> f64 {
        let mut table = self.table.lock();
        let Some(w) = table.windows.get_mut(group).and_then(|t| t.get_mut(topic)) else {
            return 0.0;
        };
        w.advance(now);
        w.buckets.iter().sum::<u64>() as f64 / WINDOW_SECS as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_covers_the_last_minute_only() {
        let r = ConsumeRate::default();
        assert_eq!(r.tps_at("g", "t", 1000), 0.0);
        r.record_at("g", "t", 60, 1000);
        r.record_at("g", "t", 60, 1030);
        r.record_at("g", "other", 600, 1030);
        assert_eq!(r.tps_at("g", "t", 1030), 2.0);
        // Second 1000 left the window at 1060; 1030's count is still in it.
        assert_eq!(r.tps_at("g", "t", 1060), 1.0);
        assert_eq!(r.tps_at("g", "t", 1089), 1.0);
        assert_eq!(r.tps_at("g", "t", 1090), 0.0);
        assert_eq!(r.tps_at("g", "other", 2000), 0.0);
    }

    #[test]
    fn pairs_are_capped_and_idle_ones_dropped() {
        let r = ConsumeRate::new(2);
        assert!(r.record_at("g", "a", 1, 1000));
        assert!(r.record_at("g", "b", 1, 1000));
        // Full: a new pair is not rated, the rated ones go on.
        assert!(!r.record_at("h", "a", 1, 1000));
        assert_eq!(r.tps_at("h", "a", 1000), 0.0);
        assert!(r.record_at("g", "a", 59, 1030));
        assert_eq!(r.entries(), 2);
        // "b" pulled nothing for a minute: dropped, and its slot is free again.
        assert_eq!(r.purge_idle_at(1060), 1);
        assert_eq!(r.entries(), 1);
        assert_eq!(r.tps_at("g", "a", 1060), 59.0 / 60.0);
        assert!(r.record_at("h", "a", 1, 1060));
        assert_eq!(r.purge_idle_at(1200), 2);
        assert_eq!(r.entries(), 0);
        assert!(r.table.lock().windows.is_empty());
    }
}
