//! Broker configuration: RocketMQ's `BrokerConfig` / `NettyServerConfig` keys that this
//! broker honours, plus the store's `MessageStoreConfig`, read from one `broker.conf`
//! like `mqbroker -c` does. Unknown keys are reported, never fatal, so existing files
//! can be brought over unchanged.

pub mod keys;
pub use remoting::properties;

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use security::conn_gate::ExemptSources;
use security::sign::{Credentials, Secret};
use security::tls::{ClientTlsSettings, ServerTlsSettings};
use store::MessageStoreConfig;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("bad value {value:?} for {key}: expected {}", expected_values(key))]
    BadValue { key: String, value: String },
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

/// What `key` accepts, for the error a bad value gets: the choices of an enumerated key,
/// otherwise the kind of its default value.
fn expected_values(key: &str) -> String {
    match key {
        "flushDiskType" => return "one of ASYNC_FLUSH, SYNC_FLUSH".to_owned(),
        "brokerRole" => return "one of ASYNC_MASTER, SYNC_MASTER, SLAVE".to_owned(),
        "tls.server.mode" => return "one of disabled, permissive, enforcing".to_owned(),
        "tls.server.need.client.auth" => return "one of none, optional, require".to_owned(),
        "accessKey/secretKey" => return "both keys set, or neither".to_owned(),
        _ => {}
    }
    let defaults = Config::default();
    let default = defaults
        .broker
        .entries()
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .or_else(|| {
            serde_json::to_value(&defaults.store)
                .ok()
                .and_then(|v| v.get(key).map(|v| v.to_string()))
        });
    match default.as_deref() {
        Some("true" | "false") => "true or false".to_owned(),
        Some(d) if d.parse::<i64>().is_ok() => format!("an integer (default {d})"),
        Some(d) => format!("a value like the default {d}"),
        None => "a valid value".to_owned(),
    }
}

trait ConfigValue: Sized {
    fn parse_value(text: &str) -> Option<Self>;
    fn render(&self) -> String;
}

macro_rules! display_value {
    ($($t:ty),*) => {$(
        impl ConfigValue for $t {
            fn parse_value(text: &str) -> Option<Self> {
                text.trim().parse().ok()
            }
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
display_value!(bool, i32, i64, u16, u32, u64, String, IpAddr);

impl ConfigValue for Option<Secret> {
    fn parse_value(text: &str) -> Option<Self> {
        let t = text.trim();
        Some((!t.is_empty()).then(|| Secret::new(t)))
    }
    fn render(&self) -> String {
        self.as_ref()
            .map(|s| s.expose().to_owned())
            .unwrap_or_default()
    }
}

/// Keys whose values never leave the process: `-p` and GET_BROKER_CONFIG show them as
/// [`REDACTED`] when set.
pub const SECRET_KEYS: &[&str] = &["haSecret", "secretKey", "adminSecret", "namesrvAdminSecret"];
pub const REDACTED: &str = "******";

impl ConfigValue for Option<String> {
    fn parse_value(text: &str) -> Option<Self> {
        let t = text.trim();
        Some((!t.is_empty()).then(|| t.to_owned()))
    }
    fn render(&self) -> String {
        self.clone().unwrap_or_default()
    }
}

/// A percentage, 0 to 100; anything else is a bad value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percent(pub u32);

impl ConfigValue for Percent {
    fn parse_value(text: &str) -> Option<Self> {
        text.trim().parse().ok().filter(|p| *p <= 100).map(Self)
    }
    fn render(&self) -> String {
        self.0.to_string()
    }
}

/// `connectionLimitExemptAddresses`: a list that does not parse is a bad value.
impl ConfigValue for ExemptSources {
    fn parse_value(text: &str) -> Option<Self> {
        text.parse().ok()
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

/// [`Secret`] never shows: GET_BROKER_CONFIG, `-p` and `Debug` (logs) print a mask.
impl ConfigValue for Secret {
    fn parse_value(text: &str) -> Option<Self> {
        Some(Self::new(text.trim()))
    }
    fn render(&self) -> String {
        if self.is_empty() {
            String::new()
        } else {
            "******".to_owned()
        }
    }
}

/// One table declares each broker field with its RocketMQ key and default, so the
/// struct, `Default`, [`BrokerConfig::set`] and the `-p` printout cannot disagree.
macro_rules! broker_config {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty = $key:literal => $default:expr ; )*) => {
        #[derive(Debug, Clone, PartialEq)]
        pub struct BrokerConfig {
            $( $(#[$doc])* pub $field: $ty, )*
        }

        impl Default for BrokerConfig {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl BrokerConfig {
            /// Applies one key; `Ok(false)` when it is not a broker key.
            pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
                match key {
                    $( $key => {
                        self.$field = <$ty as ConfigValue>::parse_value(value).ok_or_else(|| {
                            ConfigError::BadValue { key: key.to_owned(), value: value.to_owned() }
                        })?;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }

            /// `(key, value)` of every broker key, in declaration order.
            pub fn entries(&self) -> Vec<(&'static str, String)> {
                vec![$( ($key, ConfigValue::render(&self.$field)), )*]
            }
        }
    };
}

broker_config! {
    broker_cluster_name: String = "brokerClusterName" => "DefaultCluster".to_owned();
    broker_name: String = "brokerName" => "broker-a".to_owned();
    /// 0 = master, > 0 = slave. Under NOTIFY_BROKER_ROLE_CHANGED it is this broker's
    /// identity; it registers as 0 while master.
    broker_id: i64 = "brokerId" => 0;
    /// `;`-separated `host:port` list; host names are re-resolved on every registration.
    namesrv_addr: Option<String> = "namesrvAddr" => std::env::var("NAMESRV_ADDR").ok();
    listen_port: u16 = "listenPort" => 10911;
    /// Serve the same protocol on the VIP ("fast") port too, as 4.9's `fastRemotingServer`
    /// does for 4.x Java clients with `vipChannelEnabled` (not a RocketMQ key: 4.9 always
    /// opens it).
    fast_listen_port_enable: bool = "fastListenPortEnable" => true;
    /// The VIP port; 0 means `listenPort - 2` (10909), as `BrokerController` derives it.
    fast_listen_port: u16 = "fastListenPort" => 0;
    /// Address the broker listens on (not a RocketMQ key; RocketMQ binds all interfaces).
    bind_address: IpAddr = "bindAddress" => IpAddr::from([0, 0, 0, 0]);
    /// Address published to nameservers and written into message ids as the store host.
    broker_ip1: String = "brokerIP1" => "127.0.0.1".to_owned();
    broker_ip2: Option<String> = "brokerIP2" => None;
    /// 0 means `listenPort + 1`, as `BrokerStartup` derives it.
    ha_listen_port: u16 = "haListenPort" => 0;
    /// The master's HA address for a slave (`host:port`); otherwise learned from the
    /// registration answer or NOTIFY_BROKER_ROLE_CHANGED.
    ha_master_address: Option<String> = "haMasterAddress" => None;
    /// The role this broker takes when a role change promotes it: `SYNC_MASTER` or
    /// `ASYNC_MASTER` (not a RocketMQ key). Empty: its own `brokerRole` if that is a
    /// master role, else SYNC_MASTER. The operator sets it on every member from the
    /// group's `replication.ackMode`, so an ASYNC group stays ASYNC after a failover.
    ha_master_role: String = "haMasterRole" => String::new();
    /// Shared secret of the broker group for the HA handshake (not a RocketMQ key); the
    /// environment variable `RMQ_HA_SECRET` supplies it when the key is absent (a
    /// Kubernetes Secret, never a ConfigMap). Never printed.
    ha_secret: Secret = "haSecret" => Secret::new(std::env::var("RMQ_HA_SECRET").unwrap_or_default());
    /// Period of the slave's metadata sync from the master, ms.
    slave_sync_interval: u64 = "slaveSyncInterval" => 10_000;
    /// HTTP port for /metrics, /healthz and /readyz (not a RocketMQ key).
    metrics_port: u16 = "metricsPort" => 5557;
    broker_permission: i32 = "brokerPermission" => 6;
    default_topic_queue_nums: i32 = "defaultTopicQueueNums" => 8;
    auto_create_topic_enable: bool = "autoCreateTopicEnable" => true;
    auto_create_subscription_group: bool = "autoCreateSubscriptionGroup" => true;
    cluster_topic_enable: bool = "clusterTopicEnable" => true;
    broker_topic_enable: bool = "brokerTopicEnable" => true;
    long_polling_enable: bool = "longPollingEnable" => true;
    short_polling_time_mills: u64 = "shortPollingTimeMills" => 1000;
    notify_consumer_ids_changed_enable: bool = "notifyConsumerIdsChangedEnable" => true;
    /// SQL92 subscriptions are served only when on (4.9 default: off).
    enable_property_filter: bool = "enablePropertyFilter" => false;
    /// Bytes of SQL92 selector text a subscription may carry (not a RocketMQ key; 4.9
    /// has no bound). Every selector a client sends — heartbeat, pull,
    /// CHECK_CLIENT_CONFIG — is compiled within these three limits, whether or not
    /// `enablePropertyFilter` is on; a selector over one is refused with
    /// SUBSCRIPTION_PARSE_FAILED and a remark naming the key.
    filter_sql_max_length: u32 = "filterSqlMaxLength" => 16 * 1024;
    /// Nesting depth of a compiled selector: parentheses, NOT and unary minus, `=`
    /// chains (not a RocketMQ key). At most 64.
    filter_sql_max_depth: u32 = "filterSqlMaxDepth" => 32;
    /// Terms (nodes, `IN` items) of a compiled selector (not a RocketMQ key).
    filter_sql_max_nodes: u32 = "filterSqlMaxNodes" => 4096;
    /// Bytes the compiled SQL92 subscriptions of all groups may hold (not a RocketMQ
    /// key); a subscription that would pass it is refused, none is evicted.
    filter_registry_max_bytes: u64 = "filterRegistryMaxBytes" => 64 * 1024 * 1024;
    /// `%RETRY%<group>` pulls apply the group's SQL92 filter of the original topic.
    filter_support_retry: bool = "filterSupportRetry" => false;
    /// Accepted for broker.conf compatibility; the ConsumeQueueExt bloom bitmap is not
    /// built, so SQL92 always evaluates exactly against the stored properties.
    enable_calc_filter_bit_map: bool = "enableCalcFilterBitMap" => false;
    reject_transaction_message: bool = "rejectTransactionMessage" => false;
    region_id: String = "regionId" => "DefaultRegion".to_owned();
    trace_on: bool = "traceOn" => true;
    register_name_server_period: u64 = "registerNameServerPeriod" => 30_000;
    register_broker_timeout_mills: u64 = "registerBrokerTimeoutMills" => 6_000;
    /// On SIGTERM the broker unregisters from its nameservers first, then keeps serving
    /// this long (clients refresh routes every 30 s by default, 4.9
    /// `pollNameServerInterval`) before it stops accepting connections, ms (not a
    /// RocketMQ key; 4.9 closes its listeners and unregisters in one go). The operator
    /// sets it below the pods' termination grace period.
    shutdown_unregister_wait_ms: u64 = "shutdownUnregisterWaitMs" => 0;
    flush_consumer_offset_interval: u64 = "flushConsumerOffsetInterval" => 5_000;
    server_channel_max_idle_time_seconds: u64 = "serverChannelMaxIdleTimeSeconds" => 120;
    /// Requests one connection may have in progress before it gets SYSTEM_BUSY.
    max_in_flight_per_connection: u32 = "maxInFlightPerConnection" => 256;
    /// Requests the whole broker may have in progress before SYSTEM_BUSY.
    max_in_flight_total: u32 = "maxInFlightTotal" => 16_384;
    /// Bytes (body and header) of the requests one connection may have in progress
    /// before it gets SYSTEM_BUSY (not a RocketMQ key); a single larger request is
    /// served when it is the connection's only one. gRPC connections have the same
    /// budget for the messages their calls are receiving or handling (and a Telemetry
    /// stream's largest command, for its life); over it a call ends RESOURCE_EXHAUSTED.
    max_in_flight_bytes_per_connection: u64 = "maxInFlightBytesPerConnection" => 64 * 1024 * 1024;
    /// Bytes of the requests the whole broker may have in progress, remoting and gRPC
    /// together (not a RocketMQ key).
    max_in_flight_bytes_total: u64 = "maxInFlightBytesTotal" => 1024 * 1024 * 1024;
    /// Longest a pull may stay parked, ms, whatever `suspendTimeoutMillis` the client
    /// asks for (4.9 takes the client's value as is; its clients ask 15-20 s).
    max_suspend_timeout_millis: u64 = "maxSuspendTimeoutMillis" => 30_000;
    /// Parked pulls one connection may have; more are answered SYSTEM_BUSY. Parked pulls
    /// hold none of the in-flight permits sends and heartbeats need.
    max_parked_pulls_per_connection: u32 = "maxParkedPullsPerConnection" => 1024;
    /// Parked pulls across the broker.
    max_parked_pulls_total: u32 = "maxParkedPullsTotal" => 65_536;
    /// POP messages one (group, topic) may have in flight — delivered to 5.x consumers and
    /// neither acked nor visible again (not a RocketMQ key; 5.x bounds them only by its
    /// revive topic's disk). A pop over it gets what still fits, or, when nothing fits,
    /// SYSTEM_BUSY with a remark naming this key.
    pop_max_in_flight_per_group_topic: u32 = "popMaxInFlightPerGroupTopic" => 32_768;
    /// POP messages in flight across the broker (not a RocketMQ key); each costs about
    /// 150 bytes of memory.
    pop_max_in_flight_total: u32 = "popMaxInFlightTotal" => 262_144;
    /// POP requests parked waiting for messages across the broker (not a RocketMQ key;
    /// 5.x's `popPollingSize` bounds them per queue). Over it a pop with nothing to
    /// deliver is answered at once, refused as POLLING_FULL.
    pop_max_parked_total: u32 = "popMaxParkedTotal" => 16_384;
    /// A write to a client that makes no progress for this long closes the connection.
    write_timeout_millis: u64 = "writeTimeoutMillis" => 15_000;
    /// TCP keepalive idle time on accepted connections, s (0 disables keepalive).
    tcp_keep_alive_seconds: u64 = "tcpKeepAliveSeconds" => 60;
    /// Open remoting connections (main and VIP port together); a peer over the cap is
    /// closed at once.
    max_connections: u32 = "maxConnections" => 10_000;
    /// Open remoting connections one source IP may hold (not a RocketMQ key; 0: no
    /// per-source share). 1000 leaves room for a thousand client instances behind one
    /// NAT address; list larger NATs in `connectionLimitExemptAddresses`.
    max_connections_per_ip: u32 = "maxConnectionsPerIp" => 1000;
    /// Open HA connections (slaves) on `haListenPort`.
    ha_max_connections: u32 = "haMaxConnections" => 16;
    /// Open HA connections one source IP may hold (0: no per-source share).
    ha_max_connections_per_ip: u32 = "haMaxConnectionsPerIp" => 8;
    /// Open HTTP connections on `metricsPort`.
    http_max_connections: u32 = "httpMaxConnections" => 64;
    /// Open HTTP connections one source IP may hold (0: no per-source share).
    http_max_connections_per_ip: u32 = "httpMaxConnectionsPerIp" => 16;
    /// Percent (0-100) of each listener's cap (rounded down, at most all but one slot) that only
    /// admits a source holding no connection there yet, so a new client, slave or probe
    /// gets in while others hold everything their share allows (not a RocketMQ key).
    connection_reserve_percent: Percent = "connectionReservePercent" => Percent(10);
    /// Comma-separated IP addresses and CIDR blocks the per-source shares do not apply
    /// to (clients behind one NAT address); the caps and the reserve still do.
    connection_limit_exempt_addresses: ExemptSources = "connectionLimitExemptAddresses" => ExemptSources::default();
    /// A remoting connection that sends no complete, decodable frame this long after it
    /// was accepted (TLS handshake included) is closed. Only the first request: 4.x
    /// clients then heartbeat every 30 s, and later silence is
    /// `serverChannelMaxIdleTimeSeconds`' business.
    first_request_timeout_millis: u64 = "firstRequestTimeoutMillis" => 10_000;
    /// An HTTP connection on `metricsPort` whose first request head is not complete
    /// this long after it was accepted (TLS handshake included) is closed.
    http_first_request_timeout_millis: u64 = "httpFirstRequestTimeoutMillis" => 10_000;
    /// Port of the RocketMQ 5.x gRPC endpoint (`apache.rocketmq.v2.MessagingService`),
    /// plaintext and TLS on the same port as `tls.server.mode` decides; 0 disables it. Not
    /// a RocketMQ 4.9 key (5.x serves gRPC from its proxy, whose default port is 8081).
    grpc_server_port: u16 = "grpcServerPort" => 8081;
    /// How long QueryRoute reuses a topic's route from the nameservers, ms (not a
    /// RocketMQ key; 0: ask on every call).
    grpc_route_cache_millis: u64 = "grpcRouteCacheMillis" => 3000;
    /// Topics whose nameserver route QueryRoute keeps at once; the oldest go first, and
    /// an answer without a route never replaces a route (not a RocketMQ key).
    grpc_route_cache_max_topics: u32 = "grpcRouteCacheMaxTopics" => 1024;
    /// The longest QueryRoute waits for the nameservers' route before answering with
    /// this broker's own queues, ms; half the client's deadline when shorter (not a
    /// RocketMQ key).
    grpc_route_lookup_timeout_millis: u64 = "grpcRouteLookupTimeoutMillis" => 3000;
    /// Open gRPC connections (not a RocketMQ key).
    grpc_max_connections: u32 = "grpcMaxConnections" => 10_000;
    /// Open gRPC connections one source IP may hold (not a RocketMQ key; 0: no per-source
    /// share).
    grpc_max_connections_per_ip: u32 = "grpcMaxConnectionsPerIp" => 1000;
    /// A gRPC connection that has not finished its TLS handshake and HTTP/2 preface this
    /// long after it was accepted is closed (not a RocketMQ key).
    grpc_first_request_timeout_millis: u64 = "grpcFirstRequestTimeoutMillis" => 10_000;
    /// Concurrent HTTP/2 streams (calls) one gRPC connection may have open; the client
    /// queues the rest (not a RocketMQ key).
    grpc_max_concurrent_streams: u32 = "grpcMaxConcurrentStreams" => 256;
    /// Telemetry streams one 5.x client id may hold at once; a further one is refused
    /// with RESOURCE_EXHAUSTED (not a RocketMQ key; a client keeps one per endpoint).
    grpc_max_telemetry_streams_per_client: u32 = "grpcMaxTelemetryStreamsPerClient" => 8;
    /// Bytes of one command a client sends on its Telemetry stream (its Settings); a
    /// longer one ends the stream with RESOURCE_EXHAUSTED (not a RocketMQ key). A stream
    /// keeps the buffer of its largest command for its whole life, against
    /// `maxInFlightBytesPerConnection` and `maxInFlightBytesTotal`.
    grpc_max_telemetry_message_size: u64 = "grpcMaxTelemetryMessageSize" => 1024 * 1024;
    /// A request message must arrive whole this long after its 5-byte prefix, ms, or its
    /// call ends with DEADLINE_EXCEEDED (not a RocketMQ key): what a message has reserved
    /// against `maxInFlightBytes*` is not held by a peer that stops sending it.
    grpc_request_message_timeout_millis: u64 = "grpcRequestMessageTimeoutMillis" => 30_000;
    /// On shutdown, how long calls in progress (long polls, Telemetry streams) may take to
    /// finish after GOAWAY before the connections are closed, ms (not a RocketMQ key).
    grpc_shutdown_drain_millis: u64 = "grpcShutdownDrainMillis" => 5_000;
    /// An HA connection whose slave has not completed the handshake (TLS included) this
    /// long after it was accepted is closed.
    ha_handshake_timeout_millis: u64 = "haHandshakeTimeoutMillis" => 5_000;
    /// An HTTP connection on `metricsPort` that moves no byte this long is closed.
    http_idle_timeout_millis: u64 = "httpIdleTimeoutMillis" => 60_000;
    /// Groups or topics one request (a heartbeat, a send) may auto-create; the rest are
    /// created by later requests.
    max_auto_create_per_request: u32 = "maxAutoCreatePerRequest" => 64;
    /// Consumer and producer entries one HEART_BEAT may carry; more refuse the heartbeat.
    max_heartbeat_groups: u32 = "maxHeartbeatGroups" => 1024;
    /// Subscriptions one consumer entry of a HEART_BEAT may carry, and tags one TAG
    /// subscription may name; more refuse the heartbeat (not a RocketMQ key).
    max_subscriptions_per_group: u32 = "maxSubscriptionsPerGroup" => 1024;
    /// Producer and consumer groups one connection may belong to (not a RocketMQ key).
    max_groups_per_connection: u32 = "maxGroupsPerConnection" => 1024;
    /// Distinct producer and consumer groups with a live member (not a RocketMQ key).
    max_client_groups: u32 = "maxClientGroups" => 65_536;
    /// Bytes of the client id a HEART_BEAT or LOCK_BATCH_MQ may carry; a longer one
    /// refuses the request (not a RocketMQ key). The id is kept once per membership and
    /// per queue lock, so its length multiplies.
    max_client_id_length: u32 = "maxClientIdLength" => 1024;
    /// (group, topic) pairs whose pull rate (GET_CONSUME_STATS `consumeTps`) is kept;
    /// a new pair past it is not rated, a pair idle for a minute is dropped (not a
    /// RocketMQ key).
    max_consume_rate_entries: u32 = "maxConsumeRateEntries" => 65_536;
    /// How long INVOKE_BROKER_TO_GET_CONSUMER_STATUS waits for each client's
    /// GET_CONSUMER_STATUS_FROM_CLIENT answer; clients are asked at once, so the request
    /// answers within about this long whatever the group's size (not a RocketMQ key; 4.9
    /// waits 5 s per client, one after another).
    consumer_status_answer_timeout_millis: u64 = "consumerStatusAnswerTimeoutMillis" => 2_000;
    /// (group, topic, queue) offset resets remembered until the group's next pull of the
    /// queue is redirected to them (5.x's server-side reset); past it the oldest is
    /// forgotten (not a RocketMQ key).
    max_pending_offset_resets: u32 = "maxPendingOffsetResets" => 100_000;
    /// Bytes the consumer groups' subscriptions (as their heartbeats last sent them) may
    /// hold in all (not a RocketMQ key).
    max_client_subscription_bytes: u64 = "maxClientSubscriptionBytes" => 128 * 1024 * 1024;
    /// Topics the broker holds; past it no topic is created, by a send (auto-creation)
    /// or by UPDATE_AND_CREATE_TOPIC (not a RocketMQ key). A group's `%RETRY%` and
    /// `%DLQ%` topics are bounded by `maxSubscriptionGroups` instead.
    max_topics: u32 = "maxTopics" => 200_000;
    /// Subscription groups the broker holds; past it no group is created, by a heartbeat
    /// or pull (auto-creation) or by UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (not a RocketMQ
    /// key).
    max_subscription_groups: u32 = "maxSubscriptionGroups" => 100_000;
    /// Read/write queue count cap for topic creation and updates (and `retryQueueNums`).
    max_queue_nums: i32 = "maxQueueNums" => 1024;
    /// Frame cap, `com.rocketmq.remoting.frameMaxLength`.
    frame_max_length: u32 = "frameMaxLength" => 16 * 1024 * 1024;
    channel_expired_timeout: u64 = "channelExpiredTimeout" => 120_000;
    /// Period of the transaction checker, ms (`TransactionalMessageCheckService`).
    transaction_check_interval: u64 = "transactionCheckInterval" => 60_000;
    /// A half message younger than this (ms) is not checked yet.
    transaction_time_out: u64 = "transactionTimeOut" => 6_000;
    /// Check-backs before a half message is moved to `TRANS_CHECK_MAX_TIME_TOPIC`.
    transaction_check_max: i32 = "transactionCheckMax" => 15;
    /// Decided transactions remembered to keep a late or repeated answer from storing a
    /// message twice (not a RocketMQ key); about 65 bytes each, whatever the message.
    /// Past it the oldest are dropped early (`rocketmq_transaction_decisions_evicted_total`)
    /// and a repeated commit is caught through the real topic's index instead.
    transaction_decision_max_entries: u32 = "transactionDecisionMaxEntries" => 200_000;
    /// ACL 1.0 (4.9 `aclEnable`): every request is checked against `aclFile`.
    acl_enable: bool = "aclEnable" => false;
    /// The `plain_acl.yml` file; unset = `<storePathRootDir>/../conf/plain_acl.yml`.
    acl_file: Option<String> = "aclFile" => None;
    /// How often the ACL file is re-read for changes, ms.
    acl_file_check_interval_ms: u64 = "aclFileCheckIntervalMs" => 1_000;
    /// The broker's own account, signing its registrations and its requests to the
    /// master (default: env `ROCKETMQ_BROKER_ACCESS_KEY` / `ROCKETMQ_BROKER_SECRET_KEY`,
    /// so a Kubernetes Secret need not be written into broker.conf).
    access_key: Option<String> = "accessKey" => std::env::var("ROCKETMQ_BROKER_ACCESS_KEY").ok();
    secret_key: Option<Secret> = "secretKey" => std::env::var("ROCKETMQ_BROKER_SECRET_KEY").ok().map(Secret::new);
    /// Shared admin secret (not a RocketMQ key): with `aclEnable=false`, role changes and
    /// config pushes (`crate::dispatch::admin_gate::PROTECTED`) must be signed with it
    /// under the access key `rmq-admin`, and the broker signs its registrations with it
    /// when it has no `accessKey`. A comma-separated list (each at least 16 characters,
    /// at most 4): any listed secret is accepted, the first one signs, so it rotates
    /// without downtime. Empty: open mode, anyone may send those requests (a local
    /// broker). The environment variable `RMQ_ADMIN_SECRET` supplies it when the key is
    /// absent (the operator's Kubernetes Secret). Never printed.
    admin_secret: Secret = "adminSecret" => Secret::new(std::env::var("RMQ_ADMIN_SECRET").unwrap_or_default());
    /// How far an `adminSecret` signature's timestamp may be from this broker's clock
    /// (not a RocketMQ key). Signers stamp a timestamp and a nonce into the signed
    /// fields; a request outside the window, or whose nonce was already admitted, is
    /// refused, so a captured role change or config push cannot be replayed.
    /// The nameservers' admin secret (not a RocketMQ key), when it differs from this
    /// broker's own `adminSecret`: registrations are signed with its first secret (as
    /// access key `rmq-admin`) when the broker has no `accessKey`. Empty: registrations
    /// are signed with `adminSecret`. The environment variable `RMQ_NAMESRV_ADMIN_SECRET`
    /// supplies it when the key is absent (the operator passes the NameServer's
    /// generated Secret). Never printed.
    namesrv_admin_secret: Secret = "namesrvAdminSecret" => Secret::new(std::env::var("RMQ_NAMESRV_ADMIN_SECRET").unwrap_or_default());
    admin_signature_window_millis: u64 = "adminSignatureWindowMillis" => security::freshness::DEFAULT_WINDOW_MILLIS;
    /// Most nonces of admitted `adminSecret` requests remembered within the window (not
    /// a RocketMQ key). Full: further admin requests are refused until old ones leave
    /// the window (only holders of the secret can fill it).
    admin_replay_cache_max_entries: u64 = "adminReplayCacheMaxEntries" => security::freshness::DEFAULT_MAX_ENTRIES as u64;
    /// TLS on the remoting port (4.9 `tls.server.mode`): disabled, permissive (TLS or
    /// plaintext, told apart by the first byte) or enforcing. 4.9 defaults to permissive
    /// with a generated self-signed certificate; here TLS needs real files, so the
    /// default is disabled.
    tls_server_mode: String = "tls.server.mode" => "disabled".to_owned();
    tls_server_cert_path: Option<String> = "tls.server.certPath" => None;
    tls_server_key_path: Option<String> = "tls.server.keyPath" => None;
    /// CA bundle for client certificates (mTLS).
    tls_server_trust_cert_path: Option<String> = "tls.server.trustCertPath" => None;
    /// none, optional or require (mTLS).
    tls_server_need_client_auth: String = "tls.server.need.client.auth" => "none".to_owned();
    /// Speak TLS to the nameservers and, as a slave, to the master (4.9 `tls.enable`).
    tls_enable: bool = "tls.enable" => false;
    tls_client_trust_cert_path: Option<String> = "tls.client.trustCertPath" => None;
    tls_client_cert_path: Option<String> = "tls.client.certPath" => None;
    tls_client_key_path: Option<String> = "tls.client.keyPath" => None;
    /// Name the peers' certificates are checked against (default: the dialled host).
    tls_client_server_name: Option<String> = "tls.client.serverName" => None;
    /// How often the certificate files are re-read for changes, ms.
    tls_file_check_interval_ms: u64 = "tlsFileCheckIntervalMs" => 1_000;
    /// TLS on `metricsPort` too (beyond 4.9): its certificate and mode are the remoting
    /// port's (`permissive`: HTTP and HTTPS, `enforcing`: HTTPS only), without client
    /// certificates (kubelet probes present none). Needs `tls.server.mode` on.
    tls_metrics_enable: bool = "tls.metrics.enable" => false;
}

impl BrokerConfig {
    /// The address clients and nameservers reach this broker at (`brokerIP1:listenPort`).
    pub fn broker_addr(&self) -> String {
        format!("{}:{}", self.broker_ip1, self.listen_port)
    }

    /// The ACL file: `aclFile`, or `<storePathRootDir>/../conf/plain_acl.yml`.
    pub fn acl_file_path(&self, store_root: &Path) -> std::path::PathBuf {
        match &self.acl_file {
            Some(f) => f.into(),
            None => store_root.join("..").join("conf").join("plain_acl.yml"),
        }
    }

    /// The `tls.server.*` keys.
    pub fn server_tls(&self) -> Result<ServerTlsSettings, ConfigError> {
        let bad = |key: &str, value: &str| ConfigError::BadValue {
            key: key.to_owned(),
            value: value.to_owned(),
        };
        Ok(ServerTlsSettings {
            mode: self
                .tls_server_mode
                .parse()
                .map_err(|_| bad("tls.server.mode", &self.tls_server_mode))?,
            cert_path: self.tls_server_cert_path.as_ref().map(Into::into),
            key_path: self.tls_server_key_path.as_ref().map(Into::into),
            trust_cert_path: self.tls_server_trust_cert_path.as_ref().map(Into::into),
            client_auth: self.tls_server_need_client_auth.parse().map_err(|_| {
                bad(
                    "tls.server.need.client.auth",
                    &self.tls_server_need_client_auth,
                )
            })?,
        })
    }

    /// The `tls.enable` / `tls.client.*` keys.
    pub fn client_tls(&self) -> ClientTlsSettings {
        ClientTlsSettings {
            enable: self.tls_enable,
            trust_cert_path: self.tls_client_trust_cert_path.as_ref().map(Into::into),
            cert_path: self.tls_client_cert_path.as_ref().map(Into::into),
            key_path: self.tls_client_key_path.as_ref().map(Into::into),
            server_name: self.tls_client_server_name.clone(),
        }
    }

    /// The broker's own credentials (`accessKey` + `secretKey`), if configured.
    pub fn credentials(&self) -> Result<Option<Credentials>, ConfigError> {
        Credentials::from_parts(
            self.access_key.clone(),
            self.secret_key.as_ref().map(|s| s.expose().to_owned()),
        )
        .map_err(|e| ConfigError::BadValue {
            key: "accessKey/secretKey".into(),
            value: e.to_string(),
        })
    }

    /// The VIP port to listen on, `None` when it is turned off. `listenPort - 2` unless
    /// `fastListenPort` says otherwise; a listenPort below 3 leaves no room for it.
    pub fn fast_port(&self) -> Option<u16> {
        if !self.fast_listen_port_enable {
            return None;
        }
        match self.fast_listen_port {
            0 => self.listen_port.checked_sub(2).filter(|p| *p > 0),
            p => Some(p),
        }
    }

    /// `haListenPort`, defaulting to `listenPort + 1`.
    pub fn ha_port(&self) -> u16 {
        if self.ha_listen_port == 0 {
            self.listen_port.wrapping_add(1)
        } else {
            self.ha_listen_port
        }
    }

    pub fn ha_server_addr(&self) -> String {
        let host = self.broker_ip2.as_deref().unwrap_or(&self.broker_ip1);
        format!("{host}:{}", self.ha_port())
    }

    /// The nameserver addresses of `namesrvAddr`, blanks dropped.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrv_addr
            .as_deref()
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// `registerNameServerPeriod` clamped to 10..60 s as `BrokerController.start` does.
    pub fn register_period(&self) -> Duration {
        Duration::from_millis(self.register_name_server_period.clamp(10_000, 60_000))
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.server_channel_max_idle_time_seconds.max(1))
    }

    /// `writeTimeoutMillis`, at least 100 ms.
    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_millis.max(100))
    }

    /// `consumerStatusAnswerTimeoutMillis`: the wait for one client's status answer.
    pub fn consumer_status_answer_timeout(&self) -> Duration {
        Duration::from_millis(self.consumer_status_answer_timeout_millis)
    }

    /// `maxSuspendTimeoutMillis`: the hold a parked pull gets at most.
    pub fn max_suspend(&self) -> Duration {
        Duration::from_millis(self.max_suspend_timeout_millis)
    }
}

/// Everything the broker process is configured with.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub broker: BrokerConfig,
    pub store: MessageStoreConfig,
    /// Keys neither the broker nor the store knows; logged at startup.
    pub unknown_keys: Vec<String>,
    /// The file this was loaded from (`-c`), where runtime updates are kept.
    pub source: Option<std::path::PathBuf>,
}

impl Config {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut config = Self::from_properties(&text)?;
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    pub fn from_properties(text: &str) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        for (key, value) in properties::parse(text) {
            config.set(&key, &value)?;
        }
        Ok(config)
    }

    /// Applies one key to the broker or the store config; unknown keys are remembered.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if self.broker.set(key, value)? {
            return Ok(());
        }
        // The store's own error names the key too; this one adds the accepted values.
        let stored = self
            .store
            .set(key, value)
            .map_err(|_| ConfigError::BadValue {
                key: key.to_owned(),
                value: value.to_owned(),
            })?;
        if stored {
            return Ok(());
        }
        if !self.unknown_keys.iter().any(|k| k == key) {
            self.unknown_keys.push(key.to_owned());
        }
        Ok(())
    }

    /// `mqbroker -p`: every effective key, broker keys first, as `key=value` lines.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (k, v) in self.broker.entries() {
            let v = if SECRET_KEYS.contains(&k) && !v.is_empty() {
                REDACTED.to_owned()
            } else {
                v
            };
            let _ = writeln!(out, "{k}={v}");
        }
        let store = serde_json::to_value(&self.store).unwrap_or_default();
        if let serde_json::Value::Object(map) = store {
            for (k, v) in map {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Null => String::new(),
                    other => other.to_string(),
                };
                let _ = writeln!(out, "{k}={v}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
