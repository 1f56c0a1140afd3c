//! Operator metrics (prometheus-client) and the HTTP endpoint serving `/metrics`,
//! `/healthz` and `/readyz`.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub kind: &'static str,
    pub error: &'static str,
}

/// One broker pod of one cluster.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberLabels {
    /// Namespace of the Broker (named so Prometheus' own `namespace` target label does
    /// not shadow it).
    pub resource_namespace: String,
    pub broker: String,
    pub pod: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    /// Namespace of the Broker (named so Prometheus' own `namespace` target label does
    /// not shadow it).
    pub resource_namespace: String,
    pub broker: String,
    pub broker_name: String,
}

/// One Topic resource.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabels {
    pub resource_namespace: String,
    /// The Topic object's name (`spec.topicName` may differ).
    pub topic: String,
}

/// One broker group and how its failover ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailoverLabels {
    pub resource_namespace: String,
    pub broker: String,
    pub broker_name: String,
    /// `clean`, `unclean`, `reverted`, `blocked`, `cancelled`.
    pub outcome: &'static str,
}

/// One broker group and one failover phase.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub resource_namespace: String,
    pub broker: String,
    pub broker_name: String,
    pub phase: &'static str,
}

/// Every phase a group can be in, for the one-hot phase gauge.
pub const FAILOVER_PHASES: &[&str] = &[
    "Idle",
    "Detected",
    "Fencing",
    "Electing",
    "Promoting",
    "Repointing",
    "Completed",
    "Blocked",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub kind: &'static str,
    pub reason: String,
}

pub struct Metrics {
    registry: Registry,
    pub reconciliations: Family<KindLabels, Counter>,
    pub failures: Family<ErrorLabels, Counter>,
    pub duration: Family<KindLabels, Histogram>,
    /// Pod restarts the operator performed (rolling restarts).
    pub restarts: Family<MemberLabels, Counter>,
    pub replication_lag_bytes: Family<MemberLabels, Gauge>,
    pub dispatch_behind_bytes: Family<MemberLabels, Gauge>,
    /// Master epoch of each group; bumps on every failover or switchover.
    pub epoch: Family<GroupLabels, Gauge>,
    /// Failovers and switchovers that ended, by outcome.
    pub failovers: Family<FailoverLabels, Counter>,
    /// Detection to end of each failover, by outcome.
    pub failover_duration: Family<FailoverLabels, Histogram>,
    /// 1 for the phase each group is in, 0 for the others.
    pub failover_phase: Family<PhaseLabels, Gauge>,
    pub events: Family<EventLabels, Counter>,
    pub leader: Gauge,
    /// flushBehindBytes (written but not yet flushed to disk) reported by each broker.
    pub flush_behind_bytes: Family<MemberLabels, Gauge>,
    /// Commit-log max offset of each group's master, as last seen.
    pub master_max_offset: Family<GroupLabels, Gauge>,
    /// 1 while a group's master pod is ready, whatever the replica count or failover
    /// state (single-replica groups never enter the failover machine).
    pub master_ready: Family<GroupLabels, Gauge>,
    /// Mirror of each managed Topic's Ready condition (unmanaged Topics have none).
    pub topic_ready: Family<TopicLabels, Gauge>,
    /// Broker status writes (bounded: generation changes, threshold crossings).
    pub status_writes: Counter,
    /// UPDATE_AND_CREATE_TOPIC requests sent (only on drift or creation).
    pub topic_writes: Counter,
    /// Member gauges in use, per `(namespace, broker)`, so they can be dropped.
    members: Mutex<HashMap<(String, String), BTreeSet<String>>>,
    /// Group gauges in use (brokerNames), per `(namespace, broker)`.
    groups: Mutex<HashMap<(String, String), BTreeSet<String>>>,
    ready: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("rmq_operator");
        let reconciliations = Family::<KindLabels, Counter>::default();
        let failures = Family::<ErrorLabels, Counter>::default();
        let duration = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
        });
        let restarts = Family::<MemberLabels, Counter>::default();
        let replication_lag_bytes = Family::<MemberLabels, Gauge>::default();
        let dispatch_behind_bytes = Family::<MemberLabels, Gauge>::default();
        let epoch = Family::<GroupLabels, Gauge>::default();
        let failovers = Family::<FailoverLabels, Counter>::default();
        let failover_duration = Family::<FailoverLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0])
        });
        let failover_phase = Family::<PhaseLabels, Gauge>::default();
        let events = Family::<EventLabels, Counter>::default();
        let leader = Gauge::default();
        let flush_behind_bytes = Family::<MemberLabels, Gauge>::default();
        let master_max_offset = Family::<GroupLabels, Gauge>::default();
        let master_ready = Family::<GroupLabels, Gauge>::default();
        registry.register(
            "group_master_ready",
            "1 while the broker group's master pod is ready",
            master_ready.clone(),
        );
        let topic_ready = Family::<TopicLabels, Gauge>::default();
        registry.register(
            "topic_ready",
            "1 while a managed Topic's Ready condition is True",
            topic_ready.clone(),
        );
        let status_writes = Counter::default();
        let topic_writes = Counter::default();
        registry.register(
            "flush_behind_bytes",
            "flushBehindBytes reported by each broker (written, not yet on disk)",
            flush_behind_bytes.clone(),
        );
        registry.register(
            "master_max_offset_bytes",
            "Commit-log max offset of each broker group's master",
            master_max_offset.clone(),
        );
        registry.register(
            "broker_status_writes",
            "Broker status patches the operator wrote",
            status_writes.clone(),
        );
        registry.register(
            "topic_writes",
            "UPDATE_AND_CREATE_TOPIC requests the operator sent",
            topic_writes.clone(),
        );
        registry.register(
            "reconciliations",
            "Reconciliations started, by kind",
            reconciliations.clone(),
        );
        registry.register(
            "reconcile_failures",
            "Reconciliations that failed, by kind and error",
            failures.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconciliation, by kind",
            duration.clone(),
        );
        registry.register(
            "pod_restarts",
            "Broker pods restarted by the operator",
            restarts.clone(),
        );
        registry.register(
            "replication_lag_bytes",
            "Commit-log bytes a broker is behind its master",
            replication_lag_bytes.clone(),
        );
        registry.register(
            "dispatch_behind_bytes",
            "dispatchBehindBytes reported by each broker",
            dispatch_behind_bytes.clone(),
        );
        registry.register(
            "group_epoch",
            "Master epoch of each broker group",
            epoch.clone(),
        );
        registry.register(
            "failovers",
            "Failovers and switchovers that ended, per broker group and outcome",
            failovers.clone(),
        );
        registry.register(
            "failover_duration_seconds",
            "Time from detection to the end of a failover, per broker group and outcome",
            failover_duration.clone(),
        );
        registry.register(
            "failover_phase",
            "1 for the failover phase each broker group is in",
            failover_phase.clone(),
        );
        registry.register(
            "events",
            "Kubernetes Events emitted, by kind and reason",
            events.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        Self {
            registry,
            reconciliations,
            failures,
            duration,
            restarts,
            replication_lag_bytes,
            dispatch_behind_bytes,
            epoch,
            failovers,
            failover_duration,
            failover_phase,
            events,
            leader,
            flush_behind_bytes,
            master_max_offset,
            master_ready,
            topic_ready,
            status_writes,
            topic_writes,
            members: Mutex::new(HashMap::new()),
            groups: Mutex::new(HashMap::new()),
            ready: AtomicBool::new(false),
        }
    }
}

impl Metrics {
    pub fn reconcile_started(&self, kind: &'static str) {
        self.reconciliations
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    pub fn reconcile_finished(&self, kind: &'static str, elapsed: Duration) {
        self.duration
            .get_or_create(&KindLabels { kind })
            .observe(elapsed.as_secs_f64());
    }

    pub fn reconcile_failed(&self, kind: &'static str, error: &'static str) {
        self.failures
            .get_or_create(&ErrorLabels { kind, error })
            .inc();
    }

    /// Sets the one-hot phase gauge of a group.
    pub fn set_failover_phase(&self, group: &GroupLabels, phase: &'static str) {
        for p in FAILOVER_PHASES {
            self.failover_phase
                .get_or_create(&PhaseLabels {
                    resource_namespace: group.resource_namespace.clone(),
                    broker: group.broker.clone(),
                    broker_name: group.broker_name.clone(),
                    phase: p,
                })
                .set(i64::from(*p == phase));
        }
    }

    /// Sets (or, when the member did not answer, removes) one member's live gauges, so a
    /// silent broker shows no figure instead of a frozen one.
    pub fn set_member(
        &self,
        labels: &MemberLabels,
        lag: Option<i64>,
        dispatch_behind: Option<i64>,
        flush_behind: Option<i64>,
    ) {
        for (family, value) in [
            (&self.replication_lag_bytes, lag),
            (&self.dispatch_behind_bytes, dispatch_behind),
            (&self.flush_behind_bytes, flush_behind),
        ] {
            match value {
                Some(v) => {
                    family.get_or_create(labels).set(v);
                }
                None => {
                    family.remove(labels);
                }
            }
        }
        self.members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((labels.resource_namespace.clone(), labels.broker.clone()))
            .or_default()
            .insert(labels.pod.clone());
    }

    /// Drops the gauges of members of `broker` not in `keep` (removed pods; everything
    /// when the Broker is gone), and its groups' gauges when `keep` is empty.
    pub fn retain_members(&self, namespace: &str, broker: &str, keep: &BTreeSet<String>) {
        let mut members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        let key = (namespace.to_owned(), broker.to_owned());
        let Some(known) = members.get_mut(&key) else {
            return;
        };
        for pod in known.iter().filter(|p| !keep.contains(*p)) {
            let labels = MemberLabels {
                resource_namespace: namespace.to_owned(),
                broker: broker.to_owned(),
                pod: pod.clone(),
            };
            self.replication_lag_bytes.remove(&labels);
            self.dispatch_behind_bytes.remove(&labels);
            self.flush_behind_bytes.remove(&labels);
            self.restarts.remove(&labels);
        }
        known.retain(|p| keep.contains(p));
        if keep.is_empty() {
            members.remove(&key);
        }
    }

    /// Records that `group` has gauges (see [`Self::forget_broker`]).
    pub fn note_group(&self, group: &GroupLabels) {
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((group.resource_namespace.clone(), group.broker.clone()))
            .or_default()
            .insert(group.broker_name.clone());
    }

    /// Brokers (`(namespace, name)`) that have gauges.
    pub fn brokers(&self) -> Vec<(String, String)> {
        let members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        let groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: BTreeSet<(String, String)> = members.keys().cloned().collect();
        out.extend(groups.keys().cloned());
        out.into_iter().collect()
    }

    /// Drops every gauge of a deleted Broker.
    pub fn forget_broker(&self, namespace: &str, broker: &str) {
        self.retain_members(namespace, broker, &BTreeSet::new());
        let names = self
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(namespace.to_owned(), broker.to_owned()))
            .unwrap_or_default();
        for broker_name in names {
            self.forget_group(&GroupLabels {
                resource_namespace: namespace.to_owned(),
                broker: broker.to_owned(),
                broker_name,
            });
        }
    }

    /// Drops the per-group gauges of one group (a deleted Broker or a removed group).
    pub fn forget_group(&self, group: &GroupLabels) {
        self.epoch.remove(group);
        self.master_max_offset.remove(group);
        self.master_ready.remove(group);
        for p in FAILOVER_PHASES {
            self.failover_phase.remove(&PhaseLabels {
                resource_namespace: group.resource_namespace.clone(),
                broker: group.broker.clone(),
                broker_name: group.broker_name.clone(),
                phase: p,
            });
        }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(serve_metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(serve_ready))
        .with_state(metrics)
}

async fn serve_metrics(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.encode(),
    )
}

async fn serve_ready(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    if m.is_ready() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member that stops answering shows no figure (not a frozen one),
    /// and removed pods or Brokers leave no series behind.
    #[test]
    fn member_gauges_vanish_with_silence_removed_pods_and_deleted_brokers() {
        let m = Metrics::default();
        let member = |pod: &str| MemberLabels {
            resource_namespace: "ns".to_owned(),
            broker: "b".to_owned(),
            pod: pod.to_owned(),
        };
        m.set_member(&member("b-0-0"), Some(0), Some(1), Some(2));
        m.set_member(&member("b-0-1"), Some(4096), Some(1), Some(3));
        let text = m.encode();
        assert!(text.contains("pod=\"b-0-1\""), "{text}");
        assert!(text.contains("flush_behind_bytes"), "{text}");

        // b-0-1 stops answering: its live gauges go, b-0-0's stay.
        m.set_member(&member("b-0-1"), None, None, None);
        let text = m.encode();
        assert!(!text.contains("pod=\"b-0-1\""), "{text}");
        assert!(text.contains("pod=\"b-0-0\""), "{text}");

        // Scaled down to nothing but b-0-0, then the Broker is deleted.
        m.set_member(&member("b-0-1"), Some(1), Some(1), Some(1));
        m.retain_members("ns", "b", &BTreeSet::from(["b-0-0".to_owned()]));
        assert!(!m.encode().contains("pod=\"b-0-1\""));
        m.retain_members("ns", "b", &BTreeSet::new());
        assert!(!m.encode().contains("pod=\"b-0-0\""));
    }

    #[tokio::test]
    async fn serves_metrics_and_probes_over_http() {
        let metrics = Arc::new(Metrics::default());
        metrics.reconcile_started("Broker");
        metrics.reconcile_failed("Topic", "admin");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = router(metrics.clone());
        let server = tokio::spawn(async move { axum::serve(listener, app).await });

        let get = |path: &'static str| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            s.write_all(req.as_bytes()).await.unwrap();
            let mut body = String::new();
            s.read_to_string(&mut body).await.unwrap();
            body
        };
        let body = get("/metrics").await;
        assert!(body.contains("rmq_operator_reconciliations_total{kind=\"Broker\"} 1"));
        assert!(
            body.contains(
                "rmq_operator_reconcile_failures_total{kind=\"Topic\",error=\"admin\"} 1"
            )
        );
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        metrics.set_ready(true);
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        server.abort();
    }
}
