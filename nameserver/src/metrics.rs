//! Prometheus metrics and the HTTP endpoint serving them with the health probes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use security::conn_gate::{GateMetrics, Refusal, RefusalCounters};
use tokio_util::sync::CancellationToken;

use crate::kv_config::KvUsage;
use crate::route_table::RouteSizes;
use crate::state::Shared;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    /// RocketMQ request-code name, or the number for unknown codes.
    pub code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    pub listener: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerReasonLabels {
    pub listener: String,
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// The config key of the limit (`crate::limits`), a fixed set.
    pub limit: String,
}

/// What the tables keyed by peer input hold, set at scrape time.
#[derive(Default)]
struct TableGauges {
    live_brokers: Gauge,
    broker_names: Gauge,
    topics: Gauge,
    queue_datas: Gauge,
    filter_servers: Gauge,
    master_epochs: Gauge,
    kv_entries: Gauge,
    kv_bytes: Gauge,
}

impl TableGauges {
    fn register(&self, registry: &mut Registry) {
        let gauges: [(&str, &str, &Gauge); 8] = [
            (
                "live_brokers",
                "Brokers currently registered (bounded by maxBrokers)",
                &self.live_brokers,
            ),
            (
                "broker_names",
                "Broker names with a registered address",
                &self.broker_names,
            ),
            (
                "topics",
                "Topics with route data (bounded by maxRouteTopics)",
                &self.topics,
            ),
            (
                "queue_datas",
                "Topic and broker-name pairs of the routes (bounded by maxQueueDatas)",
                &self.queue_datas,
            ),
            (
                "filter_servers",
                "Filter server addresses of registered brokers",
                &self.filter_servers,
            ),
            (
                "master_epochs",
                "Broker names whose newest master epoch is remembered (bounded by maxMasterEpochs)",
                &self.master_epochs,
            ),
            (
                "kv_entries",
                "KV config entries (bounded by maxKvEntries)",
                &self.kv_entries,
            ),
            (
                "kv_bytes",
                "Namespace, key and value bytes of the KV config (bounded by maxKvBytes)",
                &self.kv_bytes,
            ),
        ];
        for (name, help, gauge) in gauges {
            registry.register(name, help, gauge.clone());
        }
    }

    fn set(&self, routes: &RouteSizes, kv: &KvUsage) {
        let set = |g: &Gauge, n: usize| g.set(i64::try_from(n).unwrap_or(i64::MAX));
        set(&self.live_brokers, routes.live_brokers);
        set(&self.broker_names, routes.broker_names);
        set(&self.topics, routes.topics);
        set(&self.queue_datas, routes.queue_datas);
        set(&self.filter_servers, routes.filter_servers);
        set(&self.master_epochs, routes.master_epochs);
        set(&self.kv_entries, kv.entries);
        set(&self.kv_bytes, kv.bytes);
    }
}

pub struct Metrics {
    registry: Registry,
    acl_refused: Family<ReasonLabels, Counter>,
    listener_open: Family<ListenerLabels, Gauge>,
    listener_refused: Family<ListenerLabels, Counter>,
    listener_refusals: Family<ListenerReasonLabels, Counter>,
    /// Connections closed because a write made no progress within `writeTimeoutMillis`.
    pub write_timeouts: Counter,
    /// HTTP connections closed after `httpIdleTimeoutMillis` without progress.
    pub http_idle_closed: Counter,
    /// REGISTER_BROKER requests refused by `maxRegisterBodyBytes`.
    pub register_refused: Counter,
    /// Requests refused by a table limit, by its config key.
    limit_refusals: Family<LimitLabels, Counter>,
    requests: Family<CodeLabels, Counter>,
    latency: Family<CodeLabels, Histogram, fn() -> Histogram>,
    connections: Gauge,
    tables: TableGauges,
}

fn latency_histogram() -> Histogram {
    // 20 µs .. ~0.6 s.
    Histogram::new(exponential_buckets(0.000_02, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("rmq_namesrv");
        let requests = Family::<CodeLabels, Counter>::default();
        let latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        let connections = Gauge::default();
        registry.register(
            "requests",
            "Requests handled, by request code",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to handle a request, by request code",
            latency.clone(),
        );
        registry.register(
            "open_connections",
            "Open client connections",
            connections.clone(),
        );
        let tables = TableGauges::default();
        tables.register(&mut registry);
        let limit_refusals = Family::<LimitLabels, Counter>::default();
        registry.register(
            "limit_refusals",
            "Requests refused by a limit on what the tables hold, by the limit's config key",
            limit_refusals.clone(),
        );
        let acl_refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "acl_refused",
            "State-changing requests refused by the ACL, by reason",
            acl_refused.clone(),
        );
        let listener_open = Family::<ListenerLabels, Gauge>::default();
        let listener_refused = Family::<ListenerLabels, Counter>::default();
        let listener_refusals = Family::<ListenerReasonLabels, Counter>::default();
        let write_timeouts = Counter::default();
        let http_idle_closed = Counter::default();
        let register_refused = Counter::default();
        registry.register(
            "listener_connections",
            "Open connections, by listener (remoting, http)",
            listener_open.clone(),
        );
        registry.register(
            "listener_connections_refused",
            "Connections closed at accept because a connection cap was reached",
            listener_refused.clone(),
        );
        registry.register(
            "listener_refusals",
            "Connections refused at accept or closed before their first request, by listener \
             and reason (cap, per_source, reserved, first_request_timeout)",
            listener_refusals.clone(),
        );
        registry.register(
            "write_timeouts",
            "Connections closed because a write made no progress within writeTimeoutMillis",
            write_timeouts.clone(),
        );
        registry.register(
            "http_idle_closed",
            "HTTP connections closed because they moved no byte within httpIdleTimeoutMillis",
            http_idle_closed.clone(),
        );
        registry.register(
            "register_refused",
            "REGISTER_BROKER bodies refused by maxRegisterBodyBytes",
            register_refused.clone(),
        );
        Self {
            registry,
            acl_refused,
            listener_open,
            listener_refused,
            listener_refusals,
            write_timeouts,
            http_idle_closed,
            register_refused,
            limit_refusals,
            requests,
            latency,
            connections,
            tables,
        }
    }
}

impl Metrics {
    /// The series of `listener`'s gate: open connections, refusals at accept, and
    /// refusals and first-request timeouts by reason.
    pub fn listener(&self, listener: &str) -> GateMetrics {
        let l = ListenerLabels {
            listener: listener.to_owned(),
        };
        let mut reasons = RefusalCounters::default();
        for reason in Refusal::ALL {
            let labels = ListenerReasonLabels {
                listener: listener.to_owned(),
                reason: reason.label().to_owned(),
            };
            reasons = reasons.with(
                reason,
                self.listener_refusals.get_or_create(&labels).clone(),
            );
        }
        GateMetrics {
            open: self.listener_open.get_or_create(&l).clone(),
            refused: self.listener_refused.get_or_create(&l).clone(),
            reasons,
        }
    }

    /// Known request codes get their own series; every other code shares `UNKNOWN`, so a
    /// client sending random codes cannot grow the label set.
    pub fn observe_request(&self, code: i32, elapsed: Duration) {
        let labels = CodeLabels {
            code: protocol::code::request::name(code)
                .unwrap_or("UNKNOWN")
                .to_owned(),
        };
        self.requests.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    pub fn acl_refused(&self, reason: &str) {
        self.acl_refused
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts a refusal by the limit `key`.
    pub fn limit_refused(&self, key: &str) {
        self.limit_refusals
            .get_or_create(&LimitLabels {
                limit: key.to_owned(),
            })
            .inc();
    }

    pub fn connection_opened(&self) {
        self.connections.inc();
    }

    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    fn render(&self, routes: &RouteSizes, kv: &KvUsage) -> Result<String, std::fmt::Error> {
        self.tables.set(routes, kv);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// Serves `/metrics`, `/readyz` and (shared) `/healthz` until `shutdown`.
pub async fn serve_http(
    listener: security::conn_gate::GatedListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    remoting::http::serve(listener, shared, metrics, readyz, shutdown).await
}

async fn metrics(State(shared): State<Arc<Shared>>) -> axum::response::Response {
    let routes = shared.routes.read().sizes();
    let kv = shared.kv.usage();
    remoting::http::openmetrics(shared.metrics.render(&routes, &kv))
}

async fn readyz(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    if shared.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_request_series_and_gauges() {
        let m = Metrics::default();
        m.observe_request(105, Duration::from_micros(50));
        m.observe_request(9999, Duration::from_micros(50));
        m.observe_request(-7, Duration::from_micros(50));
        m.connection_opened();
        m.limit_refused("maxBrokers");
        let routes = RouteSizes {
            live_brokers: 2,
            topics: 3,
            master_epochs: 4,
            ..RouteSizes::default()
        };
        let kv = KvUsage {
            entries: 5,
            bytes: 60,
        };
        let text = m.render(&routes, &kv).unwrap();
        assert!(text.contains(r#"rmq_namesrv_requests_total{code="GET_ROUTEINFO_BY_TOPIC"} 1"#));
        assert!(text.contains(r#"rmq_namesrv_requests_total{code="UNKNOWN"} 2"#));
        assert!(!text.contains("9999"));
        assert!(text.contains("rmq_namesrv_request_duration_seconds_bucket"));
        assert!(text.contains("rmq_namesrv_live_brokers 2"));
        assert!(text.contains("rmq_namesrv_topics 3"));
        assert!(text.contains("rmq_namesrv_open_connections 1"));
        assert!(text.contains("rmq_namesrv_master_epochs 4"));
        assert!(text.contains("rmq_namesrv_kv_entries 5"));
        assert!(text.contains("rmq_namesrv_kv_bytes 60"));
        assert!(text.contains("rmq_namesrv_queue_datas 0"));
        assert!(text.contains(r#"rmq_namesrv_limit_refusals_total{limit="maxBrokers"} 1"#));
    }
}
