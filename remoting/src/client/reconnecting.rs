//! A persistent outbound connection to one peer (the broker's to each nameserver and to
//! its master). The nameserver forgets a broker as soon as its registration channel
//! closes, so the connection is kept open between calls and re-established
//! (re-resolving the host name) only after it has closed.

use std::sync::Arc;
use std::time::Duration;

use protocol::RemotingCommand;
use security::sign::Credentials;
use security::tls::TlsClient;
use tokio::sync::Mutex;

use super::{ClientError, Connection, Peer};

pub struct RemotingClient {
    peer: Peer,
    /// Signs every request when set (ACL on the nameserver or the master).
    credentials: Option<Arc<Credentials>>,
    /// Speaks TLS when set (`tls.enable`).
    tls: Option<TlsClient>,
    /// The kept connection; the lock is held only to look at it or replace it, so
    /// concurrent calls share it.
    conn: Mutex<Option<Arc<Connection>>>,
}

impl RemotingClient {
    /// `peer`'s address is `host:port`; the host may be a DNS name, resolved on every
    /// connect.
    pub fn new(peer: Peer) -> Self {
        Self {
            peer,
            credentials: None,
            tls: None,
            conn: Mutex::new(None),
        }
    }

    /// Signs requests with `credentials` (the broker's own account) when given.
    pub fn with_credentials(mut self, credentials: Option<Arc<Credentials>>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Connects with TLS when `tls` is given.
    pub fn with_tls(mut self, tls: Option<TlsClient>) -> Self {
        self.tls = tls;
        self
    }

    pub fn addr(&self) -> &str {
        self.peer.addr()
    }

    /// Sends `request` and waits for its answer, within `timeout` (which bounds the
    /// connect too); one retry on a fresh connection when the kept one turns out to
    /// have closed. A timeout is not retried: the peer is slow, not gone.
    pub async fn invoke(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let (conn, reused) = self.connected(timeout).await?;
        match conn.request(request.clone(), timeout).await {
            Err(e) if reused && !matches!(e, ClientError::Timeout { .. }) => {
                tracing::debug!(peer = %self.peer, error = %e, "kept connection failed, reconnecting");
                self.forget(&conn).await;
                let (conn, _) = self.connected(timeout).await?;
                conn.request(request, timeout).await
            }
            other => other,
        }
    }

    /// Sends a oneway request (no answer), returning once it is written, within
    /// `timeout`.
    pub async fn oneway(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let (conn, _) = self.connected(timeout).await?;
        let code = request.code;
        match tokio::time::timeout(timeout, conn.oneway(request)).await {
            Ok(sent) => sent,
            Err(_) => Err(ClientError::Timeout {
                peer: self.peer.clone(),
                request: code,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// The kept connection (and `true`), or a new one when there is none or it closed.
    async fn connected(&self, timeout: Duration) -> Result<(Arc<Connection>, bool), ClientError> {
        let mut kept = self.conn.lock().await;
        if let Some(conn) = kept.as_ref()
            && !conn.is_closed()
        {
            return Ok((Arc::clone(conn), true));
        }
        let conn = Connection::connect_tls(self.peer.clone(), timeout, None, self.tls.as_ref())
            .await?
            .with_credentials(self.credentials.clone());
        let conn = Arc::new(conn);
        *kept = Some(Arc::clone(&conn));
        Ok((conn, false))
    }

    /// Drops `conn` unless another call has replaced it already.
    async fn forget(&self, conn: &Arc<Connection>) {
        let mut kept = self.conn.lock().await;
        if kept.as_ref().is_some_and(|k| Arc::ptr_eq(k, conn)) {
            *kept = None;
        }
    }
}
