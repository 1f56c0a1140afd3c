//! One client connection: decode frames, dispatch requests in arrival order, write the
//! answers. A frame that does not decode closes this connection only.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use protocol::RemotingCodec;
use security::tls::MaybeTls;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use crate::dispatch::dispatch;
use crate::route_table::ConnId;
use crate::state::Shared;

pub async fn serve(
    stream: MaybeTls,
    peer: SocketAddr,
    shared: Arc<Shared>,
    conn: ConnId,
    close: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let idle = shared.config.read().server_channel_max_idle;
    let mut framed = Framed::new(stream, RemotingCodec::default());
    loop {
        let next = tokio::select! {
            _ = close.cancelled() => break,
            next = tokio::time::timeout(idle, framed.next()) => next,
        };
        let request = match next {
            Err(_) => {
                tracing::info!(%peer, "closing idle connection");
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                tracing::warn!(%peer, error = %e, "undecodable frame, closing connection");
                break;
            }
            Ok(Some(Ok(cmd))) => cmd,
        };
        if request.is_response() {
            // The nameserver sends no requests, so no response can be expected.
            tracing::debug!(%peer, opaque = request.opaque, "ignoring unexpected response");
            continue;
        }
        if let Some(response) = dispatch(&shared, request, conn).await
            && let Err(e) = framed.send(response).await
        {
            tracing::debug!(%peer, error = %e, "write failed, closing connection");
            break;
        }
    }
    let dropped = shared.close_connection(conn);
    for addr in dropped {
        tracing::info!(%peer, broker = %addr, "broker connection closed, broker removed");
    }
}
