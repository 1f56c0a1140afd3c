//! The metrics port's byte stream. With `tls.metrics.enable` it is plaintext HTTP or HTTPS
//! (the remoting port's certificate, no client certificate asked for), chosen per
//! connection the way `tls.server.mode` chooses on the remoting port: in `permissive` mode
//! the first byte decides (0x16 opens a TLS ClientHello; an HTTP request opens with a
//! method name), in `enforcing` mode anything but a ClientHello is refused.
//!
//! Detection and the handshake run inside the connection's first reads, not in the
//! accept loop: a peer that stalls its handshake holds up only its own connection, and
//! the listener's idle deadline (`httpIdleTimeoutMillis`) closes it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::tls::{TLS_HANDSHAKE, TlsMode, TlsServer, refused};

pub struct HttpStream(State);

enum State {
    Plain(TcpStream),
    /// TLS is on: waiting for the peer's first byte.
    Detect(TcpStream, Arc<TlsServer>),
    Handshake(Box<tokio_rustls::Accept<TcpStream>>),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// Refused or failed; every further call fails.
    Closed,
}

impl HttpStream {
    /// `tls`: the server whose certificate and mode apply, or `None` for plaintext only.
    pub fn new(tcp: TcpStream, tls: Option<Arc<TlsServer>>) -> Self {
        Self(match tls {
            Some(tls) => State::Detect(tcp, tls),
            None => State::Plain(tcp),
        })
    }

    /// Whether the connection runs TLS (known once the first byte arrived).
    pub fn is_tls(&self) -> bool {
        matches!(self.0, State::Handshake(_) | State::Tls(_))
    }

    /// Advances detection and the handshake; ready once the stream carries HTTP.
    fn poll_established(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match &mut self.0 {
                State::Plain(_) | State::Tls(_) => return Poll::Ready(Ok(())),
                State::Closed => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::NotConnected,
                        "connection closed by TLS",
                    )));
                }
                State::Detect(tcp, tls) => {
                    let mut first = [0u8; 1];
                    let mut buf = ReadBuf::new(&mut first);
                    let peeked = ready!(tcp.poll_peek(cx, &mut buf));
                    let hello = match peeked {
                        Ok(n) => n == 1 && first[0] == TLS_HANDSHAKE,
                        Err(e) => {
                            self.0 = State::Closed;
                            return Poll::Ready(Err(e));
                        }
                    };
                    if !hello && tls.mode() == TlsMode::Enforcing {
                        self.0 = State::Closed;
                        return Poll::Ready(Err(refused(
                            "plaintext refused (tls.server.mode=enforcing, tls.metrics.enable=true)",
                        )));
                    }
                    let acceptor = hello.then(|| tls.http_acceptor());
                    if let State::Detect(tcp, _) = std::mem::replace(&mut self.0, State::Closed) {
                        self.0 = match acceptor {
                            Some(acceptor) => State::Handshake(Box::new(acceptor.accept(tcp))),
                            None => State::Plain(tcp),
                        };
                    }
                }
                State::Handshake(accept) => match ready!(Pin::new(accept.as_mut()).poll(cx)) {
                    Ok(stream) => self.0 = State::Tls(Box::new(stream)),
                    Err(e) => {
                        self.0 = State::Closed;
                        return Poll::Ready(Err(e));
                    }
                },
            }
        }
    }
}

impl AsyncRead for HttpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_established(cx))?;
        match &mut this.0 {
            State::Plain(s) => Pin::new(s).poll_read(cx, buf),
            State::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            _ => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }
}

impl AsyncWrite for HttpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_established(cx))?;
        match &mut this.0 {
            State::Plain(s) => Pin::new(s).poll_write(cx, buf),
            State::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            _ => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            State::Plain(s) => Pin::new(s).poll_flush(cx),
            State::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            // Nothing was written yet.
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            State::Plain(s) => Pin::new(s).poll_shutdown(cx),
            State::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            _ => Poll::Ready(Ok(())),
        }
    }
}
