//! Listeners (each capped: `maxConnections`, `maxConnectionsPerIp`, `httpMaxConnections`)
//! and background tasks: the remoting port, the HTTP port, and the scanner
//! that drops silent brokers (`NamesrvController` schedules it every 10 s).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::state::Shared;
use crate::{connection, metrics};
use security::conn_gate::{self, ConnGate, GatedListener};

/// Runs until `shutdown` is cancelled, then waits for the listeners to stop.
pub async fn run(shared: Arc<Shared>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let (bind, port, http_port, caps, http_idle, http_tls) = {
        let c = shared.config.read();
        (
            c.bind_address,
            c.listen_port,
            c.metrics_port,
            (
                c.max_connections,
                c.max_connections_per_ip,
                c.http_max_connections,
            ),
            c.http_idle_timeout,
            c.tls_metrics_enable,
        )
    };
    let http_tls = security::http_stream::metrics_tls(shared.tls.as_ref(), http_tls)?;
    let (open, refused) = shared.metrics.listener("remoting");
    let gate = ConnGate::new(caps.0, caps.1, open, refused);
    let (open, refused) = shared.metrics.listener("http");
    let http_gate = ConnGate::new(caps.2, 0, open, refused);
    let listener = TcpListener::bind(SocketAddr::new(bind, port))
        .await
        .with_context(|| format!("cannot listen on {bind}:{port}"))?;
    let http = TcpListener::bind(SocketAddr::new(bind, http_port))
        .await
        .with_context(|| format!("cannot listen on {bind}:{http_port} (metricsPort)"))?;
    let local = listener.local_addr()?;
    let http_local = http.local_addr()?;

    let http_task = tokio::spawn(metrics::serve_http(
        GatedListener {
            inner: http,
            gate: http_gate,
            idle: http_idle,
            idle_closed: shared.metrics.http_idle_closed.clone(),
            tls: http_tls,
        },
        Arc::clone(&shared),
        shutdown.clone(),
    ));
    let scan_task = tokio::spawn(scan_brokers(Arc::clone(&shared), shutdown.clone()));
    shared.ready.store(true, Ordering::Release);
    tracing::info!(remoting = %local, http = %http_local, "rmq-nameserver listening");
    println!(
        "The Name Server boot success. serializeType=JSON, listening on {local}, http on {http_local}"
    );

    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Over a cap: the stream is dropped (closed) here, before any work.
                let Some(slot) = gate.admit(peer.ip()) else {
                    tracing::debug!(%peer, "connection cap reached, closing at once");
                    continue;
                };
                let (conn, close) = shared.open_connection(&shutdown);
                tracing::debug!(%peer, conn, "connection opened");
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    let (write_timeout, keepalive) = {
                        let c = shared.config.read();
                        (c.write_timeout, c.tcp_keep_alive)
                    };
                    conn_gate::tune_socket(&stream, keepalive, write_timeout);
                    // TLS or plaintext as `tls.server.mode` decides.
                    match security::tls::accept(shared.tls.as_deref(), stream).await {
                        Ok(stream) => {
                            connection::serve(stream, peer, shared, conn, close, slot).await
                        }
                        Err(e) => {
                            tracing::info!(%peer, error = %e, "connection refused by TLS");
                            shared.close_connection(conn);
                        }
                    }
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    shared.ready.store(false, Ordering::Release);
    tracing::info!("shutting down");
    scan_task.abort();
    match http_task.await {
        Ok(result) => result.context("HTTP endpoint failed")?,
        Err(e) => tracing::warn!(error = %e, "HTTP task ended abnormally"),
    }
    Ok(())
}

async fn scan_brokers(shared: Arc<Shared>, shutdown: CancellationToken) {
    loop {
        let (interval, expiry) = {
            let c = shared.config.read();
            (c.scan_not_active_broker_interval, c.broker_channel_expired)
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let expired = shared.routes.write().expire(Instant::now(), expiry);
        for (addr, conn) in expired {
            tracing::warn!(broker = %addr, ?expiry, "broker expired, removed and its connection closed");
            shared.cancel_connection(conn);
        }
    }
}
