//! Listeners and background tasks: the remoting port, the HTTP port, and the scanner
//! that drops silent brokers (`NamesrvController` schedules it every 10 s). Each listener
//! admits through a gate ([`security::conn_gate`]): a cap (`maxConnections`,
//! `httpMaxConnections`), a per-source share (`maxConnectionsPerIp`,
//! `httpMaxConnectionsPerIp`, sparing `connectionLimitExemptAddresses`), the reserve
//! (`connectionReservePercent`) and a first-request deadline (`firstRequestTimeoutMillis`,
//! `httpFirstRequestTimeoutMillis`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::state::Shared;
use crate::{connection, metrics};
use remoting::server::listener::{self, SocketTuning};
use security::conn_gate::{ConnGate, GateLimits, GatedListener};

/// Runs until `shutdown` is cancelled, then waits for the listeners to stop.
pub async fn run(shared: Arc<Shared>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let (bind, port, http_port, limits, http_idle, http_tls) = {
        let c = shared.config.read();
        (
            c.bind_address,
            c.listen_port,
            c.metrics_port,
            gate_limits(&c),
            c.http_idle_timeout,
            c.tls_metrics_enable,
        )
    };
    let http_tls = security::http_stream::metrics_tls(shared.tls.as_ref(), http_tls)?;
    let gate = ConnGate::new(limits.0, shared.metrics.listener("remoting"));
    let http_gate = ConnGate::new(limits.1, shared.metrics.listener("http"));
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

    remoting::server::listener::accept_loop(&listener, &gate, &shutdown, |stream, peer, slot| {
        let (conn, close) = shared.open_connection(&shutdown);
        tracing::debug!(%peer, conn, "connection opened");
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let tuning = {
                let c = shared.config.read();
                SocketTuning {
                    keepalive: c.tcp_keep_alive,
                    write_timeout: c.write_timeout,
                }
            };
            let tls = shared.tls.as_deref();
            match listener::handshake(stream, peer, &slot, tls, tuning).await {
                Some(stream) => connection::serve(stream, peer, shared, conn, close, slot).await,
                None => {
                    shared.close_connection(conn);
                }
            }
        });
    })
    .await;
    shared.ready.store(false, Ordering::Release);
    tracing::info!("shutting down");
    scan_task.abort();
    match http_task.await {
        Ok(result) => result.context("HTTP endpoint failed")?,
        Err(e) => tracing::warn!(error = %e, "HTTP task ended abnormally"),
    }
    Ok(())
}

/// The remoting and HTTP listeners' bounds.
fn gate_limits(c: &crate::config::NamesrvConfig) -> (GateLimits, GateLimits) {
    let limits = |max, per_source, first_request| GateLimits {
        max,
        per_source,
        reserve_percent: c.connection_reserve_percent,
        exempt: c.connection_limit_exempt_addresses.clone(),
        first_request,
    };
    (
        limits(
            c.max_connections,
            c.max_connections_per_ip,
            c.first_request_timeout,
        ),
        limits(
            c.http_max_connections,
            c.http_max_connections_per_ip,
            c.http_first_request_timeout,
        ),
    )
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
