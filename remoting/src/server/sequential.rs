//! The connection loop of a server that answers one request at a time, in arrival order
//! (the nameserver, as `NamesrvController`'s single remoting executor does): read a
//! frame, run the [`Handler`], write its answer. An answer the peer does not take within
//! `writeTimeoutMillis` (a peer that stopped reading) closes the connection, so a stuck
//! peer cannot pin what the server keeps per connection.

use std::future::Future;
use std::time::Duration;

use futures::SinkExt;
use protocol::{RemotingCodec, RemotingCommand};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::FramedWrite;
use tokio_util::sync::CancellationToken;

use super::FrameReader;

/// What a server does with the frames of one connection.
pub trait Handler: Send {
    /// The answer to `request`, or `None` (a oneway request, or nothing to say).
    fn request(
        &mut self,
        request: RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>> + Send;

    /// A response frame, which a server that sends no requests cannot expect: ignored.
    fn response(&mut self, response: RemotingCommand) {
        tracing::debug!(opaque = response.opaque, "ignoring an unexpected response");
    }

    /// An answer was not taken within the write timeout (the connection closes next).
    fn write_timed_out(&mut self) {}
}

/// Serves the connection until it ends (see [`FrameReader::next`]), a write fails or
/// makes no progress within `write_timeout`, or `close` is cancelled.
pub async fn serve<R, W, H>(
    mut frames: FrameReader<R>,
    write: W,
    max_frame: usize,
    write_timeout: Duration,
    close: &CancellationToken,
    handler: &mut H,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    H: Handler,
{
    let peer = frames.peer();
    let mut out = FramedWrite::new(write, RemotingCodec::new(max_frame));
    while let Some(frame) = frames.next(close).await {
        if frame.is_response() {
            handler.response(frame);
            continue;
        }
        let Some(answer) = handler.request(frame).await else {
            continue;
        };
        match tokio::time::timeout(write_timeout, out.send(answer)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "write failed, closing connection");
                break;
            }
            Err(_) => {
                handler.write_timed_out();
                tracing::warn!(%peer, ?write_timeout, "peer stopped reading, closing connection");
                break;
            }
        }
    }
}
