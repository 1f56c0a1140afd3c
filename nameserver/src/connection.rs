//! One client connection: decode frames, dispatch requests in arrival order, write the
//! answers ([`remoting::server::serve`]: the length cap, `firstRequestTimeoutMillis`
//! counted from accept, then `serverChannelMaxIdleTimeSeconds`, and `writeTimeoutMillis`
//! for a peer that stopped reading, so a stuck peer cannot pin a broker registration's
//! channel for ever). Closing the connection drops what was registered on it.

use std::net::SocketAddr;
use std::sync::Arc;

use protocol::RemotingCommand;
use remoting::server::{FrameReader, Handler};
use security::conn_gate::ConnSlot;
use security::tls::MaybeTls;
use tokio_util::sync::CancellationToken;

use crate::dispatch::dispatch;
use crate::route_table::ConnId;
use crate::state::Shared;

/// Largest frame read or written (the protocol's own cap).
const MAX_FRAME: usize = protocol::frame::DEFAULT_MAX_FRAME;
/// Read buffer.
const READ_BUFFER: usize = 8 * 1024;

/// The nameserver's side of a connection: its id in the route table.
struct Conn {
    shared: Arc<Shared>,
    id: ConnId,
}

impl Handler for Conn {
    async fn request(&mut self, request: RemotingCommand) -> Option<RemotingCommand> {
        dispatch(&self.shared, request, self.id).await
    }

    fn write_timed_out(&mut self) {
        self.shared.metrics.write_timeouts.inc();
    }
}

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
    let (read, write) = tokio::io::split(stream);
    let frames = FrameReader::new(read, MAX_FRAME, READ_BUFFER, peer, slot, idle);
    let mut handler = Conn {
        shared: Arc::clone(&shared),
        id: conn,
    };
    remoting::server::serve(
        frames,
        write,
        MAX_FRAME,
        write_timeout,
        &close,
        &mut handler,
    )
    .await;
    let dropped = shared.close_connection(conn);
    for addr in dropped {
        tracing::info!(%peer, broker = %addr, "broker connection closed, broker removed");
    }
}
