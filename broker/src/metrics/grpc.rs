//! Series of the 5.x gRPC endpoint: calls by method and v2 status code, open Telemetry
//! streams.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub method: &'static str,
    pub code: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LookupLabels {
    pub outcome: &'static str,
}

#[derive(Default)]
pub struct GrpcMetrics {
    requests: Family<CallLabels, Counter>,
    streams: Gauge,
    route_lookups: Family<LookupLabels, Counter>,
}

/// Holds one open stream on the gauge until dropped.
pub struct StreamGauge(Gauge);

impl Drop for StreamGauge {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl GrpcMetrics {
    pub fn request(&self, method: &'static str, code: &'static str) {
        self.requests
            .get_or_create(&CallLabels { method, code })
            .inc();
    }

    pub fn requests(&self, method: &'static str, code: &'static str) -> u64 {
        self.requests
            .get_or_create(&CallLabels { method, code })
            .get()
    }

    /// One QueryRoute route lookup: `cached`, `namesrv` (asked and answered with a
    /// route), `no_route` (no nameserver knows the topic) or `unreachable`.
    pub fn route_lookup(&self, outcome: &'static str) {
        self.route_lookups
            .get_or_create(&LookupLabels { outcome })
            .inc();
    }

    pub fn route_lookups(&self, outcome: &'static str) -> u64 {
        self.route_lookups
            .get_or_create(&LookupLabels { outcome })
            .get()
    }

    pub fn stream_opened(&self) -> StreamGauge {
        self.streams.inc();
        StreamGauge(self.streams.clone())
    }

    pub fn register(&self, r: &mut Registry) {
        r.register(
            "rocketmq_grpc_requests",
            "5.x gRPC calls answered, by method and apache.rocketmq.v2 status code",
            self.requests.clone(),
        );
        r.register(
            "rocketmq_grpc_active_streams",
            "Open 5.x Telemetry streams",
            self.streams.clone(),
        );
        r.register(
            "rocketmq_grpc_route_lookups",
            "Topic routes QueryRoute looked up, by outcome (cached, namesrv, no_route, unreachable)",
            self.route_lookups.clone(),
        );
    }
}
