//! Records a background service passes over. The transaction checker and the schedule
//! service each walk a queue in order; one record they can never process (corrupt,
//! without a usable destination, a copy the store refuses for what it is) must not stop
//! them for every record behind it. They count such a record here by reason, log it at
//! warn at most once per [`LOG_EVERY`] (with how many were not logged meanwhile, so a
//! flood of bad records cannot flood the log), and go on. The counts are the series
//! `rocketmq_broker_transaction_check_skipped_total{reason}` and
//! `rocketmq_broker_schedule_skipped_total{reason}`.
//!
//! What a service may skip is its own decision (see `crate::services::transaction::checker` and
//! `crate::services::schedule`): a failure of the store itself (not writable, busy, a slave) is
//! never a reason to skip, as the record would be lost; the service retries it instead.

use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// At most one skip log line per service in this period.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkipLabels {
    pub reason: &'static str,
}

/// One service's skipped records, by reason, and its log rate limit.
pub struct Skips {
    service: &'static str,
    counts: Family<SkipLabels, Counter>,
    log: Mutex<LogWindow>,
}

impl Skips {
    fn new(service: &'static str) -> Self {
        Self {
            service,
            counts: Family::default(),
            log: Mutex::new(LogWindow::default()),
        }
    }

    /// Counts one record skipped for `reason` (a fixed label, never record data) and
    /// logs `what` unless another skip of this service was logged within [`LOG_EVERY`].
    pub fn record(&self, reason: &'static str, what: fmt::Arguments<'_>) {
        self.counts.get_or_create(&SkipLabels { reason }).inc();
        let Some(unlogged) = self.log.lock().admit(Instant::now()) else {
            return;
        };
        tracing::warn!(
            service = self.service,
            reason,
            skipped_unlogged = unlogged,
            "record skipped: {what}"
        );
    }

    /// Records skipped so far for `reason`.
    pub fn get(&self, reason: &'static str) -> u64 {
        self.counts.get_or_create(&SkipLabels { reason }).get()
    }
}

/// When the last skip was logged and how many have not been logged since.
#[derive(Debug, Default)]
struct LogWindow {
    last: Option<Instant>,
    unlogged: u64,
}

impl LogWindow {
    /// `Some(skips not logged since the last line)` when a line may be logged at `now`.
    fn admit(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < LOG_EVERY)
        {
            self.unlogged += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

/// The skip counters of the services that walk queues.
pub struct SkipMetrics {
    /// The transaction checker (`crate::services::transaction::checker`).
    pub transaction_check: Skips,
    /// Delayed-message delivery (`crate::services::schedule`).
    pub schedule: Skips,
}

impl Default for SkipMetrics {
    fn default() -> Self {
        Self {
            transaction_check: Skips::new("transaction_check"),
            schedule: Skips::new("schedule"),
        }
    }
}

impl SkipMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "rocketmq_broker_transaction_check_skipped",
            "Half messages the transaction checker could not process and passed over, by reason",
            self.transaction_check.counts.clone(),
        );
        r.register(
            "rocketmq_broker_schedule_skipped",
            "Delayed messages the schedule service could not deliver and passed over, by reason",
            self.schedule.counts.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_window_with_the_count_of_the_rest() {
        let mut w = LogWindow::default();
        let t0 = Instant::now();
        assert_eq!(w.admit(t0), Some(0));
        assert_eq!(w.admit(t0 + Duration::from_secs(1)), None);
        assert_eq!(w.admit(t0 + Duration::from_secs(9)), None);
        assert_eq!(w.admit(t0 + LOG_EVERY), Some(2));
        assert_eq!(w.admit(t0 + LOG_EVERY), None);
        // A clock read earlier than the last line (another thread) is inside the window.
        assert_eq!(w.admit(t0), None);
        assert_eq!(w.admit(t0 + LOG_EVERY * 3), Some(2));
    }

    #[test]
    fn every_skip_is_counted_whether_logged_or_not() {
        let m = SkipMetrics::default();
        for _ in 0..3 {
            m.schedule
                .record("put_refused", format_args!("test record"));
        }
        m.transaction_check
            .record("corrupt", format_args!("test record"));
        assert_eq!(m.schedule.get("put_refused"), 3);
        assert_eq!(m.schedule.get("corrupt"), 0);
        assert_eq!(m.transaction_check.get("corrupt"), 1);
        let mut r = Registry::default();
        m.register(&mut r);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        assert!(
            text.contains("rocketmq_broker_schedule_skipped_total{reason=\"put_refused\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("rocketmq_broker_transaction_check_skipped_total{reason=\"corrupt\"} 1"),
            "{text}"
        );
    }
}
