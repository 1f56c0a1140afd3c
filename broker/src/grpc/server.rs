//! The gRPC listener: accepts under the `grpc` connection gate (`grpcMaxConnections`,
//! `grpcMaxConnectionsPerIp`, the reserve, `grpcFirstRequestTimeoutMillis`), decides
//! plaintext or TLS by the first byte as the remoting port does (`tls.server.mode`, ALPN
//! `h2`), and serves `MessagingService` and the gRPC health service over those streams
//! with tonic. On shutdown: health turns NOT_SERVING, accepting stops, every connection
//! gets GOAWAY, and calls in progress have `grpcShutdownDrainMillis` to finish.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use grpc_api::v2::messaging_service_server::MessagingServiceServer;
use security::conn_gate::ConnSlot;
use security::tls::MaybeTls;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Connected;

use super::metadata::Peer;
use super::request_budget::{BudgetLayer, Budgets};
use super::service::GrpcService;
use super::session::{SessionLimits, Sessions};
use crate::in_flight::InFlightLimit;
use crate::metrics::limits::Listener;
use crate::services::Broker;
use remoting::server::listener::{self, SocketTuning};

/// Decoded request headroom over `maxMessageSize`: the message's properties and the
/// protobuf framing of a SendMessage.
pub const DECODE_HEADROOM: usize = 64 * 1024;
/// Connections handed from the accept loop to tonic, waiting to be served.
const HANDOFF_QUEUE: usize = 128;

/// The gRPC port when it is on (`grpcServerPort` > 0).
pub async fn bind(broker: &Broker) -> anyhow::Result<Option<TcpListener>> {
    let b = &broker.config.broker;
    if b.grpc_server_port == 0 {
        return Ok(None);
    }
    let listener = TcpListener::bind(SocketAddr::new(b.bind_address, b.grpc_server_port))
        .await
        .with_context(|| {
            format!(
                "cannot listen on {}:{} (grpcServerPort; 0 turns the 5.x endpoint off)",
                b.bind_address, b.grpc_server_port
            )
        })?;
    Ok(Some(listener))
}

/// An accepted, handshaken connection as tonic serves it; holds its gate slot.
pub struct GrpcIo {
    io: MaybeTls,
    peer: Peer,
    _slot: ConnSlot,
}

impl Connected for GrpcIo {
    type ConnectInfo = Peer;
    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl AsyncRead for GrpcIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for GrpcIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The HTTP/2 client connection preface (RFC 9113, 3.4).
const H2_PREFACE_LEN: usize = 24;

/// Waits until the whole client preface is readable (peeked, not consumed); an early EOF
/// is an error. Bounded by the caller's first-request deadline.
async fn wait_for_preface(tcp: &TcpStream) -> io::Result<()> {
    let mut buf = [0u8; H2_PREFACE_LEN];
    loop {
        let n = tcp.peek(&mut buf).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the HTTP/2 preface",
            ));
        }
        if n >= H2_PREFACE_LEN {
            return Ok(());
        }
        // Part of it so far: let more arrive instead of spinning on the same bytes.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// TLS or plaintext for one accepted connection, within its slot's first-request deadline.
async fn handshake(
    stream: TcpStream,
    peer: SocketAddr,
    broker: &Broker,
    slot: ConnSlot,
) -> Option<GrpcIo> {
    let b = &broker.config.broker;
    let tuning = SocketTuning {
        keepalive: Duration::from_secs(b.tcp_keep_alive_seconds),
        write_timeout: b.write_timeout(),
    };
    security::conn_gate::tune_socket(&stream, tuning.keepalive, tuning.write_timeout);
    let accepted = slot
        .before_first_request(async {
            let io = match broker.tls.as_deref() {
                Some(tls) => tls.accept_grpc(stream).await?,
                None => MaybeTls::Plain(stream),
            };
            // A plaintext peer must also send its whole HTTP/2 preface within the
            // deadline: hyper waits for it without a bound of its own.
            if let MaybeTls::Plain(tcp) = &io {
                wait_for_preface(tcp).await?;
            }
            Ok::<_, io::Error>(io)
        })
        .await;
    match accepted {
        Ok(Ok(io)) => {
            let _ = io.set_nodelay(true);
            let bytes = usize::try_from(broker.config.broker.max_in_flight_bytes_per_connection)
                .unwrap_or(usize::MAX);
            Some(GrpcIo {
                io,
                peer: Peer {
                    addr: peer,
                    bytes: InFlightLimit::new(bytes),
                },
                _slot: slot,
            })
        }
        Ok(Err(e)) => {
            tracing::info!(%peer, error = %e, "gRPC connection refused by TLS");
            None
        }
        Err(e) => {
            tracing::info!(%peer, error = %e, "gRPC TLS handshake or HTTP/2 preface past grpcFirstRequestTimeoutMillis, closing");
            None
        }
    }
}

/// Serves the endpoint on `listener` until the broker's shutdown, then drains.
pub async fn serve(listener: TcpListener, broker: Arc<Broker>) {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let b = &broker.config.broker;
    let gate = crate::gates::gate(b, &broker.metrics.limits, Listener::Grpc);
    let (tx, rx) = mpsc::channel::<io::Result<GrpcIo>>(HANDOFF_QUEUE);
    let accept_stop = CancellationToken::new();
    let accepting = {
        let broker = Arc::clone(&broker);
        let stop = accept_stop.clone();
        tokio::spawn(async move {
            listener::accept_loop(&listener, &gate, &stop, |stream, peer, slot| {
                let broker = Arc::clone(&broker);
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Some(io) = handshake(stream, peer, &broker, slot).await {
                        let _ = tx.send(Ok(io)).await;
                    }
                });
            })
            .await;
        })
    };
    let incoming =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<MessagingServiceServer<GrpcService>>()
        .await;
    health
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;

    let max_decode = broker.config.store.max_message_size as usize + DECODE_HEADROOM;
    let service = GrpcService {
        broker: Arc::clone(&broker),
        sessions: Arc::new(Sessions::new(SessionLimits {
            cap: b.grpc_max_connections as usize,
            per_source: b.grpc_max_connections_per_ip as usize,
            exempt: b.connection_limit_exempt_addresses.clone(),
            idle: Duration::from_millis(b.channel_expired_timeout),
        })),
        port,
        routes: Default::default(),
    };
    let messaging = MessagingServiceServer::new(service)
        .max_decoding_message_size(max_decode)
        .max_encoding_message_size(max_decode);
    let drain = Duration::from_millis(b.grpc_shutdown_drain_millis);
    let shutdown = broker.shutdown.clone();
    let signal = {
        let health = health.clone();
        let stop = accept_stop.clone();
        async move {
            shutdown.cancelled().await;
            health
                .set_not_serving::<MessagingServiceServer<GrpcService>>()
                .await;
            health
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
            stop.cancel();
        }
    };
    let budget = BudgetLayer::new(Budgets {
        total: Arc::clone(&broker.in_flight_bytes),
        max_message: max_decode,
        max_telemetry_message: usize::try_from(b.grpc_max_telemetry_message_size)
            .unwrap_or(usize::MAX),
        message_timeout: Duration::from_millis(b.grpc_request_message_timeout_millis),
        refusals: broker.metrics.limits.refusals.clone(),
    });
    let server = tonic::transport::Server::builder()
        .max_concurrent_streams(b.grpc_max_concurrent_streams)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .layer(budget)
        .add_service(health_service)
        .add_service(messaging)
        .serve_with_incoming_shutdown(incoming, signal);
    tracing::info!(port, "5.x gRPC endpoint serving");
    let shutdown = broker.shutdown.clone();
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => {
            if let Err(e) = r {
                tracing::error!(error = %e, "gRPC server failed");
            }
        }
        _ = async {
            shutdown.cancelled().await;
            tokio::time::sleep(drain).await;
        } => tracing::info!(?drain, "gRPC calls still open after grpcShutdownDrainMillis, closing"),
    }
    let _ = accepting.await;
}
