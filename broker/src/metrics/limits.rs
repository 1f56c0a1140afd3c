//! Series that show when a resource limit bites (`docs/operations.md` lists each limit
//! with its key and series).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use security::conn_gate::{GateMetrics, Refusal, RefusalCounters};

/// A refusal's label: the broker.conf key of the limit that refused it.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    pub limit: &'static str,
}

/// Refusals by the limit that made them (`rocketmq_broker_limit_refusals{limit=...}`),
/// shareable with the services that enforce limits away from the handlers.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Family<LimitLabels, Counter>);

impl Refusals {
    /// Counts one refusal by the limit whose broker.conf key is `key`.
    pub fn count(&self, key: &'static str) {
        self.0.get_or_create(&LimitLabels { limit: key }).inc();
    }

    /// Refusals so far by `key` (tests and the admin view).
    pub fn get(&self, key: &'static str) -> u64 {
        self.0.get_or_create(&LimitLabels { limit: key }).get()
    }

    /// The counter of `key`'s series, for code that counts without this type (the
    /// listeners' gates).
    pub fn counter(&self, key: &'static str) -> Counter {
        self.0.get_or_create(&LimitLabels { limit: key }).clone()
    }
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

/// The listeners that have a connection gate.
#[derive(Debug, Clone, Copy)]
pub enum Listener {
    /// The remoting port and the VIP port (one gate for both).
    Remoting,
    Ha,
    Http,
    /// The 5.x gRPC port (`grpcServerPort`).
    Grpc,
}

impl Listener {
    fn name(self) -> &'static str {
        match self {
            Self::Remoting => "remoting",
            Self::Ha => "ha",
            Self::Http => "http",
            Self::Grpc => "grpc",
        }
    }

    fn label(self) -> ListenerLabels {
        ListenerLabels {
            listener: self.name().to_owned(),
        }
    }

    /// The broker.conf key of the limit behind each refusal on this listener.
    pub fn key(self, reason: Refusal) -> &'static str {
        match (self, reason) {
            (_, Refusal::Reserved) => "connectionReservePercent",
            (Self::Remoting, Refusal::Cap) => "maxConnections",
            (Self::Remoting, Refusal::PerSource) => "maxConnectionsPerIp",
            (Self::Remoting, Refusal::FirstRequestTimeout) => "firstRequestTimeoutMillis",
            (Self::Ha, Refusal::Cap) => "haMaxConnections",
            (Self::Ha, Refusal::PerSource) => "haMaxConnectionsPerIp",
            (Self::Ha, Refusal::FirstRequestTimeout) => "haHandshakeTimeoutMillis",
            (Self::Http, Refusal::Cap) => "httpMaxConnections",
            (Self::Http, Refusal::PerSource) => "httpMaxConnectionsPerIp",
            (Self::Http, Refusal::FirstRequestTimeout) => "httpFirstRequestTimeoutMillis",
            (Self::Grpc, Refusal::Cap) => "grpcMaxConnections",
            (Self::Grpc, Refusal::PerSource) => "grpcMaxConnectionsPerIp",
            (Self::Grpc, Refusal::FirstRequestTimeout) => "grpcFirstRequestTimeoutMillis",
        }
    }
}

#[derive(Default)]
pub struct LimitMetrics {
    conn_open: Family<ListenerLabels, Gauge>,
    conn_refused: Family<ListenerLabels, Counter>,
    conn_refusals: Family<ListenerReasonLabels, Counter>,
    /// Pulls parked now (long polling).
    pub parked_pulls: Gauge,
    /// Pulls answered SYSTEM_BUSY because a parked-pull cap was reached.
    pub parked_refused: Counter,
    /// Connections closed because a write made no progress within `writeTimeoutMillis`.
    pub write_timeouts: Counter,
    /// HTTP connections closed after `httpIdleTimeoutMillis` without progress.
    pub http_idle_closed: Counter,
    /// Groups/topics a request named but could not auto-create (`maxAutoCreatePerRequest`).
    pub auto_create_deferred: Counter,
    /// Requests refused by a size bound (`maxHeartbeatGroups`, `maxQueueNums`, bad names).
    pub requests_refused: Counter,
    /// Refusals by the key of the limit that made them.
    pub refusals: Refusals,
    /// What the registries keyed by client input hold now (set at scrape time).
    pub filter_registry_bytes: Gauge,
    pub filter_registry_entries: Gauge,
    pub client_groups: Gauge,
}

impl LimitMetrics {
    /// The series of `listener`'s gate: open connections, refusals at accept, and each
    /// refusal by reason, counted both by listener and reason and by the config key of
    /// the limit (`rocketmq_broker_limit_refusals_total{limit="<key>"}`).
    pub fn listener(&self, listener: Listener) -> GateMetrics {
        let l = listener.label();
        let mut reasons = RefusalCounters::default();
        for reason in Refusal::ALL {
            let labels = ListenerReasonLabels {
                listener: listener.name().to_owned(),
                reason: reason.label().to_owned(),
            };
            reasons = reasons
                .with(reason, self.conn_refusals.get_or_create(&labels).clone())
                .with(reason, self.refusals.counter(listener.key(reason)));
        }
        GateMetrics {
            open: self.conn_open.get_or_create(&l).clone(),
            refused: self.conn_refused.get_or_create(&l).clone(),
            reasons,
        }
    }

    pub fn register(&self, r: &mut Registry) {
        r.register(
            "rocketmq_listener_connections",
            "Open connections, by listener (remoting, ha, http, grpc)",
            self.conn_open.clone(),
        );
        r.register(
            "rocketmq_listener_connections_refused",
            "Connections closed at accept because a connection cap was reached",
            self.conn_refused.clone(),
        );
        r.register(
            "rocketmq_listener_refusals",
            "Connections refused at accept or closed before their first request, by listener \
             and reason (cap, per_source, reserved, first_request_timeout)",
            self.conn_refusals.clone(),
        );
        r.register(
            "rocketmq_broker_parked_pulls",
            "Pull requests parked by long polling",
            self.parked_pulls.clone(),
        );
        r.register(
            "rocketmq_broker_parked_pulls_refused",
            "Pulls answered SYSTEM_BUSY because maxParkedPulls* was reached",
            self.parked_refused.clone(),
        );
        r.register(
            "rocketmq_broker_write_timeouts",
            "Connections closed because a write made no progress within writeTimeoutMillis",
            self.write_timeouts.clone(),
        );
        r.register(
            "rocketmq_broker_http_idle_closed",
            "HTTP connections closed because they moved no byte within httpIdleTimeoutMillis",
            self.http_idle_closed.clone(),
        );
        r.register(
            "rocketmq_broker_auto_create_deferred",
            "Groups or topics not auto-created because maxAutoCreatePerRequest was reached",
            self.auto_create_deferred.clone(),
        );
        r.register(
            "rocketmq_broker_requests_refused_by_limit",
            "Requests refused by a size bound (maxHeartbeatGroups, maxQueueNums, invalid names)",
            self.requests_refused.clone(),
        );
        r.register(
            "rocketmq_broker_filter_registry_bytes",
            "Bytes held by compiled SQL92 subscriptions (bounded by filterRegistryMaxBytes)",
            self.filter_registry_bytes.clone(),
        );
        r.register(
            "rocketmq_broker_filter_registry_entries",
            "Compiled SQL92 subscriptions registered, by (topic, group)",
            self.filter_registry_entries.clone(),
        );
        r.register(
            "rocketmq_broker_client_groups",
            "Producer and consumer groups with a live member (bounded by maxClientGroups)",
            self.client_groups.clone(),
        );
        r.register(
            "rocketmq_broker_limit_refusals",
            "Requests, entries or connections refused, by the broker.conf key of the limit",
            self.refusals.0.clone(),
        );
    }
}
