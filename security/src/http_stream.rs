//! The metrics port's byte stream. With `tls.metrics.enable` it is plaintext HTTP or HTTPS,
//! decided per connection by [`TlsServer::accept_http`]: the remoting port's mode
//! (`permissive`: the first byte decides; `enforcing`: TLS only) and certificate, with no
//! client certificate asked for.
//!
//! That detection and handshake run inside the connection's first reads, not in the
//! accept loop: a peer that stalls its handshake holds up only its own connection, and
//! the listener's idle deadline (`httpIdleTimeoutMillis`) closes it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::tls::{MaybeTls, TlsError, TlsServer};

type Accepting = Pin<Box<dyn Future<Output = io::Result<MaybeTls>> + Send>>;

pub struct HttpStream(State);

enum State {
    /// [`TlsServer::accept_http`] at work.
    Accepting(Accepting),
    Open(MaybeTls),
    /// Refused or failed; every further call fails.
    Closed,
}

/// The TLS server the metrics port uses: the remoting port's when `enable`
/// (`tls.metrics.enable`), which then must exist.
pub fn metrics_tls(
    remoting: Option<&Arc<TlsServer>>,
    enable: bool,
) -> Result<Option<Arc<TlsServer>>, TlsError> {
    match (remoting, enable) {
        (_, false) => Ok(None),
        (Some(tls), true) => Ok(Some(Arc::clone(tls))),
        (None, true) => Err(TlsError::MetricsWithoutTls),
    }
}

impl HttpStream {
    /// `tls`: the server whose certificate and mode apply, or `None` for plaintext only.
    pub fn new(tcp: TcpStream, tls: Option<Arc<TlsServer>>) -> Self {
        Self(match tls {
            Some(tls) => State::Accepting(Box::pin(async move { tls.accept_http(tcp).await })),
            None => State::Open(MaybeTls::Plain(tcp)),
        })
    }

    /// The established stream, once detection and the handshake are done.
    fn poll_open(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&mut MaybeTls>> {
        if let State::Accepting(accepting) = &mut self.0 {
            match ready!(accepting.as_mut().poll(cx)) {
                Ok(stream) => self.0 = State::Open(stream),
                Err(e) => {
                    self.0 = State::Closed;
                    return Poll::Ready(Err(e));
                }
            }
        }
        Poll::Ready(match &mut self.0 {
            State::Open(stream) => Ok(stream),
            _ => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "connection closed by TLS",
            )),
        })
    }
}

impl AsyncRead for HttpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let stream = ready!(self.get_mut().poll_open(cx))?;
        Pin::new(stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for HttpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let stream = ready!(self.get_mut().poll_open(cx))?;
        Pin::new(stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            State::Open(stream) => Pin::new(stream).poll_flush(cx),
            // Nothing was written yet.
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            State::Open(stream) => Pin::new(stream).poll_shutdown(cx),
            _ => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_tls_needs_the_remoting_ports() {
        assert!(metrics_tls(None, false).unwrap().is_none());
        let err = metrics_tls(None, true).unwrap_err();
        assert!(err.to_string().contains("tls.server.mode"), "{err}");
    }
}
