//! The memory gRPC request messages hold, under the budgets the remoting port's requests
//! have: `maxInFlightBytesPerConnection` per connection and `maxInFlightBytesTotal`
//! across the broker (one budget for both ports).
//!
//! tonic reserves a message's whole announced length as soon as its 5-byte prefix has
//! arrived, and a stream keeps the largest buffer it grew for as long as it lives (a
//! Telemetry stream: as long as the client runs). Without a budget, a prefix of a few
//! bytes on each of many streams held the decode limit each. So every request body is
//! read here before tonic reads it, and a stream's reservation follows its buffer:
//! - the connection's budget holds the largest length the stream announced (the
//!   capacity tonic reserved), so one connection's prefixes cannot reserve more than
//!   `maxInFlightBytesPerConnection`;
//! - the broker's total, shared with every client of both ports, holds only the bytes
//!   that arrived (the most of one message): a prefix costs the attacker nothing, and
//!   prefixes reserving their length there let two stalled calls refuse every other
//!   client's sends.
//!
//! Both are freed when the stream's body and its call are both gone. A prefix or bytes
//! that do not fit end the call with RESOURCE_EXHAUSTED naming the key, before tonic
//! buffers them. A message must arrive whole within `grpcRequestMessageTimeoutMillis` of
//! its prefix, or its call ends with DEADLINE_EXCEEDED: a stalled message would hold
//! what it reserved for as long as the peer keeps the connection open.
//!
//! Telemetry carries only small commands from the client (its Settings), but its
//! reservation lasts the stream's life, so its messages have a smaller cap of their own,
//! `grpcMaxTelemetryMessageSize`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use parking_lot::Mutex;
use tokio::time::Sleep;
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

use super::metadata::Peer;
use crate::in_flight::{InFlightLimit, InFlightPermit};
use crate::metrics::limits::Refusals;

/// The Telemetry method's path: its messages have their own cap.
const TELEMETRY_PATH: &str = "/apache.rocketmq.v2.MessagingService/Telemetry";
/// A gRPC message prefix: compressed flag, then the length (big-endian u32).
const PREFIX_LEN: usize = 5;

/// The broker-wide side of the budget.
pub struct Budgets {
    /// `maxInFlightBytesTotal`, shared with the remoting port.
    pub total: Arc<InFlightLimit>,
    /// The decode limit: a longer message is refused by tonic without allocating, so it
    /// reserves nothing here.
    pub max_message: usize,
    /// `grpcMaxTelemetryMessageSize`.
    pub max_telemetry_message: usize,
    /// `grpcRequestMessageTimeoutMillis`.
    pub message_timeout: Duration,
    pub refusals: Refusals,
}

/// Wraps the gRPC routes so every request body is budgeted.
#[derive(Clone)]
pub struct BudgetLayer(Arc<Budgets>);

impl BudgetLayer {
    pub fn new(budgets: Budgets) -> Self {
        Self(Arc::new(budgets))
    }
}

impl<S> Layer<S> for BudgetLayer {
    type Service = Budgeted<S>;
    fn layer(&self, inner: S) -> Budgeted<S> {
        Budgeted {
            inner,
            budgets: Arc::clone(&self.0),
        }
    }
}

#[derive(Clone)]
pub struct Budgeted<S> {
    inner: S,
    budgets: Arc<Budgets>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ResBody> Service<http::Request<Body>> for Budgeted<S>
where
    S: Service<http::Request<Body>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let cap = if request.uri().path() == TELEMETRY_PATH {
            Cap::Telemetry(self.budgets.max_telemetry_message)
        } else {
            Cap::Decode
        };
        let held = Arc::new(Held {
            connection: request
                .extensions()
                .get::<Peer>()
                .map(|p| Arc::clone(&p.bytes)),
            budgets: Arc::clone(&self.budgets),
            permits: Mutex::new(Reserved::default()),
        });
        let request = request.map(|inner| {
            Body::new(BudgetedBody {
                inner,
                scan: PrefixScan::default(),
                held: Arc::clone(&held),
                cap,
                deadline: None,
                failed: false,
            })
        });
        let call = self.inner.call(request);
        Box::pin(async move {
            let answer = call.await;
            // The handler is done with the decoded request; the body, if it still
            // lives (a stream), keeps its own reference.
            drop(held);
            answer
        })
    }
}

#[derive(Clone, Copy)]
enum Cap {
    /// Only the decode limit (tonic's own check).
    Decode,
    /// `grpcMaxTelemetryMessageSize`.
    Telemetry(usize),
}

#[derive(Default)]
struct Reserved {
    /// Held on the connection: the largest message announced (prefix included).
    announced: usize,
    connection: Option<InFlightPermit>,
    /// Held on the broker's total: the most bytes of one message that arrived.
    arrived: usize,
    total: Option<InFlightPermit>,
}

/// One call's reservation, shared by its body and its response future.
struct Held {
    connection: Option<Arc<InFlightLimit>>,
    budgets: Arc<Budgets>,
    permits: Mutex<Reserved>,
}

/// Grows `held` (`*reserved` units of `limit`) to `len` units; a reservation never
/// shrinks, as the stream's buffer does not either. `None` when the growth does not fit.
fn grow(
    limit: &Arc<InFlightLimit>,
    reserved: &mut usize,
    held: &mut Option<InFlightPermit>,
    len: usize,
) -> Option<()> {
    if len <= *reserved {
        return Some(());
    }
    let more = limit.try_acquire_units(len - *reserved)?;
    match held {
        Some(permit) => permit.absorb(more),
        None => *held = Some(more),
    }
    *reserved = len;
    Some(())
}

impl Held {
    fn refuse(&self, what: String, key: &'static str) -> Status {
        self.budgets.refusals.count(key);
        Status::resource_exhausted(format!(
            "{what} does not fit in the bytes requests may hold ({key})"
        ))
    }

    /// The connection's side: a message of `len` bytes (prefix included) announced.
    // tonic's Status is what the call ends with.
    #[allow(clippy::result_large_err)]
    fn announce(&self, len: usize) -> Result<(), Status> {
        let Some(limit) = &self.connection else {
            return Ok(());
        };
        let r = &mut *self.permits.lock();
        grow(limit, &mut r.announced, &mut r.connection, len).ok_or_else(|| {
            self.refuse(
                format!("a {len}-byte request message"),
                "maxInFlightBytesPerConnection",
            )
        })
    }

    /// The broker's side: `len` bytes of one message (prefix included) arrived.
    #[allow(clippy::result_large_err)]
    fn arrive(&self, len: usize) -> Result<(), Status> {
        let r = &mut *self.permits.lock();
        grow(&self.budgets.total, &mut r.arrived, &mut r.total, len).ok_or_else(|| {
            self.refuse(
                format!("{len} bytes of a request message"),
                "maxInFlightBytesTotal",
            )
        })
    }
}

/// A request body read ahead of tonic's decoder.
struct BudgetedBody {
    inner: Body,
    scan: PrefixScan,
    held: Arc<Held>,
    cap: Cap,
    /// When the incomplete message (the scan's `started`-th) must have arrived.
    deadline: Option<(u64, Pin<Box<Sleep>>)>,
    failed: bool,
}

impl BudgetedBody {
    // tonic's Status is what the call ends with.
    #[allow(clippy::result_large_err)]
    fn admit(&mut self, data: &[u8]) -> Result<(), Status> {
        let (held, cap) = (&self.held, self.cap);
        self.scan.feed(data, |seen| match seen {
            Seen::Announced(len) => {
                if let Cap::Telemetry(max) = cap
                    && len > max
                {
                    held.budgets.refusals.count("grpcMaxTelemetryMessageSize");
                    return Err(Status::resource_exhausted(format!(
                        "a {len}-byte Telemetry command is over grpcMaxTelemetryMessageSize ({max})"
                    )));
                }
                if len > held.budgets.max_message {
                    // tonic refuses it without allocating.
                    return Ok(());
                }
                held.announce(len + PREFIX_LEN)
            }
            Seen::Arrived { announced, bytes } if announced <= held.budgets.max_message => {
                held.arrive(bytes)
            }
            Seen::Arrived { .. } => Ok(()),
        })?;
        // A message still incomplete has its deadline from the moment it was announced.
        match self.scan.incomplete() {
            Some(announced) if announced <= self.held.budgets.max_message => {
                if self.deadline.as_ref().map(|(n, _)| *n) != Some(self.scan.started) {
                    let timeout = self.held.budgets.message_timeout;
                    self.deadline =
                        Some((self.scan.started, Box::pin(tokio::time::sleep(timeout))));
                }
            }
            _ => self.deadline = None,
        }
        Ok(())
    }

    fn timed_out(&self) -> Status {
        let budgets = &self.held.budgets;
        budgets.refusals.count("grpcRequestMessageTimeoutMillis");
        Status::deadline_exceeded(format!(
            "a request message did not arrive whole within {} ms of its prefix \
             (grpcRequestMessageTimeoutMillis)",
            budgets.message_timeout.as_millis()
        ))
    }
}

impl HttpBody for BudgetedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                if let Some((_, deadline)) = &mut this.deadline
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    this.failed = true;
                    this.deadline = None;
                    return Poll::Ready(Some(Err(this.timed_out())));
                }
                return Poll::Pending;
            }
        };
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
            && let Err(status) = this.admit(data)
        {
            this.failed = true;
            this.deadline = None;
            return Poll::Ready(Some(Err(status)));
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What a body's bytes said, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// A prefix announcing a message of this many bytes.
    Announced(usize),
    /// `bytes` of the current message have arrived so far, its prefix included.
    Arrived { announced: usize, bytes: usize },
}

/// Finds the message prefixes in a body's bytes, however they are split into frames.
#[derive(Default)]
struct PrefixScan {
    prefix: [u8; PREFIX_LEN],
    have: usize,
    /// The current message's announced length, and its bytes still to come.
    len: usize,
    rest: usize,
    /// Messages announced so far.
    started: u64,
}

impl PrefixScan {
    /// Calls `on` with each message length announced in `data` and with the bytes of the
    /// current message that have arrived.
    fn feed<E>(
        &mut self,
        mut data: &[u8],
        mut on: impl FnMut(Seen) -> Result<(), E>,
    ) -> Result<(), E> {
        while !data.is_empty() {
            if self.rest > 0 {
                let n = self.rest.min(data.len());
                self.rest -= n;
                data = &data[n..];
                on(Seen::Arrived {
                    announced: self.len,
                    bytes: PREFIX_LEN + self.len - self.rest,
                })?;
                continue;
            }
            let n = (PREFIX_LEN - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == PREFIX_LEN {
                let [_, a, b, c, d] = self.prefix;
                let len = u32::from_be_bytes([a, b, c, d]) as usize;
                self.have = 0;
                self.len = len;
                self.rest = len;
                self.started += 1;
                on(Seen::Announced(len))?;
                on(Seen::Arrived {
                    announced: len,
                    bytes: PREFIX_LEN,
                })?;
            }
        }
        Ok(())
    }

    /// The announced length of a message whose bytes have not all arrived.
    fn incomplete(&self) -> Option<usize> {
        (self.rest > 0).then_some(self.len)
    }
}

#[cfg(test)]
mod tests;
