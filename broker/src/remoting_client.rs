//! A persistent outbound remoting connection (broker → nameserver). The nameserver
//! forgets a broker as soon as its registration channel closes, so the connection is
//! kept open between registrations and re-established (re-resolving the host name)
//! only after it fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use protocol::{RemotingCodec, RemotingCommand};
use security::sign::Credentials;
use security::tls::{MaybeTls, TlsClient};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_util::codec::Framed;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{addr}: {reason}")]
    Io { addr: String, reason: String },
    #[error("{addr}: no response within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("{addr}: connection closed")]
    Closed { addr: String },
}

pub struct RemotingClient {
    addr: String,
    /// Signs every request when set (ACL on the nameserver or the master).
    credentials: Option<Arc<Credentials>>,
    /// Speaks TLS when set (`tls.enable`).
    tls: Option<TlsClient>,
    conn: Mutex<Option<Framed<MaybeTls, RemotingCodec>>>,
    next_opaque: AtomicI32,
}

impl RemotingClient {
    /// `addr` is `host:port`; the host may be a DNS name, resolved on every connect.
    pub fn new(addr: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            credentials: None,
            tls: None,
            conn: Mutex::new(None),
            next_opaque: AtomicI32::new(1),
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

    fn sign(&self, request: &mut RemotingCommand) {
        if let Some(c) = &self.credentials {
            security::sign::sign_request(request, c);
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `request` and waits for its response; one retry on a fresh connection when
    /// the kept one turns out to be dead.
    pub async fn invoke(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        self.sign(&mut request);
        let mut guard = self.conn.lock().await;
        let reused = guard.is_some();
        match self.invoke_on(&mut guard, request.clone(), timeout).await {
            Err(e) if reused && !matches!(e, ClientError::Timeout { .. }) => {
                tracing::debug!(addr = %self.addr, error = %e, "kept connection failed, reconnecting");
                *guard = None;
                self.invoke_on(&mut guard, request, timeout).await
            }
            other => other,
        }
    }

    /// Sends a oneway request (no response).
    pub async fn oneway(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        request.mark_oneway();
        self.sign(&mut request);
        let mut guard = self.conn.lock().await;
        let framed = self.connected(&mut guard, timeout).await?;
        request.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        let sent = tokio::time::timeout(timeout, framed.send(request)).await;
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                *guard = None;
                Err(ClientError::Io {
                    addr: self.addr.clone(),
                    reason: e.to_string(),
                })
            }
            Err(_) => Err(ClientError::Timeout {
                addr: self.addr.clone(),
                timeout,
            }),
        }
    }

    async fn connected<'a>(
        &self,
        guard: &'a mut Option<Framed<MaybeTls, RemotingCodec>>,
        timeout: Duration,
    ) -> Result<&'a mut Framed<MaybeTls, RemotingCodec>, ClientError> {
        if guard.is_none() {
            let stream = tokio::time::timeout(timeout, TcpStream::connect(self.addr.as_str()))
                .await
                .map_err(|_| ClientError::Timeout {
                    addr: self.addr.clone(),
                    timeout,
                })?
                .map_err(|source| ClientError::Connect {
                    addr: self.addr.clone(),
                    source,
                })?;
            let _ = stream.set_nodelay(true);
            let stream = security::tls::connect(self.tls.as_ref(), stream, &self.addr)
                .await
                .map_err(|source| ClientError::Connect {
                    addr: self.addr.clone(),
                    source,
                })?;
            *guard = Some(Framed::new(stream, RemotingCodec::default()));
        }
        guard.as_mut().ok_or_else(|| ClientError::Closed {
            addr: self.addr.clone(),
        })
    }

    async fn invoke_on(
        &self,
        guard: &mut Option<Framed<MaybeTls, RemotingCodec>>,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let framed = self.connected(guard, timeout).await?;
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.opaque = opaque;
        let addr = self.addr.clone();
        let exchange = async {
            framed.send(request).await.map_err(|e| ClientError::Io {
                addr: addr.clone(),
                reason: e.to_string(),
            })?;
            loop {
                match framed.next().await {
                    None => return Err(ClientError::Closed { addr: addr.clone() }),
                    Some(Err(e)) => {
                        return Err(ClientError::Io {
                            addr: addr.clone(),
                            reason: e.to_string(),
                        });
                    }
                    // Stale answers to earlier timed-out requests are skipped.
                    Some(Ok(cmd)) if cmd.is_response() && cmd.opaque == opaque => return Ok(cmd),
                    Some(Ok(_)) => continue,
                }
            }
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(cmd)) => Ok(cmd),
            Ok(Err(e)) => {
                *guard = None;
                Err(e)
            }
            Err(_) => Err(ClientError::Timeout {
                addr: self.addr.clone(),
                timeout,
            }),
        }
    }
}
