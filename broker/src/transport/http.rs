//! The HTTP endpoint on `metricsPort`: `/metrics` (series refreshed from the broker at
//! scrape time), `/healthz` (the process answers) and `/readyz` (the store recovered, the
//! listener is up, and the store is in service).

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use tokio_util::sync::CancellationToken;

use crate::metrics::{HaSnapshot, Metrics};
use crate::services::Broker;
use crate::services::ha::Ha;

/// State of the HTTP endpoint: the metrics exist from process start, the broker only
/// once the store has recovered.
pub struct Http {
    pub metrics: Arc<Metrics>,
    pub broker: OnceLock<Arc<Broker>>,
}

/// Serves `/metrics`, `/readyz` and (shared) `/healthz` until `shutdown`.
pub async fn serve_http(
    listener: security::conn_gate::GatedListener,
    http: Arc<Http>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    remoting::http::serve(listener, http, metrics, readyz, shutdown).await
}

async fn metrics(State(http): State<Arc<Http>>) -> axum::response::Response {
    if let Some(b) = http.broker.get() {
        refresh(&http.metrics, b);
    }
    remoting::http::openmetrics(http.metrics.encode())
}

async fn readyz(State(http): State<Arc<Http>>) -> impl IntoResponse {
    match http.broker.get() {
        Some(b) if b.is_ready() => match b.store.out_of_service() {
            // A fenced store stays out of service until a restart: not ready.
            Some(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("store out of service: {reason}\n"),
            ),
            None => (StatusCode::OK, "ready\n".to_owned()),
        },
        _ => (StatusCode::SERVICE_UNAVAILABLE, "recovering\n".to_owned()),
    }
}

/// Sets the gauges read from the broker's state: store offsets, delay levels,
/// replication, registry sizes and consumer lag.
pub fn refresh(m: &Metrics, b: &Broker) {
    let store = &b.store;
    m.set_store(
        store.dispatch_behind_bytes() as i64,
        store.min_phy_offset().get(),
        store.max_phy_offset().get(),
    );
    for (level, waiting) in b.schedule.waiting(store.as_ref()) {
        m.set_delay_waiting(level, waiting);
    }
    if let Some(ha) = b.ha.get() {
        m.set_ha(&ha_snapshot(ha));
    }
    let (entries, bytes) = b.filters.usage();
    m.limits.filter_registry_entries.set(entries as i64);
    m.limits.filter_registry_bytes.set(bytes as i64);
    m.limits.client_groups.set(b.clients.group_count() as i64);
    // Lag series only for existing groups, topics and queues, so that committed offsets
    // cannot mint labels.
    let mut lags = Vec::new();
    for group in b.groups.snapshot().subscription_group_table.keys() {
        for (topic, queues) in b.offsets.topics_of_group(group) {
            let Some(config) = b.topics.get(&topic) else {
                continue;
            };
            let queue_count = config.read_queue_nums.max(config.write_queue_nums);
            for (queue_id, committed) in queues {
                if !(0..queue_count).contains(&queue_id) {
                    continue;
                }
                let max = store.max_offset_in_queue(&topic, queue_id).get();
                let lag = max.saturating_sub(committed.get()).max(0);
                lags.push((group.clone(), topic.clone(), queue_id, lag));
            }
        }
    }
    m.set_group_lags(lags);
}

fn ha_snapshot(ha: &Ha) -> HaSnapshot {
    use std::sync::atomic::Ordering::Relaxed;
    let info = ha.runtime_info();
    let c = &ha.counters;
    HaSnapshot {
        role: match ha.role() {
            store::BrokerRole::AsyncMaster => 0,
            store::BrokerRole::SyncMaster => 1,
            store::BrokerRole::Slave => 2,
        },
        epoch: i64::from(info.epoch),
        confirm_offset: info.confirm_offset,
        connections: info.ha_connection_info.len() as i64,
        in_sync: i64::from(info.in_sync_slave_nums),
        slave_lags: info
            .ha_connection_info
            .iter()
            .map(|c| (c.addr.clone(), c.diff))
            .collect(),
        behind_master: if info.master {
            0
        } else {
            (info.master_commit_log_max_offset - info.max_offset).max(0)
        },
        forged_acks: c.forged_acks.load(Relaxed) as i64,
        refused_handshakes: c.refused_handshakes.load(Relaxed) as i64,
        refused_histories: c.refused_histories.load(Relaxed) as i64,
        refused_truncations: c.refused_truncations.load(Relaxed) as i64,
        truncated_bytes: c.truncated_bytes.load(Relaxed) as i64,
        fenced: info.fenced,
    }
}
