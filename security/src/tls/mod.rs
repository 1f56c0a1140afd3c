//! TLS for the remoting ports with rustls (no OpenSSL), in RocketMQ 4.9's three server
//! modes (`tls.server.mode`):
//!
//! - `disabled`: plaintext only; a TLS ClientHello is refused (connection closed);
//! - `permissive`: the first byte decides: 0x16 (a TLS handshake record) gets TLS,
//!   anything else plaintext. Unambiguous: a plaintext frame starts with a 4-byte
//!   big-endian length, and a first byte of 0x16 would be a frame over 350 MiB, far
//!   beyond the frame cap;
//! - `enforcing`: TLS only; a plaintext first byte closes the connection.
//!
//! Unlike 4.9: no self-signed "test mode" (a server needs `certPath`/`keyPath`), client
//! certificates are verified against `trustCertPath` when `needClientAuth` is on (mTLS),
//! and clients verify the server against their trust bundle (no trust-all default).
//! Certificates are re-read when the files change ([`TlsServer::reload_if_changed`]);
//! established connections keep their session.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_util::sync::CancellationToken;

mod pem;
mod stream;

use pem::{certs, key, parse_certs, parse_key, parse_roots, roots};
pub use stream::MaybeTls;

/// First byte of a TLS record carrying a handshake message (the ClientHello).
const TLS_HANDSHAKE: u8 = 0x16;
/// A peer that sends nothing for this long after connecting is dropped before the mode
/// is known (bounds connections parked in detection).
const DETECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A TLS handshake must finish within this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Ciphertext read ahead from the socket. rustls asks for about 4 KiB per read; without
/// this every few pipelined 1 KiB requests cost a `recvfrom` and a trip through the
/// connection's read loop (several times plaintext's syscalls; docs/benchmarks.md). Two
/// full records' worth keeps a busy connection to about one read per dozens of requests.
const TLS_READ_AHEAD: usize = 32 * 1024;

/// What TLS runs over: the socket, read ahead in [`TLS_READ_AHEAD`] chunks (writes pass
/// straight through).
pub(crate) type Wire = BufReader<TcpStream>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    #[default]
    Disabled,
    Permissive,
    Enforcing,
}

impl std::str::FromStr for TlsMode {
    type Err = TlsError;
    fn from_str(s: &str) -> Result<Self, TlsError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "disabled" | "" => Ok(Self::Disabled),
            "permissive" => Ok(Self::Permissive),
            "enforcing" => Ok(Self::Enforcing),
            other => Err(TlsError::Mode(other.to_owned())),
        }
    }
}

impl std::fmt::Display for TlsMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Disabled => "disabled",
            Self::Permissive => "permissive",
            Self::Enforcing => "enforcing",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls.server.mode {0:?} is not one of disabled, permissive, enforcing")]
    Mode(String),
    #[error("{what} is required when TLS is on")]
    Missing { what: &'static str },
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error("TLS configuration: {0}")]
    Config(String),
    #[error(
        "tls.metrics.enable=true needs TLS on the remoting port: set tls.server.mode to \
         permissive or enforcing, with tls.server.certPath and tls.server.keyPath"
    )]
    MetricsWithoutTls,
}

/// Server side settings (one set per process: remoting port, HA port).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerTlsSettings {
    pub mode: TlsMode,
    pub cert_path: Option<PathBuf>,
    pub key_path: Option<PathBuf>,
    /// CA bundle client certificates must chain to (mTLS).
    pub trust_cert_path: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

/// `tls.server.need.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// No client certificate asked for.
    #[default]
    None,
    /// A client certificate is verified against the trust bundle when sent.
    Optional,
    /// mTLS: a client without a certificate chaining to the trust bundle is refused.
    Require,
}

impl std::str::FromStr for ClientAuth {
    type Err = TlsError;
    fn from_str(s: &str) -> Result<Self, TlsError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "" => Ok(Self::None),
            "optional" => Ok(Self::Optional),
            "require" => Ok(Self::Require),
            other => Err(TlsError::Config(format!(
                "tls.server.need.client.auth {other:?} is not one of none, optional, require"
            ))),
        }
    }
}

impl std::fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Optional => "optional",
            Self::Require => "require",
        })
    }
}

/// Client side settings (rmqctl, rmq-bench, broker → nameserver / master).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTlsSettings {
    pub enable: bool,
    /// CA bundle the server certificate must chain to.
    pub trust_cert_path: Option<PathBuf>,
    /// Client certificate and key for mTLS.
    pub cert_path: Option<PathBuf>,
    pub key_path: Option<PathBuf>,
    /// Name to verify the server certificate against instead of the dialled host.
    pub server_name: Option<String>,
}

/// ring's suites, AES-128-GCM first in each protocol version. rustls (and Java) prefer
/// AES-256-GCM; both are sound, and 128-bit keys take 10 AES rounds instead of 14 per
/// block, which is measurable on a broker encrypting every message (the
/// produce path's throughput budget). Servers apply this order over the client's (`ignore_client_order`).
const SUITES: [rustls::SupportedCipherSuite; 9] = {
    use rustls::crypto::ring::cipher_suite::*;
    [
        TLS13_AES_128_GCM_SHA256,
        TLS13_AES_256_GCM_SHA384,
        TLS13_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ]
};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: SUITES.to_vec(),
        ..rustls::crypto::ring::default_provider()
    })
}

/// What a server presents, loaded once per set of files: the remoting port's acceptor
/// (client certificates as `tls.server.need.client.auth` says) and the metrics port's
/// (`tls.metrics.enable`: the same certificate, no client certificates, since kubelet
/// probes and most scrapers present none).
/// The gRPC port's acceptor is the remoting one plus ALPN `h2`: gRPC clients (grpc-java,
/// grpc-go) refuse a TLS session that did not negotiate HTTP/2.
struct Acceptors {
    remoting: TlsAcceptor,
    http: TlsAcceptor,
    grpc: TlsAcceptor,
}

impl Acceptors {
    fn load(s: &ServerTlsSettings) -> Result<Self, TlsError> {
        let cert_path = s.cert_path.as_deref().ok_or(TlsError::Missing {
            what: "tls.server.certPath",
        })?;
        let key_path = s.key_path.as_deref().ok_or(TlsError::Missing {
            what: "tls.server.keyPath",
        })?;
        let (chain, key) = (certs(cert_path)?, key(key_path)?);
        let verifier = match s.client_auth {
            ClientAuth::None => None,
            auth => {
                let trust = s.trust_cert_path.as_deref().ok_or(TlsError::Missing {
                    what: "tls.server.trustCertPath (needed for client authentication)",
                })?;
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots(trust)?),
                    provider(),
                );
                let verifier = if auth == ClientAuth::Optional {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                Some(
                    verifier
                        .build()
                        .map_err(|e| TlsError::Config(e.to_string()))?,
                )
            }
        };
        Ok(Self {
            http: server_acceptor(None, chain.clone(), key.clone_key(), &[])?,
            grpc: server_acceptor(verifier.clone(), chain.clone(), key.clone_key(), &[b"h2"])?,
            remoting: server_acceptor(verifier, chain, key, &[])?,
        })
    }
}

/// A server config presenting `chain`, verifying client certificates with `verifier`
/// when given, offering the `alpn` protocols (none: no ALPN extension in the answer).
fn server_acceptor(
    verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: &[&[u8]],
) -> Result<TlsAcceptor, TlsError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.ignore_client_order = true;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The server side: mode detection and the current [`Acceptors`], rebuilt when the
/// certificate, key or trust files change.
pub struct TlsServer {
    settings: ServerTlsSettings,
    acceptors: RwLock<Arc<Acceptors>>,
    /// Content of (cert, key, trust) the acceptors were built from.
    loaded: Mutex<Vec<Vec<u8>>>,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer")
            .field("mode", &self.settings.mode)
            .finish()
    }
}

impl TlsServer {
    /// `None` when the mode is `disabled`.
    pub fn new(settings: ServerTlsSettings) -> Result<Option<Arc<Self>>, TlsError> {
        if settings.mode == TlsMode::Disabled {
            return Ok(None);
        }
        let acceptors = Acceptors::load(&settings)?;
        let loaded = Self::contents(&settings);
        Ok(Some(Arc::new(Self {
            settings,
            acceptors: RwLock::new(Arc::new(acceptors)),
            loaded: Mutex::new(loaded),
        })))
    }

    pub fn mode(&self) -> TlsMode {
        self.settings.mode
    }

    fn contents(s: &ServerTlsSettings) -> Vec<Vec<u8>> {
        [&s.cert_path, &s.key_path, &s.trust_cert_path]
            .into_iter()
            .map(|p| {
                p.as_deref()
                    .and_then(|p| std::fs::read(p).ok())
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Rebuilds the acceptor when a file changed; a new set that does not load keeps
    /// the old one (logged). `Ok(true)` when new certificates are in use.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now = Self::contents(&self.settings);
        let mut loaded = self.loaded.lock();
        if *loaded == now {
            return Ok(false);
        }
        // Remember what was seen, so a broken set is reported once, not every poll.
        *loaded = now;
        *self.acceptors.write() = Arc::new(Acceptors::load(&self.settings)?);
        Ok(true)
    }

    /// Polls the files every `interval` until `cancel`.
    pub fn spawn_watcher(
        self: &Arc<Self>,
        interval: Duration,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let tls = Arc::clone(self);
        crate::file_watch::spawn_poll(interval, cancel, move || match tls.reload_if_changed() {
            Ok(true) => tracing::info!("TLS certificates reloaded"),
            Ok(false) => {}
            Err(e) => tracing::error!(
                error = %e,
                "TLS files changed but do not load; keeping the previous certificates"
            ),
        })
    }

    /// Decides plaintext or TLS for a fresh connection (see the module comment) and
    /// completes the handshake. An error means: close the connection.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<MaybeTls> {
        let hello = tokio::time::timeout(DETECT_TIMEOUT, starts_with_hello(&tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no data"))??;
        self.finish(tcp, hello, Port::Remoting).await
    }

    /// [`Self::accept`] for the metrics port (`tls.metrics.enable`): the same mode and
    /// certificate, no client certificate asked for.
    pub async fn accept_http(&self, tcp: TcpStream) -> io::Result<MaybeTls> {
        let hello = tokio::time::timeout(DETECT_TIMEOUT, starts_with_hello(&tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no data"))??;
        self.finish(tcp, hello, Port::Http).await
    }

    /// [`Self::accept`] for the gRPC port: the same mode and client-certificate rule as
    /// the remoting port, with ALPN `h2` (HTTP/2's client preface never starts with 0x16,
    /// so the first byte decides here too).
    pub async fn accept_grpc(&self, tcp: TcpStream) -> io::Result<MaybeTls> {
        let hello = tokio::time::timeout(DETECT_TIMEOUT, starts_with_hello(&tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no data"))??;
        self.finish(tcp, hello, Port::Grpc).await
    }

    /// [`Self::accept`] for a protocol whose server speaks first (the HA port: the master
    /// sends its handshake greeting before the slave says anything). A TLS client still
    /// opens with a ClientHello; in permissive mode a peer that sends nothing within
    /// `quiet` is a plaintext peer waiting for the greeting. Enforcing mode waits for
    /// the ClientHello as usual.
    pub async fn accept_server_first(
        &self,
        tcp: TcpStream,
        quiet: Duration,
    ) -> io::Result<MaybeTls> {
        let hello = match self.settings.mode {
            TlsMode::Enforcing => tokio::time::timeout(DETECT_TIMEOUT, starts_with_hello(&tcp))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no ClientHello"))??,
            _ => match tokio::time::timeout(quiet, starts_with_hello(&tcp)).await {
                Ok(hello) => hello?,
                Err(_) => false,
            },
        };
        self.finish(tcp, hello, Port::Remoting).await
    }

    async fn finish(&self, tcp: TcpStream, hello: bool, port: Port) -> io::Result<MaybeTls> {
        match (self.settings.mode, hello) {
            (TlsMode::Disabled, true) => Err(refused("TLS is disabled on this port")),
            (TlsMode::Enforcing, false) => {
                Err(refused("plaintext refused (tls.server.mode=enforcing)"))
            }
            (_, false) => Ok(MaybeTls::Plain(tcp)),
            (_, true) => {
                let acceptors = Arc::clone(&self.acceptors.read());
                let acceptor = match port {
                    Port::Remoting => &acceptors.remoting,
                    Port::Http => &acceptors.http,
                    Port::Grpc => &acceptors.grpc,
                };
                let wire = BufReader::with_capacity(TLS_READ_AHEAD, tcp);
                let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(wire))
                    .await
                    .map_err(|_| {
                        io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")
                    })??;
                Ok(MaybeTls::Server(Box::new(stream)))
            }
        }
    }
}

/// Which of a server's acceptors a connection gets.
#[derive(Clone, Copy)]
enum Port {
    Remoting,
    Http,
    Grpc,
}

/// Whether the first byte the peer sent opens a TLS handshake record.
async fn starts_with_hello(tcp: &TcpStream) -> io::Result<bool> {
    let mut first = [0u8; 1];
    let n = tcp.peek(&mut first).await?;
    Ok(n == 1 && first[0] == TLS_HANDSHAKE)
}

/// Accepts with `tls` when configured, plaintext otherwise.
pub async fn accept(tls: Option<&TlsServer>, tcp: TcpStream) -> io::Result<MaybeTls> {
    match tls {
        Some(t) => t.accept(tcp).await,
        None => Ok(MaybeTls::Plain(tcp)),
    }
}

fn refused(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why)
}

/// The client side: connects with TLS when enabled.
#[derive(Clone)]
pub struct TlsClient {
    connector: TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient").finish_non_exhaustive()
    }
}

impl TlsClient {
    /// `None` when `enable` is off.
    pub fn new(s: &ClientTlsSettings) -> Result<Option<Self>, TlsError> {
        if !s.enable {
            return Ok(None);
        }
        let trust = s.trust_cert_path.as_deref().ok_or(TlsError::Missing {
            what: "the client trust bundle (tls.client.trustCertPath)",
        })?;
        let identity = match (&s.cert_path, &s.key_path) {
            (Some(c), Some(k)) => Some((certs(c)?, key(k)?)),
            (None, None) => None,
            _ => {
                return Err(TlsError::Missing {
                    what: "both the client certificate and its key",
                });
            }
        };
        let server_name = s
            .server_name
            .as_deref()
            .map(|n| {
                ServerName::try_from(n.to_owned())
                    .map_err(|e| TlsError::Config(format!("server name {n:?}: {e}")))
            })
            .transpose()?;
        Self::build(roots(trust)?, identity, server_name).map(Some)
    }

    /// A client from PEM held in memory (what the operator read from a Secret): `trust`
    /// is the CA bundle, `identity` a certificate chain and its key for mTLS. `origin`
    /// names the source in errors, which never quote the content. Servers are checked
    /// against the dialled host.
    pub fn from_pem(
        trust: &[u8],
        identity: Option<(&[u8], &[u8])>,
        origin: &str,
    ) -> Result<Self, TlsError> {
        let trust = parse_roots(trust, &format!("{origin}, CA bundle"))?;
        let identity = match identity {
            Some((chain, key)) => Some((
                parse_certs(chain, &format!("{origin}, certificate"))?,
                parse_key(key, &format!("{origin}, key"))?,
            )),
            None => None,
        };
        Self::build(trust, identity, None)
    }

    fn build(
        trust: rustls::RootCertStore,
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
        server_name: Option<ServerName<'static>>,
    ) -> Result<Self, TlsError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(trust);
        let config = match identity {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Config(e.to_string()))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }

    /// TLS over `tcp` to `addr` (`host:port`); the certificate is checked against the
    /// configured server name, else the host.
    pub async fn connect(&self, tcp: TcpStream, addr: &str) -> io::Result<MaybeTls> {
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => {
                let host = addr
                    .rsplit_once(':')
                    .map_or(addr, |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                ServerName::try_from(host.to_owned())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?
            }
        };
        let wire = BufReader::with_capacity(TLS_READ_AHEAD, tcp);
        let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.connector.connect(name, wire))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        Ok(MaybeTls::Client(Box::new(stream)))
    }
}

/// Connects `tls` when configured, plaintext otherwise.
pub async fn connect(tls: Option<&TlsClient>, tcp: TcpStream, addr: &str) -> io::Result<MaybeTls> {
    match tls {
        Some(t) => t.connect(tcp, addr).await,
        None => Ok(MaybeTls::Plain(tcp)),
    }
}
