//! Messages each consumer group pulled from each topic over the last minute: the figure
//! GET_CONSUME_STATS reports as `consumeTps` (RocketMQ's `BrokerStatsManager`
//! GROUP_GET_NUMS, which `ConsumeStats` reads as a per-minute rate).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

const WINDOW_SECS: u64 = 60;

/// group → topic → window; nested so the per-pull lookup borrows the names instead of
/// allocating a key.
#[derive(Default)]
pub struct ConsumeRate {
    windows: Mutex<HashMap<String, HashMap<String, Window>>>,
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
    pub fn record(&self, group: &str, topic: &str, messages: u64) {
        self.record_at(group, topic, messages, now_secs());
    }

    /// Average messages per second over the last minute.
    pub fn tps(&self, group: &str, topic: &str) -> f64 {
        self.tps_at(group, topic, now_secs())
    }

    fn record_at(&self, group: &str, topic: &str, messages: u64, now: u64) {
        let mut windows = self.windows.lock();
        if !windows.contains_key(group) {
            windows.insert(group.to_owned(), HashMap::new());
        }
        let Some(topics) = windows.get_mut(group) else {
            return;
        };
        if !topics.contains_key(topic) {
            topics.insert(topic.to_owned(), Window::new(now));
        }
        let Some(w) = topics.get_mut(topic) else {
            return;
        };
        w.advance(now);
        w.buckets[(now % WINDOW_SECS) as usize] += messages;
    }

    fn tps_at(&self, group: &str, topic: &str, now: u64) -> f64 {
        let mut windows = self.windows.lock();
        let Some(w) = windows.get_mut(group).and_then(|t| t.get_mut(topic)) else {
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
}
