//! Reading a connection's frames: decoded under the listener's length cap, bounded by
//! the slot's first-request deadline until the first complete frame arrives (counted
//! from accept; partial frames do not push it back), then by
//! `serverChannelMaxIdleTimeSeconds` between frames (4.x clients heartbeat every 30 s).
//! A frame that does not decode ends this connection only.

use std::net::SocketAddr;
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use protocol::{ProtocolError, RemotingCodec, RemotingCommand};
use security::conn_gate::ConnSlot;
use tokio::io::AsyncRead;
use tokio::time::Instant;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

/// What one read gave: a frame, the end of input, or a failure.
type Read = Option<Result<RemotingCommand, ProtocolError>>;

/// The read half of a served connection. It holds the connection's place under its
/// listener's caps (the [`ConnSlot`]) for as long as it lives.
pub struct FrameReader<R> {
    frames: FramedRead<R, RemotingCodec>,
    peer: SocketAddr,
    slot: ConnSlot,
    idle: Duration,
    /// The first-request deadline, until the first frame has arrived.
    first_request_by: Option<Instant>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames of at most `max_frame` bytes from `read`, buffered `buffer` bytes at a time.
    pub fn new(
        read: R,
        max_frame: usize,
        buffer: usize,
        peer: SocketAddr,
        slot: ConnSlot,
        idle: Duration,
    ) -> Self {
        let first_request_by = Some(slot.first_request_deadline());
        Self {
            frames: FramedRead::with_capacity(read, RemotingCodec::new(max_frame), buffer),
            peer,
            slot,
            idle,
            first_request_by,
        }
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// A frame already buffered or readable at once, without arming any timer:
    /// `Ready(None)` when the connection has ended, `Pending` when [`Self::next`] has to
    /// wait.
    pub async fn ready(&mut self) -> Poll<Option<RemotingCommand>> {
        match futures::poll!(self.frames.next()) {
            Poll::Ready(read) => Poll::Ready(self.take(read)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The next frame; `None` when the connection ends: the peer closed it or sent a
    /// frame that does not decode, the first-request deadline or the idle timeout
    /// passed, or `close` was cancelled.
    pub async fn next(&mut self, close: &CancellationToken) -> Option<RemotingCommand> {
        let idle_by = Instant::now() + self.idle;
        let until = self.first_request_by.map_or(idle_by, |by| by.min(idle_by));
        let read = tokio::select! {
            _ = close.cancelled() => return None,
            read = tokio::time::timeout_at(until, self.frames.next()) => read,
        };
        let peer = self.peer;
        match read {
            Ok(read) => self.take(read),
            Err(_) if self.first_request_by.is_some() => {
                let e = self.slot.first_request_timed_out();
                tracing::info!(%peer, error = %e, "no request within firstRequestTimeoutMillis, closing");
                None
            }
            Err(_) => {
                tracing::info!(%peer, "closing idle connection");
                None
            }
        }
    }

    fn take(&mut self, read: Read) -> Option<RemotingCommand> {
        let peer = self.peer;
        match read? {
            Ok(cmd) => {
                self.first_request_by = None;
                Some(cmd)
            }
            // A peer that resets, or a TLS peer that hangs up without close_notify, is
            // a connection going away, not a protocol violation.
            Err(ProtocolError::Io(e)) => {
                tracing::debug!(%peer, error = %e, "connection read failed, closing");
                None
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "undecodable frame, closing connection");
                None
            }
        }
    }
}
