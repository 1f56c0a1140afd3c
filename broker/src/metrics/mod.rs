//! Prometheus metrics (RocketMQ exporter names where one exists) and the HTTP endpoint
//! with `/metrics`, `/healthz` and `/readyz`. The endpoint starts before the store
//! recovers so a Kubernetes startup probe sees the process alive but not ready.

pub mod grpc;
pub mod handles;
pub mod limits;
pub mod pop;
pub mod skips;
pub mod transactions;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::metrics::handles::HandleCache;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    pub request_code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabels {
    pub topic: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LagLabels {
    pub group: String,
    pub topic: String,
    pub queue_id: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    pub group: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LevelLabels {
    pub level: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SlaveLabels {
    pub slave: String,
}

/// Replication gauges, refreshed from the HA state at every scrape.
#[derive(Default)]
struct HaGauges {
    role: Gauge,
    epoch: Gauge,
    confirm_offset: Gauge,
    connections: Gauge,
    in_sync: Gauge,
    slave_lag: Family<SlaveLabels, Gauge>,
    behind_master: Gauge,
    forged_acks: Gauge,
    refused_handshakes: Gauge,
    refused_histories: Gauge,
    refused_truncations: Gauge,
    truncated_bytes: Gauge,
    fenced: Gauge,
}

pub struct Metrics {
    registry: Registry,
    retry_messages: Family<GroupLabels, Counter>,
    dlq_messages: Family<GroupLabels, Counter>,
    delay_waiting: Family<LevelLabels, Gauge>,
    delay_delivered: Family<LevelLabels, Counter>,
    ha: HaGauges,
    latency: Family<CodeLabels, Histogram, fn() -> Histogram>,
    put_messages: Family<TopicLabels, Counter>,
    put_bytes: Family<TopicLabels, Counter>,
    get_messages: Family<TopicLabels, Counter>,
    get_bytes: Family<TopicLabels, Counter>,
    connections: Gauge,
    busy: Counter,
    illegal: Counter,
    acl_refused: Family<ReasonLabels, Counter>,
    send_failed: Family<ReasonLabels, Counter>,
    dispatch_behind: Gauge,
    commitlog_min: Gauge,
    commitlog_max: Gauge,
    group_diff: Family<LagLabels, Gauge>,
    pub transactions: crate::metrics::transactions::TransactionMetrics,
    /// POP consumption (5.x consumers).
    pub pop: crate::metrics::pop::PopMetrics,
    /// The 5.x gRPC endpoint's calls and streams.
    pub grpc: crate::metrics::grpc::GrpcMetrics,
    /// Where the resource limits bite.
    pub limits: crate::metrics::limits::LimitMetrics,
    /// Records the transaction checker and the schedule service passed over.
    pub skips: crate::metrics::skips::SkipMetrics,
    put_total: AtomicU64,
    get_total: AtomicU64,
    /// Handles into `latency`, `put_*` and `get_*` by request code / topic.
    latency_by_code: HandleCache<i32, Histogram>,
    put_by_topic: HandleCache<String, (Counter, Counter)>,
    get_by_topic: HandleCache<String, (Counter, Counter)>,
    boot: Instant,
    boot_ms: i64,
}

/// The message and byte counters of `topic` in two per-topic families.
fn topic_pair(
    messages: &Family<TopicLabels, Counter>,
    bytes: &Family<TopicLabels, Counter>,
    topic: &str,
) -> (Counter, Counter) {
    let l = TopicLabels {
        topic: topic.to_owned(),
    };
    (
        messages.get_or_create(&l).clone(),
        bytes.get_or_create(&l).clone(),
    )
}

/// The latency cache key all unknown request codes share.
const UNKNOWN_CODE: i32 = i32::MIN;

fn latency_histogram() -> Histogram {
    // 20 µs .. ~0.6 s.
    Histogram::new(exponential_buckets(0.000_02, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut r = Registry::default();
        let latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        let m = Self {
            retry_messages: Family::default(),
            dlq_messages: Family::default(),
            delay_waiting: Family::default(),
            delay_delivered: Family::default(),
            latency,
            put_messages: Family::default(),
            put_bytes: Family::default(),
            get_messages: Family::default(),
            get_bytes: Family::default(),
            connections: Gauge::default(),
            busy: Counter::default(),
            illegal: Counter::default(),
            acl_refused: Family::default(),
            send_failed: Family::default(),
            dispatch_behind: Gauge::default(),
            commitlog_min: Gauge::default(),
            commitlog_max: Gauge::default(),
            group_diff: Family::default(),
            transactions: Default::default(),
            pop: Default::default(),
            grpc: Default::default(),
            limits: Default::default(),
            skips: Default::default(),
            put_total: AtomicU64::new(0),
            get_total: AtomicU64::new(0),
            latency_by_code: HandleCache::default(),
            put_by_topic: HandleCache::default(),
            get_by_topic: HandleCache::default(),
            boot: Instant::now(),
            boot_ms: crate::now_ms(),
            registry: Registry::default(),
            ha: HaGauges::default(),
        };
        for (name, help, gauge) in [
            (
                "rocketmq_ha_role",
                "Role: 0 ASYNC_MASTER, 1 SYNC_MASTER, 2 SLAVE",
                &m.ha.role,
            ),
            (
                "rocketmq_ha_epoch",
                "Current replication epoch",
                &m.ha.epoch,
            ),
            (
                "rocketmq_ha_confirm_offset",
                "CommitLog offset known to be on the in-sync replicas",
                &m.ha.confirm_offset,
            ),
            (
                "rocketmq_ha_connections",
                "Slaves connected to this master's HA port",
                &m.ha.connections,
            ),
            (
                "rocketmq_ha_in_sync_slaves",
                "Connected slaves within haSlaveFallbehindMax",
                &m.ha.in_sync,
            ),
            (
                "rocketmq_ha_behind_master_bytes",
                "Slave: master CommitLog end minus this replica's end",
                &m.ha.behind_master,
            ),
            (
                "rocketmq_ha_forged_acks",
                "HA acks beyond what the connection streamed (connection dropped)",
                &m.ha.forged_acks,
            ),
            (
                "rocketmq_ha_refused_handshakes",
                "HA connections refused (wrong group, secret or epoch)",
                &m.ha.refused_handshakes,
            ),
            (
                "rocketmq_ha_refused_histories",
                "Slaves whose history proof did not match this master's log (connection dropped)",
                &m.ha.refused_histories,
            ),
            (
                "rocketmq_ha_refused_truncations",
                "Cuts below the confirm offset or to zero refused until an operator allows them",
                &m.ha.refused_truncations,
            ),
            (
                "rocketmq_ha_truncated_bytes",
                "CommitLog bytes cut when rejoining a new master",
                &m.ha.truncated_bytes,
            ),
            (
                "rocketmq_ha_fenced",
                "1 when writes are refused because a newer epoch exists",
                &m.ha.fenced,
            ),
        ] {
            r.register(name, help, gauge.clone());
        }
        r.register(
            "rocketmq_ha_slave_lag_bytes",
            "Master CommitLog end minus the slave's acknowledged offset, per slave",
            m.ha.slave_lag.clone(),
        );
        r.register(
            "rocketmq_request_latency_seconds",
            "Time to handle a request, by request code",
            m.latency.clone(),
        );
        r.register(
            "rocketmq_producer_messages",
            "Messages stored, by topic",
            m.put_messages.clone(),
        );
        r.register(
            "rocketmq_producer_message_size",
            "Body bytes stored, by topic",
            m.put_bytes.clone(),
        );
        r.register(
            "rocketmq_consumer_messages",
            "Messages pulled, by topic",
            m.get_messages.clone(),
        );
        r.register(
            "rocketmq_consumer_message_size",
            "Record bytes pulled, by topic",
            m.get_bytes.clone(),
        );
        r.register(
            "rocketmq_broker_connections",
            "Open client connections",
            m.connections.clone(),
        );
        r.register(
            "rocketmq_broker_rejected_busy",
            "Requests answered SYSTEM_BUSY by flow control",
            m.busy.clone(),
        );
        r.register(
            "rocketmq_broker_rejected_illegal",
            "Sends rejected as MESSAGE_ILLEGAL",
            m.illegal.clone(),
        );
        r.register(
            "rocketmq_broker_send_failed",
            "Sends answered with anything but SEND_OK, by reason (the response code's name)",
            m.send_failed.clone(),
        );
        r.register(
            "rocketmq_storage_dispatch_behind_bytes",
            "CommitLog bytes not yet dispatched to queues and index",
            m.dispatch_behind.clone(),
        );
        r.register(
            "rocketmq_commitlog_min_offset",
            "Smallest CommitLog offset still stored",
            m.commitlog_min.clone(),
        );
        r.register(
            "rocketmq_commitlog_max_offset",
            "CommitLog write position",
            m.commitlog_max.clone(),
        );
        r.register(
            "rocketmq_group_diff",
            "Messages a consumer group has not committed yet, per queue",
            m.group_diff.clone(),
        );
        r.register(
            "rocketmq_retry_messages",
            "Messages a consumer group handed back for another attempt via %RETRY%<group>",
            m.retry_messages.clone(),
        );
        r.register(
            "rocketmq_dlq_messages",
            "Messages moved to the dead letter queue %DLQ%<group>; any increase needs a human",
            m.dlq_messages.clone(),
        );
        r.register(
            "rocketmq_delay_messages_waiting",
            "Messages in SCHEDULE_TOPIC_XXXX not yet delivered, by delay level",
            m.delay_waiting.clone(),
        );
        r.register(
            "rocketmq_delay_messages_delivered",
            "Delayed messages delivered to their real topic, by delay level",
            m.delay_delivered.clone(),
        );
        r.register(
            "rocketmq_acl_refused",
            "Requests refused by the ACL, by reason (missing_access_key, unknown_access_key, bad_signature, not_admin, topic_permission, group_permission)",
            m.acl_refused.clone(),
        );
        m.transactions.register(&mut r);
        m.pop.register(&mut r);
        m.limits.register(&mut r);
        m.grpc.register(&mut r);
        m.skips.register(&mut r);
        Self { registry: r, ..m }
    }

    /// Known request codes get a series each; every other code shares `UNKNOWN` (one
    /// cache entry too), so a client sending random codes cannot grow the label set.
    pub fn observe_request(&self, code: i32, elapsed: Duration) {
        let name = protocol::code::request::name(code);
        let code = if name.is_some() { code } else { UNKNOWN_CODE };
        let make = || {
            let request_code = name.unwrap_or("UNKNOWN").to_owned();
            self.latency
                .get_or_create(&CodeLabels { request_code })
                .clone()
        };
        self.latency_by_code
            .with(&code, make, |h| h.observe(elapsed.as_secs_f64()));
    }

    pub fn record_put(&self, topic: &str, messages: u64, bytes: u64) {
        let make = || topic_pair(&self.put_messages, &self.put_bytes, topic);
        self.put_by_topic.with(topic, make, |(m, b)| {
            m.inc_by(messages);
            b.inc_by(bytes);
        });
        self.put_total.fetch_add(messages, Ordering::Relaxed);
    }

    pub fn record_get(&self, topic: &str, messages: u64, bytes: u64) {
        let make = || topic_pair(&self.get_messages, &self.get_bytes, topic);
        self.get_by_topic.with(topic, make, |(m, b)| {
            m.inc_by(messages);
            b.inc_by(bytes);
        });
        self.get_total.fetch_add(messages, Ordering::Relaxed);
    }

    /// A message of `group` handed back for retry (CONSUMER_SEND_MSG_BACK or a send to
    /// `%RETRY%<group>`).
    pub fn record_retry(&self, group: &str) {
        let l = GroupLabels {
            group: group.to_owned(),
        };
        self.retry_messages.get_or_create(&l).inc();
    }

    /// A message of `group` moved to `%DLQ%<group>`.
    pub fn record_dlq(&self, group: &str) {
        let l = GroupLabels {
            group: group.to_owned(),
        };
        self.dlq_messages.get_or_create(&l).inc();
    }

    pub fn record_delay_delivered(&self, level: i32, messages: u64) {
        let l = LevelLabels {
            level: level.to_string(),
        };
        self.delay_delivered.get_or_create(&l).inc_by(messages);
    }

    /// Drops the per-topic series of a deleted topic (a re-created one starts at zero).
    pub fn forget_topic(&self, topic: &str) {
        let l = TopicLabels {
            topic: topic.to_owned(),
        };
        for family in [
            &self.put_messages,
            &self.put_bytes,
            &self.get_messages,
            &self.get_bytes,
        ] {
            family.remove(&l);
        }
        self.put_by_topic.remove(topic);
        self.get_by_topic.remove(topic);
    }

    /// Drops the per-group series of a deleted group.
    pub fn forget_group(&self, group: &str) {
        let l = GroupLabels {
            group: group.to_owned(),
        };
        self.retry_messages.remove(&l);
        self.dlq_messages.remove(&l);
    }

    pub fn connection_opened(&self) {
        self.connections.inc();
    }

    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    pub fn rejected_busy(&self) {
        self.busy.inc();
    }

    pub fn acl_refused(&self, reason: &str) {
        self.acl_refused
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// A send (SEND_MESSAGE, V2, BATCH) answered `code`; everything but SUCCESS is
    /// counted under a fixed set of reasons, so the label's cardinality stays bounded.
    pub fn send_answered(&self, code: i32) {
        use protocol::code::response as r;
        let reason = match code {
            r::SUCCESS => return,
            r::SYSTEM_BUSY => "system_busy",
            r::MESSAGE_ILLEGAL => "message_illegal",
            r::NO_PERMISSION => "no_permission",
            r::TOPIC_NOT_EXIST => "topic_not_exist",
            r::SERVICE_NOT_AVAILABLE => "service_not_available",
            r::SLAVE_NOT_AVAILABLE => "slave_not_available",
            r::FLUSH_DISK_TIMEOUT => "flush_disk_timeout",
            r::FLUSH_SLAVE_TIMEOUT => "flush_slave_timeout",
            r::SUBSCRIPTION_GROUP_NOT_EXIST => "subscription_group_not_exist",
            r::SYSTEM_ERROR => "system_error",
            _ => "other",
        };
        self.send_failed
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn rejected_illegal(&self) {
        self.illegal.inc();
    }

    pub fn put_messages_total(&self) -> u64 {
        self.put_total.load(Ordering::Relaxed)
    }

    pub fn get_messages_total(&self) -> u64 {
        self.get_total.load(Ordering::Relaxed)
    }

    pub fn boot_timestamp(&self) -> i64 {
        self.boot_ms
    }

    /// `BrokerController`'s runtime text: `[ d days, h hours, m minutes, s seconds ]`.
    pub fn runtime_text(&self) -> String {
        let s = self.boot.elapsed().as_secs();
        format!(
            "[ {} days, {} hours, {} minutes, {} seconds ]",
            s / 86_400,
            s / 3_600 % 24,
            s / 60 % 60,
            s % 60
        )
    }

    /// Sets the replication gauges from `snapshot`.
    pub fn set_ha(&self, s: &HaSnapshot) {
        let g = &self.ha;
        g.role.set(s.role);
        g.epoch.set(s.epoch);
        g.confirm_offset.set(s.confirm_offset);
        g.connections.set(s.connections);
        g.in_sync.set(s.in_sync);
        g.slave_lag.clear();
        for (slave, lag) in &s.slave_lags {
            g.slave_lag
                .get_or_create(&SlaveLabels {
                    slave: slave.clone(),
                })
                .set(*lag);
        }
        g.behind_master.set(s.behind_master);
        g.forged_acks.set(s.forged_acks);
        g.refused_handshakes.set(s.refused_handshakes);
        g.refused_histories.set(s.refused_histories);
        g.refused_truncations.set(s.refused_truncations);
        g.truncated_bytes.set(s.truncated_bytes);
        g.fenced.set(i64::from(s.fenced));
    }

    /// Sets the store's gauges: dispatch lag and the CommitLog's offset range.
    pub fn set_store(&self, dispatch_behind: i64, commitlog_min: i64, commitlog_max: i64) {
        self.dispatch_behind.set(dispatch_behind);
        self.commitlog_min.set(commitlog_min);
        self.commitlog_max.set(commitlog_max);
    }

    /// Sets the messages waiting in delay `level`.
    pub fn set_delay_waiting(&self, level: i32, waiting: i64) {
        let l = LevelLabels {
            level: level.to_string(),
        };
        self.delay_waiting.get_or_create(&l).set(waiting);
    }

    /// Replaces the consumer lag series with `lags`: `(group, topic, queue id, lag)`.
    pub fn set_group_lags(&self, lags: impl IntoIterator<Item = (String, String, i32, i64)>) {
        self.group_diff.clear();
        for (group, topic, queue_id, lag) in lags {
            let labels = LagLabels {
                group,
                topic,
                queue_id: queue_id.to_string(),
            };
            self.group_diff.get_or_create(&labels).set(lag);
        }
    }

    /// Every series in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// The replication figures the HA gauges show, taken at scrape time.
#[derive(Debug, Default, Clone)]
pub struct HaSnapshot {
    /// 0 ASYNC_MASTER, 1 SYNC_MASTER, 2 SLAVE.
    pub role: i64,
    pub epoch: i64,
    pub confirm_offset: i64,
    pub connections: i64,
    pub in_sync: i64,
    /// Each slave's address and how far it is behind.
    pub slave_lags: Vec<(String, i64)>,
    pub behind_master: i64,
    pub forged_acks: i64,
    pub refused_handshakes: i64,
    pub refused_histories: i64,
    pub refused_truncations: i64,
    pub truncated_bytes: i64,
    pub fenced: bool,
}

#[cfg(test)]
mod tests;
