//! The memory gRPC request messages hold, under the budgets the remoting port's requests
//! have: `maxInFlightBytesPerConnection` per connection and `maxInFlightBytesTotal`
//! across the broker (one budget for both ports).
//!
//! tonic allocates a message's whole announced length as soon as its 5-byte prefix has
//! arrived, and a stream keeps the largest buffer it grew for as long as it lives (a
//! Telemetry stream: as long as the client runs). Without a budget, a prefix of a few
//! bytes on each of many streams held the decode limit each. So every request body is
//! read here before tonic reads it: a prefix reserves its announced length, a stream's
//! reservation is the largest message it announced, and it is freed when the stream's
//! body and its call are both gone. A prefix that does not fit ends the call with
//! RESOURCE_EXHAUSTED naming the key, before tonic allocates.
//!
//! Telemetry carries only small commands from the client (its Settings), but its
//! reservation lasts the stream's life, so its messages have a smaller cap of their own,
//! `grpcMaxTelemetryMessageSize`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use parking_lot::Mutex;
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
    bytes: usize,
    permits: Vec<InFlightPermit>,
}

/// One call's reservation, shared by its body and its response future.
struct Held {
    connection: Option<Arc<InFlightLimit>>,
    budgets: Arc<Budgets>,
    permits: Mutex<Reserved>,
}

impl Held {
    /// Grows the reservation to `len` bytes (a reservation never shrinks: the stream's
    /// buffer does not either).
    // tonic's Status is what the call ends with.
    #[allow(clippy::result_large_err)]
    fn grow_to(&self, len: usize) -> Result<(), Status> {
        let mut reserved = self.permits.lock();
        if len <= reserved.bytes {
            return Ok(());
        }
        let more = len - reserved.bytes;
        let refuse = |key: &'static str| {
            self.budgets.refusals.count(key);
            Status::resource_exhausted(format!(
                "a {len}-byte request message does not fit in the bytes requests \
                 may hold ({key})"
            ))
        };
        let connection = match &self.connection {
            Some(limit) => Some(
                limit
                    .try_acquire_units(more)
                    .ok_or_else(|| refuse("maxInFlightBytesPerConnection"))?,
            ),
            None => None,
        };
        let total = self
            .budgets
            .total
            .try_acquire_units(more)
            .ok_or_else(|| refuse("maxInFlightBytesTotal"))?;
        reserved.permits.extend(connection);
        reserved.permits.push(total);
        reserved.bytes = len;
        Ok(())
    }
}

/// A request body read ahead of tonic's decoder.
struct BudgetedBody {
    inner: Body,
    scan: PrefixScan,
    held: Arc<Held>,
    cap: Cap,
    failed: bool,
}

impl BudgetedBody {
    // tonic's Status is what the call ends with.
    #[allow(clippy::result_large_err)]
    fn admit(&mut self, data: &[u8]) -> Result<(), Status> {
        let (held, cap) = (&self.held, self.cap);
        self.scan.feed(data, |len| {
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
            held.grow_to(len + PREFIX_LEN)
        })
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
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
            && let Err(status) = this.admit(data)
        {
            this.failed = true;
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

/// Finds the message prefixes in a body's bytes, however they are split into frames.
#[derive(Default)]
struct PrefixScan {
    prefix: [u8; PREFIX_LEN],
    have: usize,
    /// Bytes of the current message still to come.
    rest: usize,
}

impl PrefixScan {
    /// Calls `on_message` with each message length announced in `data`.
    fn feed<E>(
        &mut self,
        mut data: &[u8],
        mut on_message: impl FnMut(usize) -> Result<(), E>,
    ) -> Result<(), E> {
        while !data.is_empty() {
            if self.rest > 0 {
                let n = self.rest.min(data.len());
                self.rest -= n;
                data = &data[n..];
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
                self.rest = len;
                on_message(len)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
