//! The HTTP endpoint on `metricsPort` (broker and nameserver alike): the serve loop over
//! a gated listener (its caps, per-source share, first-request deadline and idle timeout
//! are the listener's, [`security::conn_gate::GatedListener`]), the `/healthz` probe
//! every process answers the same way, and the OpenMetrics answer. Each server supplies
//! its own `/metrics` renderer and `/readyz` judgement as handlers.

use axum::Router;
use axum::handler::Handler;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use security::conn_gate::GatedListener;
use tokio_util::sync::CancellationToken;

/// The content type of the Prometheus/OpenMetrics text exposition.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `/metrics` (`metrics`, which renders the server's series), `/readyz`
/// (`readyz`, the server's own judgement) and `/healthz` (the process answers) on
/// `listener` until `shutdown`, then lets the requests in progress finish.
pub async fn serve<S, M, MT, R, RT>(
    listener: GatedListener,
    state: S,
    metrics: M,
    readyz: R,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    S: Clone + Send + Sync + 'static,
    M: Handler<MT, S>,
    R: Handler<RT, S>,
    MT: 'static,
    RT: 'static,
{
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/readyz", get(readyz))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

/// The answer to a scrape: the rendered exposition, or 500 when it could not be
/// rendered.
pub fn openmetrics<E>(rendered: Result<String, E>) -> Response {
    match rendered {
        Ok(text) => (StatusCode::OK, [(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use axum::extract::State;
    use security::conn_gate::{ConnGate, GateLimits, GateMetrics};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    /// The three routes answer: the server's renderer and readiness, and `/healthz`.
    #[tokio::test]
    async fn serves_metrics_readiness_and_health() {
        let inner = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = inner.local_addr().unwrap();
        let listener = GatedListener {
            inner,
            gate: ConnGate::new(
                GateLimits::cap(8, Duration::from_secs(10)),
                GateMetrics::default(),
            ),
            idle: Duration::from_secs(10),
            idle_closed: Default::default(),
            tls: None,
        };
        let ready = Arc::new(AtomicBool::new(false));
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            Arc::clone(&ready),
            |_: State<Arc<AtomicBool>>| async { openmetrics::<()>(Ok("up 1\n".into())) },
            |State(ready): State<Arc<AtomicBool>>| async move {
                if ready.load(Ordering::Acquire) {
                    (StatusCode::OK, "ready\n")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
                }
            },
            shutdown.clone(),
        ));

        let metrics = get(addr, "/metrics").await;
        assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
        assert!(metrics.contains(OPENMETRICS), "{metrics}");
        assert!(metrics.ends_with("up 1\n"), "{metrics}");
        let health = get(addr, "/healthz").await;
        assert!(health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        ready.store(true, Ordering::Release);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/nothing").await.starts_with("HTTP/1.1 404"));

        shutdown.cancel();
        server.await.unwrap().unwrap();
    }

    #[test]
    fn a_render_failure_is_a_server_error() {
        let answer = openmetrics(Err(std::fmt::Error));
        assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
