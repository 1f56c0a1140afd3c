//! The remoting listeners (main and VIP port, one gate: `maxConnections`,
//! `maxConnectionsPerIp`, the reserve, `firstRequestTimeoutMillis`) and the broker's
//! periodic tasks: consumer offset flush
//! (`flushConsumerOffsetInterval`) and expiry of silent clients (every 10 s, 120 s).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use security::tls::MaybeTls;
use tokio::net::{TcpListener, TcpStream};

use crate::services::Broker;
use crate::transport::connection;
use remoting::server::listener::{self, SocketTuning};
use security::conn_gate::ConnSlot;

/// Binds the remoting port (the caller reports the bound address).
pub async fn bind(broker: &Broker) -> anyhow::Result<TcpListener> {
    let b = &broker.config.broker;
    TcpListener::bind(SocketAddr::new(b.bind_address, b.listen_port))
        .await
        .with_context(|| {
            format!(
                "cannot listen on {}:{} (listenPort)",
                b.bind_address, b.listen_port
            )
        })
}

/// Binds the VIP port (`listenPort - 2`, 4.9's `fastRemotingServer`) when it is on.
/// Older 4.x Java clients send there when `vipChannelEnabled` is true (their default
/// before 4.5.1), so it serves exactly what the main port serves.
pub async fn bind_fast(broker: &Broker) -> anyhow::Result<Option<TcpListener>> {
    let b = &broker.config.broker;
    let Some(port) = b.fast_port() else {
        return Ok(None);
    };
    let listener = TcpListener::bind(SocketAddr::new(b.bind_address, port))
        .await
        .with_context(|| {
            format!(
                "cannot listen on {}:{port} (the VIP port, fastListenPort / listenPort - 2; \
                 set fastListenPortEnable=false to turn it off)",
                b.bind_address
            )
        })?;
    Ok(Some(listener))
}

/// Accepts connections on the main port until shutdown; the broker is ready meanwhile.
pub async fn accept_loop(listener: TcpListener, broker: Arc<Broker>) {
    broker.ready.store(true, Ordering::Release);
    serve_listener(listener, Arc::clone(&broker)).await;
    broker.ready.store(false, Ordering::Release);
}

/// Accepts connections on `listener` (main or VIP port) until shutdown; one over a
/// cap is dropped (closed) at accept, before any work.
pub async fn serve_listener(listener: TcpListener, broker: Arc<Broker>) {
    let gate = Arc::clone(&broker.remoting_gate);
    listener::accept_loop(&listener, &gate, &broker.shutdown, |stream, peer, slot| {
        tokio::spawn(serve_maybe_tls(stream, peer, Arc::clone(&broker), slot));
    })
    .await;
}

/// TLS or plaintext as `tls.server.mode` decides, then the connection; a plaintext
/// stream keeps tokio's lock-free owned halves. `slot` is its place under the caps; the
/// TLS handshake counts against its first-request deadline.
async fn serve_maybe_tls(stream: TcpStream, peer: SocketAddr, broker: Arc<Broker>, slot: ConnSlot) {
    let b = &broker.config.broker;
    let tuning = SocketTuning {
        keepalive: Duration::from_secs(b.tcp_keep_alive_seconds),
        write_timeout: b.write_timeout(),
    };
    match listener::handshake(stream, peer, &slot, broker.tls.as_deref(), tuning).await {
        Some(MaybeTls::Plain(tcp)) => {
            let (read, write) = tcp.into_split();
            connection::serve_io(read, write, peer, broker, slot).await;
        }
        Some(tls) => {
            let (read, write) = tokio::io::split(tls);
            connection::serve_io(read, write, peer, broker, slot).await;
        }
        None => {}
    }
}

/// Persists consumer offsets every `flushConsumerOffsetInterval` when they changed.
pub async fn flush_offsets(broker: Arc<Broker>) {
    let period =
        Duration::from_millis(broker.config.broker.flush_consumer_offset_interval.max(100));
    loop {
        tokio::select! {
            _ = broker.shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let b = Arc::clone(&broker);
        let result = tokio::task::spawn_blocking(move || b.offsets.persist_if_dirty()).await;
        if let Ok(Err(e)) = result {
            tracing::error!(error = %e, "cannot persist consumerOffset.json");
        }
    }
}

/// `ClientHousekeepingService`: drops memberships no heartbeat refreshed within
/// `channelExpiredTimeout` and closes connections left with none.
pub async fn expire_clients(broker: Arc<Broker>) {
    let expiry = Duration::from_millis(broker.config.broker.channel_expired_timeout);
    // 4.9 scans every 10 s; a shorter expiry is scanned often enough to be kept.
    let period = (expiry / 4).clamp(Duration::from_millis(100), Duration::from_secs(10));
    loop {
        tokio::select! {
            _ = broker.shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let now = Instant::now();
        broker.locks.purge_expired(now);
        broker.consume_rate.purge_idle();
        let expired = broker.clients.expire(now, expiry);
        crate::services::membership::groups_left(&broker, &expired.groups);
        for channel in expired.channels {
            tracing::warn!(peer = %channel.peer, ?expiry, "client channel expired, closing");
            channel.close.cancel();
        }
    }
}
