//! One client connection: decode frames, dispatch requests in arrival order, write the
//! answers. A frame that does not decode closes this connection only; so does an answer
//! the peer does not take within `writeTimeoutMillis` (a peer that stopped reading), so
//! a stuck peer cannot pin a broker registration's channel for ever. A connection whose
//! first complete frame has not arrived by its slot's deadline (`firstRequestTimeoutMillis`,
//! counted from accept) is closed; after that only `serverChannelMaxIdleTimeSeconds`
//! applies.

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
use security::conn_gate::ConnSlot;

pub async fn serve(
    stream: MaybeTls,
    peer: SocketAddr,
    shared: Arc<Shared>,
    conn: ConnId,
    close: CancellationToken,
    slot: ConnSlot,
) {
    // Keepalive and TCP_USER_TIMEOUT were set on the socket before the TLS handshake.
    let (idle, write_timeout) = {
        let c = shared.config.read();
        (c.server_channel_max_idle, c.write_timeout)
    };
    let mut framed = Framed::new(stream, RemotingCodec::default());
    // Partial frames do not push the first-request deadline back.
    let mut first_request_by = Some(slot.first_request_deadline());
    loop {
        let idle_by = tokio::time::Instant::now() + idle;
        let until = first_request_by.map_or(idle_by, |by| by.min(idle_by));
        let next = tokio::select! {
            _ = close.cancelled() => break,
            next = tokio::time::timeout_at(until, framed.next()) => next,
        };
        let request = match next {
            Err(_) if first_request_by.is_some() => {
                let e = slot.first_request_timed_out();
                tracing::info!(%peer, error = %e, "no request within firstRequestTimeoutMillis, closing");
                break;
            }
            Err(_) => {
                tracing::info!(%peer, "closing idle connection");
                break;
            }
            Ok(None) => break,
            // A reset, or a TLS peer hanging up without close_notify: not a bad frame.
            Ok(Some(Err(protocol::ProtocolError::Io(e)))) => {
                tracing::debug!(%peer, error = %e, "connection read failed, closing");
                break;
            }
            Ok(Some(Err(e))) => {
                tracing::warn!(%peer, error = %e, "undecodable frame, closing connection");
                break;
            }
            Ok(Some(Ok(cmd))) => cmd,
        };
        first_request_by = None;
        if request.is_response() {
            // The nameserver sends no requests, so no response can be expected.
            tracing::debug!(%peer, opaque = request.opaque, "ignoring unexpected response");
            continue;
        }
        let Some(response) = dispatch(&shared, request, conn).await else {
            continue;
        };
        match tokio::time::timeout(write_timeout, framed.send(response)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "write failed, closing connection");
                break;
            }
            Err(_) => {
                shared.metrics.write_timeouts.inc();
                tracing::warn!(%peer, ?write_timeout, "peer stopped reading, closing connection");
                break;
            }
        }
    }
    let dropped = shared.close_connection(conn);
    for addr in dropped {
        tracing::info!(%peer, broker = %addr, "broker connection closed, broker removed");
    }
}
