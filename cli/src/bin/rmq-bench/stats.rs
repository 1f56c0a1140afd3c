//! Counting and latency bookkeeping shared by the producer and consumer modes: a
//! progress line every few seconds, and a final summary with HdrHistogram percentiles
//! and errors by response code.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use remoting::client::{ClientError, response_code_label};
use serde::Serialize;

/// Latencies are recorded in microseconds, up to one hour, 3 significant digits.
const MAX_LATENCY_US: u64 = 3_600_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("constant histogram bounds are valid")
}

/// Counters of one phase (warm-up or measured).
#[derive(Debug, Default)]
struct Counters {
    ok: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

#[derive(Debug)]
pub struct Stats {
    started: Instant,
    warmup: Duration,
    /// Everything since start, warm-up included (what the broker stored).
    all: Counters,
    /// After warm-up only.
    measured: Counters,
    interval: Mutex<(Histogram<u64>, u64, u64, u64)>,
    total: Mutex<Histogram<u64>>,
    errors_by_code: Mutex<BTreeMap<String, u64>>,
    outcomes: Mutex<BTreeMap<String, u64>>,
}

impl Stats {
    pub fn new(warmup: Duration) -> Self {
        Self {
            started: Instant::now(),
            warmup,
            all: Counters::default(),
            measured: Counters::default(),
            interval: Mutex::new((histogram(), 0, 0, 0)),
            total: Mutex::new(histogram()),
            errors_by_code: Mutex::default(),
            outcomes: Mutex::default(),
        }
    }

    pub fn in_warmup(&self) -> bool {
        self.started.elapsed() < self.warmup
    }

    /// `messages` succeeded carrying `bytes`, `latency` after they were due (None: not
    /// measured, e.g. oneway). `outcome` names the broker's verdict (SEND_OK, ...).
    pub fn success(&self, messages: u64, bytes: u64, latency: Option<Duration>, outcome: &str) {
        self.all.ok.fetch_add(messages, Ordering::Relaxed);
        self.all.bytes.fetch_add(bytes, Ordering::Relaxed);
        *self.outcomes.lock().entry(outcome.to_owned()).or_default() += messages;
        let us = latency.map(|l| u64::try_from(l.as_micros()).unwrap_or(u64::MAX).max(1));
        {
            let mut i = self.interval.lock();
            i.1 += messages;
            i.2 += bytes;
            if let Some(us) = us {
                i.0.saturating_record(us);
            }
        }
        if !self.in_warmup() {
            self.measured.ok.fetch_add(messages, Ordering::Relaxed);
            self.measured.bytes.fetch_add(bytes, Ordering::Relaxed);
            if let Some(us) = us {
                self.total.lock().saturating_record(us);
            }
        }
    }

    /// A failed request carrying `messages` messages.
    pub fn failure(&self, messages: u64, error: &ClientError) {
        self.failure_labelled(messages, error_label(error));
    }

    /// A failed request carrying `messages` messages, counted under `label`.
    pub fn failure_labelled(&self, messages: u64, label: String) {
        self.all.errors.fetch_add(messages, Ordering::Relaxed);
        self.interval.lock().3 += messages;
        if !self.in_warmup() {
            self.measured.errors.fetch_add(messages, Ordering::Relaxed);
        }
        *self.errors_by_code.lock().entry(label).or_default() += messages;
    }

    /// The progress line for the interval since the previous call, which it resets.
    pub fn progress_line(&self, interval: Duration) -> String {
        let (h, n, bytes, errors) = {
            let mut i = self.interval.lock();
            let snapshot = (i.0.clone(), i.1, i.2, i.3);
            i.0.reset();
            (i.1, i.2, i.3) = (0, 0, 0);
            snapshot
        };
        let secs = interval.as_secs_f64().max(1e-9);
        let phase = if self.in_warmup() { " (warm-up)" } else { "" };
        format!(
            "[{:>5.0}s] {:>10.1} msg/s {:>8.2} MB/s  p50 {:>8.3} ms  p99 {:>8.3} ms  errors {}{}",
            self.started.elapsed().as_secs_f64(),
            n as f64 / secs,
            bytes as f64 / secs / 1e6,
            quantile_ms(&h, 0.50),
            quantile_ms(&h, 0.99),
            errors,
            phase
        )
    }

    /// The final summary; `elapsed` is the whole run, warm-up included.
    pub fn summary(&self, elapsed: Duration) -> Summary {
        let measured_secs = elapsed.saturating_sub(self.warmup).as_secs_f64().max(1e-9);
        let h = self.total.lock().clone();
        let ok = self.measured.ok.load(Ordering::Relaxed);
        let bytes = self.measured.bytes.load(Ordering::Relaxed);
        Summary {
            elapsed_s: elapsed.as_secs_f64(),
            warmup_s: self.warmup.as_secs_f64(),
            total_ok: self.all.ok.load(Ordering::Relaxed),
            total_errors: self.all.errors.load(Ordering::Relaxed),
            total_bytes: self.all.bytes.load(Ordering::Relaxed),
            measured_ok: ok,
            measured_errors: self.measured.errors.load(Ordering::Relaxed),
            tps: ok as f64 / measured_secs,
            mb_per_s: bytes as f64 / measured_secs / 1e6,
            latency_ms: (!h.is_empty()).then(|| Percentiles {
                samples: h.len(),
                mean: h.mean() / 1000.0,
                p50: quantile_ms(&h, 0.50),
                p90: quantile_ms(&h, 0.90),
                p99: quantile_ms(&h, 0.99),
                p999: quantile_ms(&h, 0.999),
                max: h.max() as f64 / 1000.0,
            }),
            errors_by_code: self.errors_by_code.lock().clone(),
            outcomes: self.outcomes.lock().clone(),
            latency_histogram: None,
        }
    }

    /// The measured latencies in log-spaced buckets (see [`latency_buckets`]).
    pub fn latency_histogram(&self) -> Vec<Bucket> {
        latency_buckets(&self.total.lock())
    }
}

/// Upper bounds of the histogram buckets, in µs: a 1-2-5 series from 50 µs to 100 s, so
/// that every bucket is 2 to 2.5 times as wide as the one before (log-spaced, as an HDR
/// histogram's log iterator) and a latency regression shows as mass moving down a row.
const BUCKET_BOUNDS_US: &[u64] = &[
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    100_000_000,
];

/// One row of the latency histogram: samples in `(previous bound, le_ms]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bucket {
    pub le_ms: f64,
    pub count: u64,
    /// Share of all samples at or below `le_ms`, in percent.
    pub cumulative_pct: f64,
}

/// Buckets from the first that holds a sample to the last that does; everything above
/// the last bound falls in a final bucket bounded by the maximum.
fn latency_buckets(h: &Histogram<u64>) -> Vec<Bucket> {
    let total = h.len();
    let mut out = Vec::new();
    let mut seen = 0u64;
    let bounds = BUCKET_BOUNDS_US
        .iter()
        .copied()
        .chain(std::iter::once(u64::MAX));
    for high in bounds {
        if seen >= total {
            break;
        }
        // Cumulative counts, so a value is never counted in two rows; `count_between`
        // is inclusive and works on the histogram's equivalent-value ranges.
        let upto = if high >= h.max() {
            total
        } else {
            h.count_between(0, high)
        };
        let count = upto.saturating_sub(seen);
        seen += count;
        // Rows below the first sample are left out.
        if seen > 0 {
            out.push(Bucket {
                le_ms: high.min(h.max()) as f64 / 1000.0,
                count,
                cumulative_pct: seen as f64 * 100.0 / total as f64,
            });
        }
    }
    out
}

/// The histogram as text rows: bound, count, share, cumulative share and a bar scaled to
/// the fullest bucket.
pub fn render_histogram(buckets: &[Bucket]) -> String {
    const WIDTH: u64 = 40;
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let fullest = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let mut out = String::from("  latency histogram (ms, upper bound of each bucket):\n");
    for b in buckets {
        let bar = "#".repeat(usize::try_from(b.count * WIDTH / fullest).unwrap_or(0));
        out.push_str(&format!(
            "  <= {:>10.3}  {:>10}  {:>6.2}%  cum {:>7.3}%  {bar}\n",
            b.le_ms,
            b.count,
            b.count as f64 * 100.0 / total.max(1) as f64,
            b.cumulative_pct,
        ));
    }
    out
}

fn quantile_ms(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(q) as f64 / 1000.0
    }
}

/// How an error is counted: the RocketMQ response code (name and number) for refusals,
/// the failure kind otherwise.
pub fn error_label(e: &ClientError) -> String {
    match e {
        ClientError::Refused { code, .. } => response_code_label(*code),
        ClientError::Timeout { .. } => "TIMEOUT".to_owned(),
        ClientError::Connect { .. } => "CONNECT_FAILED".to_owned(),
        ClientError::Closed { .. } => "CONNECTION_CLOSED".to_owned(),
        ClientError::BadResponse { .. } => "BAD_RESPONSE".to_owned(),
        ClientError::NoNameServer | ClientError::Invalid(_) => "CLIENT_ERROR".to_owned(),
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Percentiles {
    pub samples: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub elapsed_s: f64,
    pub warmup_s: f64,
    /// Successful messages over the whole run, warm-up included.
    pub total_ok: u64,
    pub total_errors: u64,
    pub total_bytes: u64,
    /// After warm-up.
    pub measured_ok: u64,
    pub measured_errors: u64,
    pub tps: f64,
    pub mb_per_s: f64,
    pub latency_ms: Option<Percentiles>,
    pub errors_by_code: BTreeMap<String, u64>,
    /// Successful messages by the broker's verdict (SEND_OK, FLUSH_DISK_TIMEOUT, ...).
    pub outcomes: BTreeMap<String, u64>,
    /// With `--latency`: the measured latencies in log-spaced buckets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_histogram: Option<Vec<Bucket>>,
}

impl Summary {
    pub fn render_text(&self, title: &str) -> String {
        let mut out = format!(
            "{title}: {} ok, {} errors in {:.1} s ({:.1} s warm-up)\n  measured: {} msgs, {:.1} msg/s, {:.2} MB/s\n",
            self.total_ok,
            self.total_errors,
            self.elapsed_s,
            self.warmup_s,
            self.measured_ok,
            self.tps,
            self.mb_per_s
        );
        if let Some(l) = &self.latency_ms {
            out.push_str(&format!(
                "  latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  (mean {:.3}, {} samples)\n",
                l.p50, l.p90, l.p99, l.p999, l.max, l.mean, l.samples
            ));
        }
        if let Some(h) = &self.latency_histogram {
            out.push_str(&render_histogram(h));
        }
        for (k, v) in &self.outcomes {
            out.push_str(&format!("  {k}: {v}\n"));
        }
        for (k, v) in &self.errors_by_code {
            out.push_str(&format!("  error {k}: {v}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use remoting::client::Peer;

    #[test]
    fn summary_counts_and_percentiles() {
        let s = Stats::new(Duration::ZERO);
        for ms in 1..=100 {
            s.success(1, 10, Some(Duration::from_millis(ms)), "SEND_OK");
        }
        s.success(5, 50, None, "SEND_OK");
        let refused = ClientError::Refused {
            peer: Peer::Broker("b:1".into()),
            request: 310,
            code: 2,
            remark: String::new(),
        };
        s.failure(2, &refused);
        let line = s.progress_line(Duration::from_secs(1));
        assert!(line.contains("errors 2"), "{line}");
        let sum = s.summary(Duration::from_secs(1));
        assert_eq!(
            (sum.total_ok, sum.total_errors, sum.total_bytes),
            (105, 2, 1050)
        );
        let l = sum.latency_ms.unwrap();
        assert_eq!(l.samples, 100);
        assert!(
            (l.p50 - 50.0).abs() < 0.1 && (l.max - 100.0).abs() < 0.1,
            "{l:?}"
        );
        assert_eq!(sum.errors_by_code.get("SYSTEM_BUSY (2)"), Some(&2));
        assert_eq!(sum.outcomes.get("SEND_OK"), Some(&105));
    }

    #[test]
    fn histogram_buckets_are_log_spaced_and_cumulative() {
        let s = Stats::new(Duration::ZERO);
        // 70 at 0.3 ms, 25 at 1.5 ms, 4 at 8 ms, 1 at 250 ms.
        for (n, us) in [(70, 300), (25, 1_500), (4, 8_000), (1, 250_000)] {
            for _ in 0..n {
                s.success(1, 1, Some(Duration::from_micros(us)), "SEND_OK");
            }
        }
        let b = s.latency_histogram();
        let rows: Vec<(f64, u64)> = b.iter().map(|b| (b.le_ms, b.count)).collect();
        // Empty rows below the first sample are left out; empty rows between are kept.
        assert_eq!(rows[0], (0.5, 70));
        assert_eq!(rows[1], (1.0, 0));
        assert_eq!(rows[2], (2.0, 25));
        assert_eq!(rows[4], (10.0, 4));
        let last = b.last().unwrap();
        assert_eq!(last.count, 1);
        assert!((last.le_ms - 250.0).abs() < 0.5, "{last:?}");
        assert!((last.cumulative_pct - 100.0).abs() < 1e-9);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 100);
        let text = render_histogram(&b);
        assert!(text.contains("70.00%"), "{text}");
        assert_eq!(text.lines().count(), b.len() + 1);
    }
}
