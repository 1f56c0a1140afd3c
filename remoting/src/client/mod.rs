//! The async RocketMQ 4.x remoting client of every rmq-rs process.
//!
//! - [`Connection`]: one multiplexed TCP (or TLS) connection, requests matched to
//!   answers by opaque, per-call timeouts, oneway sends, optional request signing.
//! - [`RemotingClient`]: a kept connection to one peer, re-established after it closes
//!   (the broker's calls to its nameservers and its master).
//! - [`Client`]: nameserver route and KV calls, broker admin calls, send / pull /
//!   query / view (`MQClientAPIImpl`'s), for `rmqctl`, `rmq-bench` and the operator. It
//!   keeps one [`Connection`] per peer address; nameserver calls go to the first
//!   nameserver of the list that answers, writes (KV, topic deletion) go to all of
//!   them, as `MQAdminExt` does.

pub mod admin;
pub mod bodies;
pub mod connection;
pub mod error;
pub mod ha;
pub mod message;
pub mod namesrv;
pub mod offsets;
pub mod ops;
pub mod pull;
mod reconnecting;
pub mod send;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use protocol::RemotingCommand;
use protocol::code::response;
use security::sign::Credentials;
use security::tls::TlsClient;

pub use connection::{Connection, ServerRequestHandler};
pub use error::{ClientError, Peer, response_code_label};
pub use reconnecting::RemotingClient;

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

pub struct Client {
    namesrv: Vec<String>,
    timeout: Duration,
    handler: Option<ServerRequestHandler>,
    credentials: Option<Arc<Credentials>>,
    tls: Option<TlsClient>,
    /// Open a fresh connection for every call instead of keeping one per peer.
    connection_per_call: bool,
    connections: Mutex<HashMap<String, Arc<Connection>>>,
    pub(crate) uniq_keys: Mutex<protocol::message::msg_id::UniqKeyGenerator>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("namesrv", &self.namesrv)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Splits `a:9876;b:9876` (mqadmin's `-n` syntax; commas are accepted too).
pub fn parse_namesrv_list(list: &str) -> Vec<String> {
    list.split([';', ','])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Client {
    /// A client for the nameservers in `namesrv` (`a:9876;b:9876`); `timeout` bounds
    /// every call and connection attempt.
    pub fn new(namesrv: &str, timeout: Duration) -> Self {
        let pid = std::process::id();
        Self {
            namesrv: parse_namesrv_list(namesrv),
            timeout,
            handler: None,
            credentials: None,
            tls: None,
            connection_per_call: false,
            connections: Mutex::default(),
            uniq_keys: Mutex::new(protocol::message::msg_id::UniqKeyGenerator::new(
                std::net::Ipv4Addr::LOCALHOST.into(),
                pid,
                // Java uses the class loader's hash; any per-process constant will do.
                pid.rotate_left(16) as i32,
            )),
        }
    }

    /// Answers requests brokers send on our connections (CHECK_TRANSACTION_STATE, ...).
    pub fn with_server_request_handler(mut self, handler: ServerRequestHandler) -> Self {
        self.handler = Some(handler);
        self
    }

    /// Signs every request with `credentials` (RocketMQ ACL 1.0 `AccessKey`/`Signature`).
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Self {
        self.credentials = credentials.map(Arc::new);
        self
    }

    /// Connects to every peer with TLS when given.
    pub fn with_tls(mut self, tls: Option<TlsClient>) -> Self {
        self.tls = tls;
        self
    }

    /// Opens a fresh connection for every call and closes it after the answer, instead of
    /// sharing one per peer. For callers that call rarely and address peers that move
    /// (the operator, whose pods get new IPs behind the same DNS name): a shared
    /// connection to a vanished peer would only time out, never close, and every later
    /// call to that address would wait out its timeout on it.
    pub fn with_connection_per_call(mut self) -> Self {
        self.connection_per_call = true;
        self
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn namesrv_addrs(&self) -> &[String] {
        &self.namesrv
    }

    /// The shared connection to `peer`, opened on first use and reopened after a close.
    pub async fn connection(&self, peer: &Peer) -> Result<Arc<Connection>> {
        if self.connection_per_call {
            return Ok(Arc::new(self.open(peer).await?));
        }
        if let Some(c) = self.connections.lock().get(peer.addr())
            && !c.is_closed()
        {
            return Ok(c.clone());
        }
        let fresh = Arc::new(self.open(peer).await?);
        let mut map = self.connections.lock();
        let entry = map
            .entry(peer.addr().to_owned())
            .or_insert_with(|| fresh.clone());
        if entry.is_closed() {
            *entry = fresh;
        }
        Ok(entry.clone())
    }

    async fn open(&self, peer: &Peer) -> Result<Connection> {
        Ok(Connection::connect_tls(
            peer.clone(),
            self.timeout,
            self.handler.clone(),
            self.tls.as_ref(),
        )
        .await?
        .with_credentials(self.credentials.clone()))
    }

    /// Sends `cmd` to `peer` and returns whatever it answered.
    pub async fn call(&self, peer: &Peer, cmd: RemotingCommand) -> Result<RemotingCommand> {
        let conn = self.connection(peer).await?;
        conn.request(cmd, self.timeout).await
    }

    /// [`Self::call`], turning any answer but SUCCESS into [`ClientError::Refused`].
    pub async fn call_ok(&self, peer: &Peer, cmd: RemotingCommand) -> Result<RemotingCommand> {
        let request = cmd.code;
        let reply = self.call(peer, cmd).await?;
        expect_success(peer, request, reply)
    }

    pub async fn oneway(&self, peer: &Peer, cmd: RemotingCommand) -> Result<()> {
        self.connection(peer).await?.oneway(cmd).await
    }

    /// Sends `cmd` to the nameservers in order until one is reachable; its answer
    /// (SUCCESS or a refusal) is the result.
    pub async fn namesrv_call_ok(&self, cmd: RemotingCommand) -> Result<RemotingCommand> {
        let mut last = ClientError::NoNameServer;
        for addr in &self.namesrv {
            match self
                .call_ok(&Peer::NameServer(addr.clone()), cmd.clone())
                .await
            {
                Err(e) if e.is_unreachable() => last = e,
                other => return other,
            }
        }
        Err(last)
    }

    /// Sends `cmd` to every nameserver; fails with the first error after trying all.
    pub async fn namesrv_call_all(&self, cmd: RemotingCommand) -> Result<()> {
        if self.namesrv.is_empty() {
            return Err(ClientError::NoNameServer);
        }
        let mut first_error = None;
        for addr in &self.namesrv {
            if let Err(e) = self
                .call_ok(&Peer::NameServer(addr.clone()), cmd.clone())
                .await
            {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

pub(crate) fn expect_success(
    peer: &Peer,
    request: i32,
    reply: RemotingCommand,
) -> Result<RemotingCommand> {
    if reply.code == response::SUCCESS {
        Ok(reply)
    } else {
        Err(ClientError::Refused {
            peer: peer.clone(),
            request,
            code: reply.code,
            remark: reply.remark.unwrap_or_default(),
        })
    }
}

pub(crate) fn bad_body(
    peer: &Peer,
    request: i32,
    what: &'static str,
    reason: impl ToString,
) -> ClientError {
    ClientError::BadResponse {
        peer: peer.clone(),
        request,
        what,
        reason: reason.to_string(),
    }
}

/// Decodes a fastjson body of `reply` into `T`.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(
    peer: &Peer,
    request: i32,
    what: &'static str,
    reply: &RemotingCommand,
) -> Result<T> {
    protocol::body::decode(&reply.body).map_err(|e| bad_body(peer, request, what, e))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
