//! The remoting listeners' accept side: each connection is admitted through its
//! listener's [`ConnGate`] (`maxConnections`, `maxConnectionsPerIp` sparing
//! `connectionLimitExemptAddresses`, `connectionReservePercent`) before any work, its
//! socket tuned, and its TLS handshake (when `tls.server.mode` asks for one) run within
//! the slot's first-request deadline (`firstRequestTimeoutMillis`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use security::conn_gate::{self, ConnGate, ConnSlot};
use security::tls::{MaybeTls, TlsServer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// How long to wait after a failed accept (EMFILE and friends) instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts on `listener` until `shutdown`, handing every connection `gate` admits to
/// `admitted` with its slot. A refused one is dropped (closed) at once.
pub async fn accept_loop(
    listener: &TcpListener,
    gate: &Arc<ConnGate>,
    shutdown: &CancellationToken,
    mut admitted: impl FnMut(TcpStream, SocketAddr, ConnSlot),
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => match gate.admit(peer.ip()) {
                Ok(slot) => admitted(stream, peer, slot),
                Err(reason) => tracing::debug!(%peer, %reason, "connection refused at accept"),
            },
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// The socket options of an accepted connection.
#[derive(Debug, Clone, Copy)]
pub struct SocketTuning {
    /// TCP keepalive idle time (zero: the system's).
    pub keepalive: Duration,
    /// `writeTimeoutMillis`, also set as TCP_USER_TIMEOUT.
    pub write_timeout: Duration,
}

/// Tunes `stream` and runs the TLS handshake `tls` asks for (plaintext without it)
/// within `slot`'s first-request deadline; `None` (logged) when the handshake failed or
/// ran past the deadline (counted).
pub async fn handshake(
    stream: TcpStream,
    peer: SocketAddr,
    slot: &ConnSlot,
    tls: Option<&TlsServer>,
    tuning: SocketTuning,
) -> Option<MaybeTls> {
    conn_gate::tune_socket(&stream, tuning.keepalive, tuning.write_timeout);
    match slot
        .before_first_request(security::tls::accept(tls, stream))
        .await
    {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::info!(%peer, error = %e, "connection refused by TLS");
            None
        }
        Err(e) => {
            tracing::info!(%peer, error = %e, "TLS handshake past firstRequestTimeoutMillis, closing");
            None
        }
    }
}
