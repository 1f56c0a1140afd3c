//! Admission limits every listener of the broker and the nameserver applies to its
//! peers, one mechanism for the remoting ports, the HA port and the metrics/health port:
//!
//! - a cap on connections in all (`maxConnections`, `haMaxConnections`,
//!   `httpMaxConnections`);
//! - a per-source share: one source address holds at most so many of a listener's slots
//!   (`maxConnectionsPerIp`, `haMaxConnectionsPerIp`, `httpMaxConnectionsPerIp`), unless
//!   it is listed in `connectionLimitExemptAddresses` (clients behind one NAT);
//! - a reserve: the last `connectionReservePercent` of a listener's slots only admit a
//!   source that holds none yet, so while one peer holds everything its share allows, a
//!   new source (the kubelet's probe, a slave, a client) still gets in;
//! - a first-request deadline: a connection that sends no valid request within the
//!   listener's deadline (`firstRequestTimeoutMillis`, `httpFirstRequestTimeoutMillis`,
//!   `haHandshakeTimeoutMillis`) is closed, so a peer cannot hold slots by saying nothing.
//!   It bounds the first request only: 4.x clients heartbeat every 30 s once connected,
//!   and later silence is the idle timeouts' business.
//!
//! A peer over a cap is closed right after `accept`, before anything is read or spawned:
//! the listener keeps draining its backlog, so the process never reaches EMFILE and
//! legitimate clients keep getting through once others leave. 4.9 has none of this (Netty
//! accepts until the fd limit). Every refusal is counted by reason.
//!
//! Also here: the socket options every accepted connection gets (TCP keepalive,
//! `TCP_USER_TIMEOUT`) and, in [`http`], the metrics port's listener.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::TcpStream;
use tokio::time::Instant;

mod exempt;
mod http;

pub use exempt::{BadExemption, ExemptSources};
pub use http::{GatedIo, GatedListener};

/// Why a connection was turned away or closed before its first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The listener's cap on connections in all.
    Cap,
    /// The source already holds its per-source share.
    PerSource,
    /// Only the reserved slots are left, and the source already holds one.
    Reserved,
    /// No valid request within the listener's first-request deadline.
    FirstRequestTimeout,
}

impl Refusal {
    pub const ALL: [Refusal; 4] = [
        Self::Cap,
        Self::PerSource,
        Self::Reserved,
        Self::FirstRequestTimeout,
    ];

    /// The metric label (`reason="..."`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Cap => "cap",
            Self::PerSource => "per_source",
            Self::Reserved => "reserved",
            Self::FirstRequestTimeout => "first_request_timeout",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// The bounds of one listener.
#[derive(Debug, Clone)]
pub struct GateLimits {
    /// Connections in all (at least 1).
    pub max: usize,
    /// Connections one source address may hold (0: no per-source share).
    pub per_source: usize,
    /// Percent of `max` (rounded down) that only admits sources holding no slot.
    pub reserve_percent: u32,
    /// Sources the per-source share does not apply to.
    pub exempt: ExemptSources,
    /// How long an admitted connection has to send its first valid request.
    pub first_request: Duration,
}

impl GateLimits {
    /// A cap only: no per-source share, no reserve, no exemption, and a first-request
    /// deadline of `first_request`.
    pub fn cap(max: usize, first_request: Duration) -> Self {
        Self {
            max,
            per_source: 0,
            reserve_percent: 0,
            exempt: ExemptSources::default(),
            first_request,
        }
    }

    /// Slots kept for sources that hold none.
    fn reserved(&self) -> usize {
        let max = self.max.max(1);
        // Never the whole listener: at least one slot takes anyone.
        (max.saturating_mul(self.reserve_percent.min(100) as usize) / 100).min(max - 1)
    }
}

/// Counters bumped for each refusal reason: the listener's by-reason series and any
/// other series the process keeps (the broker's refusals by config key).
#[derive(Debug, Clone, Default)]
pub struct RefusalCounters([Vec<Counter>; 4]);

impl RefusalCounters {
    /// Adds `counter` to those bumped for `reason`.
    pub fn with(mut self, reason: Refusal, counter: Counter) -> Self {
        self.0[reason.index()].push(counter);
        self
    }

    fn inc(&self, reason: Refusal) {
        for c in &self.0[reason.index()] {
            c.inc();
        }
    }

    /// Refusals for `reason` so far, by the first counter given for it.
    pub fn get(&self, reason: Refusal) -> u64 {
        self.0[reason.index()].first().map_or(0, Counter::get)
    }
}

/// The series of one listener.
#[derive(Debug, Clone, Default)]
pub struct GateMetrics {
    /// Connections holding a slot.
    pub open: Gauge,
    /// Connections closed at accept, whatever the reason.
    pub refused: Counter,
    /// Refusals and first-request timeouts, by reason.
    pub reasons: RefusalCounters,
}

/// The caps of one listener and who holds a slot.
#[derive(Debug)]
pub struct ConnGate {
    limits: GateLimits,
    reserved: usize,
    open: Mutex<Open>,
    metrics: GateMetrics,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_source: HashMap<IpAddr, usize>,
}

/// One admitted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnSlot {
    gate: Arc<ConnGate>,
    source: IpAddr,
    first_request_by: Instant,
}

/// The first-request deadline passed (already counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no valid request within the first-request deadline ({0:?})")]
pub struct FirstRequestTimeout(pub Duration);

impl ConnGate {
    pub fn new(limits: GateLimits, metrics: GateMetrics) -> Arc<Self> {
        let limits = GateLimits {
            max: limits.max.max(1),
            ..limits
        };
        Arc::new(Self {
            reserved: limits.reserved(),
            limits,
            open: Mutex::new(Open::default()),
            metrics,
        })
    }

    /// A slot for a connection from `ip`, or the reason (counted) it gets none.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnSlot, Refusal> {
        let source = canonical(ip);
        let mut open = self.open.lock();
        let held = open.per_source.get(&source).copied().unwrap_or(0);
        let l = &self.limits;
        let refusal = if open.total >= l.max {
            Some(Refusal::Cap)
        } else if l.per_source > 0 && held >= l.per_source && !l.exempt.contains(source) {
            Some(Refusal::PerSource)
        } else if held > 0 && open.total >= l.max - self.reserved {
            Some(Refusal::Reserved)
        } else {
            None
        };
        if let Some(r) = refusal {
            drop(open);
            self.metrics.refused.inc();
            self.metrics.reasons.inc(r);
            return Err(r);
        }
        open.total += 1;
        *open.per_source.entry(source).or_insert(0) += 1;
        drop(open);
        self.metrics.open.inc();
        Ok(ConnSlot {
            gate: Arc::clone(self),
            source,
            first_request_by: Instant::now() + l.first_request,
        })
    }

    /// Connections holding a slot now.
    pub fn open(&self) -> usize {
        self.open.lock().total
    }

    /// Slots that only admit sources holding none.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    pub fn metrics(&self) -> &GateMetrics {
        &self.metrics
    }
}

impl ConnSlot {
    /// When the connection's first valid request must have arrived.
    pub fn first_request_deadline(&self) -> Instant {
        self.first_request_by
    }

    /// The listener's first-request deadline, as configured.
    pub fn first_request_timeout(&self) -> Duration {
        self.gate.limits.first_request
    }

    /// Counts this connection as closed for sending no valid request in time.
    pub fn first_request_timed_out(&self) -> FirstRequestTimeout {
        self.gate.metrics.reasons.inc(Refusal::FirstRequestTimeout);
        FirstRequestTimeout(self.gate.limits.first_request)
    }

    /// Runs `step` (a TLS handshake, the HA handshake) under the first-request deadline;
    /// past it the step is dropped and the timeout counted.
    pub async fn before_first_request<F: Future>(
        &self,
        step: F,
    ) -> Result<F::Output, FirstRequestTimeout> {
        match tokio::time::timeout_at(self.first_request_by, step).await {
            Ok(out) => Ok(out),
            Err(_) => Err(self.first_request_timed_out()),
        }
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let mut open = self.gate.open.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_source.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                open.per_source.remove(&self.source);
            }
        }
        drop(open);
        self.gate.metrics.open.dec();
    }
}

/// An IPv4 peer reached over a dual-stack socket shows up as `::ffff:a.b.c.d`; it is the
/// same source as `a.b.c.d`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Keepalive probes after `keepalive` idle (none when zero), and `TCP_USER_TIMEOUT`: the
/// kernel drops the connection when sent data stays unacknowledged for `user_timeout`
/// (a peer that vanished, or one whose window stays shut). Failures are logged only: the
/// connection still works, the write deadline still bounds it.
pub fn tune_socket(stream: &TcpStream, keepalive: Duration, user_timeout: Duration) {
    let _ = stream.set_nodelay(true);
    let sock = socket2::SockRef::from(stream);
    if !keepalive.is_zero() {
        let ka = socket2::TcpKeepalive::new()
            .with_time(keepalive)
            .with_interval(Duration::from_secs(10))
            .with_retries(3);
        if let Err(e) = sock.set_tcp_keepalive(&ka) {
            tracing::debug!(error = %e, "cannot enable TCP keepalive");
        }
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = sock.set_tcp_user_timeout(Some(user_timeout)) {
        tracing::debug!(error = %e, "cannot set TCP_USER_TIMEOUT");
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = user_timeout;
}

#[cfg(test)]
mod tests;
