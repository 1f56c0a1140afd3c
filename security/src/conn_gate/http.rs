//! The metrics/health port's listener for `axum::serve`: admission through a
//! [`ConnGate`], then two deadlines per connection.
//!
//! - First request: the connection must deliver a complete request head (request line
//!   and headers up to the empty line) within the gate's first-request deadline
//!   (`httpFirstRequestTimeoutMillis`), TLS handshake included. Bytes trickling in do not
//!   extend it, so a peer cannot hold a slot by sending a header byte now and then.
//! - Idle: a connection that moves no byte either way for `httpIdleTimeoutMillis` is
//!   closed (counted in `idle_closed`), so kept-alive scrapers that went away, or peers
//!   that stop reading an answer, give their slot back.
//!
//! With `tls` (`tls.metrics.enable`) connections get HTTPS as [`HttpStream`] describes;
//! the head is looked for in the decrypted bytes.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::time::{Instant, Sleep};

use super::{ConnGate, ConnSlot};
use crate::http_stream::HttpStream;
use crate::tls::TlsServer;

pub struct GatedListener {
    pub inner: TcpListener,
    pub gate: Arc<ConnGate>,
    pub idle: Duration,
    pub idle_closed: Counter,
    pub tls: Option<Arc<TlsServer>>,
}

/// An admitted HTTP connection: the stream, its slot and its deadlines.
pub struct GatedIo {
    stream: HttpStream,
    slot: ConnSlot,
    idle: Duration,
    /// Whether the first request head is complete yet.
    head: HeadScan,
    /// The idle deadline, or the first-request one while it is earlier and the head is
    /// not complete. Pushed back by every read or write that moves bytes.
    deadline: Pin<Box<Sleep>>,
    idle_closed: Counter,
}

impl axum::serve::Listener for GatedListener {
    type Io = GatedIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, peer)) => match self.gate.admit(peer.ip()) {
                    Ok(slot) => {
                        let idle = self.idle.max(Duration::from_millis(1));
                        let first = slot.first_request_deadline();
                        let io = GatedIo {
                            stream: HttpStream::new(stream, self.tls.clone()),
                            slot,
                            idle,
                            head: HeadScan::default(),
                            deadline: Box::pin(tokio::time::sleep_until(
                                first.min(Instant::now() + idle),
                            )),
                            idle_closed: self.idle_closed.clone(),
                        };
                        return (io, peer);
                    }
                    Err(reason) => {
                        tracing::debug!(%peer, %reason, "HTTP connection refused at accept")
                    }
                },
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl GatedIo {
    /// Maps a pending I/O to a timeout error once the deadline passes; any progress
    /// pushes the idle deadline back, never the first-request one.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(r) => {
                let mut next = Instant::now() + self.idle;
                if !self.head.done {
                    next = next.min(self.slot.first_request_deadline());
                }
                self.deadline.as_mut().reset(next);
                Poll::Ready(r)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                // The earlier of the two fired: the first-request deadline only if it
                // has passed (a silent peer under a shorter idle timeout is idle).
                Poll::Ready(())
                    if !self.head.done && Instant::now() >= self.slot.first_request_deadline() =>
                {
                    self.slot.first_request_timed_out();
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no complete HTTP request head within httpFirstRequestTimeoutMillis",
                    )))
                }
                Poll::Ready(()) => {
                    self.idle_closed.inc();
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "HTTP connection idle past httpIdleTimeoutMillis",
                    )))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncRead for GatedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if !this.head.done && matches!(polled, Poll::Ready(Ok(()))) {
            this.head.feed(&buf.filled()[before..]);
        }
        this.watch(cx, polled)
    }
}

impl AsyncWrite for GatedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        this.watch(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Finds the end of the first request head: a non-empty line followed by an empty one.
/// Lines end in CRLF or, as hyper also accepts, a bare LF. Empty lines before the
/// request line (which servers skip) do not count, so "\r\n\r\n" alone completes
/// nothing.
#[derive(Debug, Default)]
struct HeadScan {
    /// Bytes other than CR since the last LF.
    in_line: bool,
    /// A non-empty line ended.
    saw_line: bool,
    done: bool,
}

impl HeadScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match b {
                b'\n' if self.in_line => {
                    self.saw_line = true;
                    self.in_line = false;
                }
                b'\n' if self.saw_line => {
                    self.done = true;
                    return;
                }
                b'\n' | b'\r' => {}
                _ => self.in_line = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(chunks: &[&[u8]]) -> bool {
        let mut h = HeadScan::default();
        for c in chunks {
            h.feed(c);
        }
        h.done
    }

    #[test]
    fn a_head_ends_at_the_first_empty_line_after_a_request_line() {
        assert!(complete(&[b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"]));
        assert!(complete(&[b"GET / HTTP/1.1\r\n\r\n"]));
        assert!(complete(&[b"GET / HTTP/1.1\n\n"]));
        // Split anywhere, byte by byte included.
        let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        let bytes: Vec<&[u8]> = head.chunks(1).collect();
        assert!(complete(&bytes));
        assert!(complete(&[b"GET / HTTP/1.1\r", b"\n\r", b"\n"]));
        assert!(!complete(&[b"GET / HTTP/1.1\r\nHost: x\r\n"]));
        assert!(!complete(&[b"GET / HTTP/1.1\r\nHost: x\r\n\r"]));
        // Leading empty lines are not a request.
        assert!(!complete(&[b"\r\n\r\n\r\n\n\n"]));
        assert!(!complete(&[b""]));
    }
}
