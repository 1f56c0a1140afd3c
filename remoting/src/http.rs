//! The HTTP endpoint on `metricsPort` (broker and nameserver alike): the serve loop over
//! a gated listener (its caps, per-source share, first-request deadline and idle timeout
//! are the listener's, [`security::conn_gate::GatedListener`]), the `/healthz` probe
//! every process answers the same way, and the OpenMetrics answer. Each server supplies
//! its own `/metrics` renderer and `/readyz` judgement as routes.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use security::conn_gate::GatedListener;
use tokio_util::sync::CancellationToken;

/// The content type of the Prometheus/OpenMetrics text exposition.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `routes` plus `/healthz` (the process answers) on `listener` until `shutdown`,
/// then lets the requests in progress finish.
pub async fn serve(
    listener: GatedListener,
    routes: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = routes.route("/healthz", get(|| async { "ok\n" }));
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
