//! Admission limits every listener of the broker and the nameserver applies to its
//! peers: connection caps (`maxConnections`, `maxConnectionsPerIp`, `haMaxConnections`,
//! `httpMaxConnections`), the socket options every accepted connection gets (TCP
//! keepalive, `TCP_USER_TIMEOUT`), and the HTTP listener's idle timeout.
//!
//! A peer over a cap is closed right after `accept`, before anything is read or spawned:
//! the listener keeps draining its backlog, so the process never reaches EMFILE and
//! legitimate clients keep getting through once others leave. 4.9 has no such cap
//! (Netty accepts until the fd limit).
//!
//! An HTTP connection that moves no byte either way for `httpIdleTimeoutMillis` is
//! closed, so peers that connect and say nothing (or stop reading a response) cannot hold
//! the capped slots and lock scrapers and probes out of `/metrics` and `/readyz`. The same
//! deadline bounds a TLS handshake on that port.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

use crate::http_stream::HttpStream;
use crate::tls::TlsServer;

/// The caps of one listener and who holds a slot.
#[derive(Debug)]
pub struct ConnGate {
    max: usize,
    /// 0: no per-IP cap.
    max_per_ip: usize,
    open: Mutex<Open>,
    open_gauge: Gauge,
    refused: Counter,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// One admitted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnSlot {
    gate: Arc<ConnGate>,
    ip: IpAddr,
}

impl ConnGate {
    /// `max` connections in all (at least 1), `max_per_ip` per source address (0: none);
    /// `open_gauge` and `refused` are this listener's series.
    pub fn new(max: usize, max_per_ip: usize, open_gauge: Gauge, refused: Counter) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            max_per_ip,
            open: Mutex::new(Open::default()),
            open_gauge,
            refused,
        })
    }

    /// A slot for a connection from `ip`, or `None` (counted) when a cap is reached.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<ConnSlot> {
        let mut open = self.open.lock();
        let from_ip = open.per_ip.get(&ip).copied().unwrap_or(0);
        if open.total >= self.max || (self.max_per_ip > 0 && from_ip >= self.max_per_ip) {
            drop(open);
            self.refused.inc();
            return None;
        }
        open.total += 1;
        *open.per_ip.entry(ip).or_insert(0) += 1;
        self.open_gauge.inc();
        Some(ConnSlot {
            gate: Arc::clone(self),
            ip,
        })
    }

    /// Connections holding a slot now.
    pub fn open(&self) -> usize {
        self.open.lock().total
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let mut open = self.gate.open.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
        self.gate.open_gauge.dec();
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

/// A listener for `axum::serve` that admits connections through a [`ConnGate`]; a peer
/// over the cap is closed right after `accept`, and an admitted one after `idle` without
/// progress (counted in `idle_closed`). With `tls` (`tls.metrics.enable`) connections
/// get HTTPS as [`HttpStream`] describes.
pub struct GatedListener {
    pub inner: TcpListener,
    pub gate: Arc<ConnGate>,
    pub idle: Duration,
    pub idle_closed: Counter,
    pub tls: Option<Arc<TlsServer>>,
}

/// An admitted HTTP connection: the stream, its slot and its idle deadline.
pub struct GatedIo {
    stream: HttpStream,
    _slot: ConnSlot,
    idle: Duration,
    /// Pushed back by every read or write that moves bytes.
    deadline: Pin<Box<Sleep>>,
    idle_closed: Counter,
}

impl axum::serve::Listener for GatedListener {
    type Io = GatedIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, peer)) => {
                    if let Some(slot) = self.gate.admit(peer.ip()) {
                        let idle = self.idle.max(Duration::from_millis(1));
                        return (
                            GatedIo {
                                stream: HttpStream::new(stream, self.tls.clone()),
                                _slot: slot,
                                idle,
                                deadline: Box::pin(tokio::time::sleep(idle)),
                                idle_closed: self.idle_closed.clone(),
                            },
                            peer,
                        );
                    }
                }
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
    /// Maps a pending I/O to a timeout error once the idle deadline passes; any progress
    /// pushes the deadline back.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(r) => {
                let next = Instant::now() + self.idle;
                self.deadline.as_mut().reset(next);
                Poll::Ready(r)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
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
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(max: usize, per_ip: usize) -> Arc<ConnGate> {
        ConnGate::new(max, per_ip, Gauge::default(), Counter::default())
    }

    #[test]
    fn global_and_per_ip_caps_free_on_drop() {
        let g = gate(3, 2);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let a1 = g.admit(a).expect("a1");
        let a2 = g.admit(a).expect("a2");
        assert!(g.admit(a).is_none(), "per-IP cap");
        let b1 = g.admit(b).expect("b1");
        assert!(g.admit(b).is_none(), "global cap");
        assert_eq!(g.refused.get(), 2);
        assert_eq!(g.open_gauge.get(), 3);
        drop(a1);
        assert!(g.admit(b).is_some(), "a freed slot is reusable");
        drop((a2, b1));
        assert_eq!(g.open(), 0);
        assert_eq!(g.open_gauge.get(), 0);
    }

    #[test]
    fn no_per_ip_cap_when_zero() {
        let g = gate(4, 0);
        let ip: IpAddr = [127, 0, 0, 1].into();
        let slots: Vec<_> = (0..4).map(|_| g.admit(ip).expect("slot")).collect();
        assert!(g.admit(ip).is_none());
        drop(slots);
    }

    #[tokio::test]
    async fn an_idle_http_peer_is_closed_and_counted() {
        use tokio::io::AsyncReadExt;
        let inner = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = inner.local_addr().expect("addr");
        let idle_closed = Counter::default();
        let mut listener = GatedListener {
            inner,
            gate: gate(4, 0),
            idle: Duration::from_millis(200),
            idle_closed: idle_closed.clone(),
            tls: None,
        };
        let mut silent = TcpStream::connect(addr).await.expect("connect");
        let (mut io, _) = axum::serve::Listener::accept(&mut listener).await;
        // The server side waits for a request that never comes.
        let mut buf = [0u8; 16];
        let err = tokio::time::timeout(Duration::from_secs(10), io.read(&mut buf))
            .await
            .expect("the idle deadline fires")
            .expect_err("an idle read fails");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(idle_closed.get(), 1);
        drop(io);
        // The slot is freed and the peer sees the close.
        assert_eq!(listener.gate.open(), 0);
        let n = silent.read(&mut buf).await.unwrap_or(0);
        assert_eq!(n, 0);
    }

    #[tokio::test]
    async fn progress_pushes_the_idle_deadline_back() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let inner = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = inner.local_addr().expect("addr");
        let mut listener = GatedListener {
            inner,
            gate: gate(4, 0),
            idle: Duration::from_millis(300),
            idle_closed: Counter::default(),
            tls: None,
        };
        let mut peer = TcpStream::connect(addr).await.expect("connect");
        let (mut io, _) = axum::serve::Listener::accept(&mut listener).await;
        // Five bytes 100 ms apart: 500 ms in all, longer than the idle timeout, but never
        // 300 ms without progress.
        for i in 0..5u8 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            peer.write_all(&[i]).await.expect("write");
            let mut b = [0u8; 1];
            io.read_exact(&mut b)
                .await
                .expect("progress keeps the connection");
            assert_eq!(b[0], i);
        }
    }
}
