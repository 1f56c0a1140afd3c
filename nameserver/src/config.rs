//! Nameserver configuration: RocketMQ's `NamesrvConfig` + `NettyServerConfig` keys
//! (what `mqnamesrv -c namesrv.conf` accepts), plus this server's own keys for the
//! HTTP endpoint and broker expiry.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use security::conn_gate::ExemptSources;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("unknown config key {0:?}")]
    UnknownKey(String),
    #[error(
        "config key {key:?} has an invalid value {value:?}: expected {}",
        expected_values(key)
    )]
    InvalidValue { key: String, value: String },
    #[error("config key {0:?} cannot be changed at runtime")]
    NotUpdatable(String),
}

/// What `key` accepts, for the error a bad value gets.
fn expected_values(key: &str) -> &'static str {
    match key {
        "tls.server.mode" => "one of disabled, permissive, enforcing",
        "tls.server.need.client.auth" => "one of none, optional, require",
        "bindAddress" => "an IP address",
        "listenPort" | "metricsPort" => "a port number, 0 to 65535",
        "connectionReservePercent" => "a percentage, 0 to 100",
        "connectionLimitExemptAddresses" => "comma-separated IP addresses or CIDR blocks",
        _ => "a whole number within the key's range (see docs/operations.md)",
    }
}

/// Java keys accepted for file compatibility that have no effect here (thread pools and
/// Netty buffers have no counterpart in a tokio server), with Java's defaults.
const COMPAT_KEYS: &[(&str, &str)] = &[
    ("configStorePath", ""),
    ("serverWorkerThreads", "8"),
    ("serverCallbackExecutorThreads", "0"),
    ("serverSelectorThreads", "3"),
    ("serverOnewaySemaphoreValue", "256"),
    ("serverAsyncSemaphoreValue", "64"),
    ("serverSocketSndBufSize", "65535"),
    ("serverSocketRcvBufSize", "65535"),
    ("serverPooledByteBufAllocatorEnable", "true"),
    ("useEpollNativeSelector", "false"),
    ("writeBufferHighWaterMark", "0"),
    ("writeBufferLowWaterMark", "0"),
    ("serverSocketBacklog", "1024"),
];

/// Keys UPDATE_NAMESRV_CONFIG may change. Everything naming a path, address, port or
/// anything executed is refused: RocketMQ's blacklist (`configBlackList`) only covered
/// `configStorePath`/`kvConfigPath`, which is how CVE-2023-37582 rewrote files.
pub const RUNTIME_UPDATABLE: &[&str] = &[
    "orderMessageEnable",
    "clusterTest",
    "productEnvName",
    "brokerChannelExpiredMillis",
];

#[derive(Debug, Clone, PartialEq)]
pub struct NamesrvConfig {
    pub rocketmq_home: String,
    pub kv_config_path: PathBuf,
    pub product_env_name: String,
    pub cluster_test: bool,
    /// Fill `orderTopicConf` of routes from KV namespace `ORDER_TOPIC_CONFIG`.
    pub order_message_enable: bool,
    pub listen_port: u16,
    pub bind_address: IpAddr,
    /// A connection with no inbound traffic for this long is closed.
    pub server_channel_max_idle: Duration,
    /// HTTP port of /metrics, /healthz, /readyz.
    pub metrics_port: u16,
    /// `BROKER_CHANNEL_EXPIRED_TIME`: a broker silent this long is dropped.
    pub broker_channel_expired: Duration,
    /// How often brokers are checked for expiry (Java: every 10 s).
    pub scan_not_active_broker_interval: Duration,
    /// Signed admin requests only for state changes (`aclEnable`; 4.9's nameserver has
    /// no ACL at all).
    pub acl_enable: bool,
    /// The `plain_acl.yml` file; unset = `<rocketmqHome>/conf/plain_acl.yml`, or
    /// `~/namesrv/plain_acl.yml` without a home.
    pub acl_file: Option<PathBuf>,
    pub acl_file_check_interval: Duration,
    /// `adminSecret` (not a RocketMQ key): with `aclEnable=false`, state changes —
    /// broker (un)registration first of all — must be signed with one of these secrets
    /// as access key `rmq-admin` (`crate::admin_gate`). Empty: open mode. The
    /// environment variable `RMQ_ADMIN_SECRET` supplies it when no file sets it.
    pub admin_secrets: security::admin_secret::AdminSecrets,
    /// `adminSignatureWindowMillis` (not a RocketMQ key): how far a signature's timestamp
    /// may be from this clock; a nonce is admitted once within it (`security::freshness`).
    pub admin_signature_window_millis: u64,
    /// `adminReplayCacheMaxEntries` (not a RocketMQ key): most nonces remembered.
    pub admin_replay_cache_max_entries: usize,
    /// TLS on the remoting port (4.9's `tls.server.*` keys).
    pub tls: security::tls::ServerTlsSettings,
    pub tls_file_check_interval: Duration,
    /// TLS on `metricsPort` too, with the remoting port's certificate and mode and no
    /// client certificates (`tls.metrics.enable`; beyond 4.9).
    pub tls_metrics_enable: bool,
    /// Open remoting connections (`maxConnections`); a peer over it is closed at once.
    pub max_connections: usize,
    /// Open remoting connections one source IP may hold (`maxConnectionsPerIp`, 0: no
    /// per-source share). 1000 leaves room for a thousand clients behind one NAT address.
    pub max_connections_per_ip: usize,
    /// Open HTTP connections (`httpMaxConnections`).
    pub http_max_connections: usize,
    /// Open HTTP connections one source IP may hold (`httpMaxConnectionsPerIp`, 0: none).
    pub http_max_connections_per_ip: usize,
    /// Percent of each listener's cap kept for sources holding no connection there
    /// (`connectionReservePercent`, 0-100).
    pub connection_reserve_percent: u32,
    /// Sources the per-source shares spare (`connectionLimitExemptAddresses`: IPs and
    /// CIDR blocks, comma-separated).
    pub connection_limit_exempt_addresses: ExemptSources,
    /// A remoting connection with no complete frame this long after accept is closed
    /// (`firstRequestTimeoutMillis`; the first request only).
    pub first_request_timeout: Duration,
    /// An HTTP connection with no complete request head this long after accept is closed
    /// (`httpFirstRequestTimeoutMillis`).
    pub http_first_request_timeout: Duration,
    /// An HTTP connection that moves no byte this long is closed (`httpIdleTimeoutMillis`).
    pub http_idle_timeout: Duration,
    /// A write that makes no progress this long closes the connection
    /// (`writeTimeoutMillis`).
    pub write_timeout: Duration,
    /// TCP keepalive idle time (`tcpKeepAliveSeconds`, 0 disables).
    pub tcp_keep_alive: Duration,
    /// Largest REGISTER_BROKER body once inflated (`maxRegisterBodyBytes`).
    pub max_register_body_bytes: usize,
    /// REGISTER_BROKER bodies decoded at once (`maxConcurrentRegistrations`).
    pub max_concurrent_registrations: usize,
    /// Bounds of the route and KV tables (`maxBrokers`, `maxRouteTopics`, `maxKvEntries`,
    /// ...; see `crate::limits`).
    pub table_limits: crate::limits::TableLimits,
    compat: BTreeMap<&'static str, String>,
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        Self {
            rocketmq_home: std::env::var("ROCKETMQ_HOME").unwrap_or_default(),
            kv_config_path: home.join("namesrv").join("kvConfig.json"),
            product_env_name: "center".into(),
            cluster_test: false,
            order_message_enable: false,
            listen_port: 9876,
            bind_address: IpAddr::from([0, 0, 0, 0]),
            server_channel_max_idle: Duration::from_secs(120),
            metrics_port: 9877,
            broker_channel_expired: Duration::from_secs(120),
            scan_not_active_broker_interval: Duration::from_secs(10),
            acl_enable: false,
            acl_file: None,
            acl_file_check_interval: Duration::from_secs(1),
            admin_secrets: security::admin_secret::AdminSecrets::default(),
            admin_signature_window_millis: security::freshness::DEFAULT_WINDOW_MILLIS,
            admin_replay_cache_max_entries: security::freshness::DEFAULT_MAX_ENTRIES,
            tls: security::tls::ServerTlsSettings::default(),
            tls_file_check_interval: Duration::from_secs(1),
            tls_metrics_enable: false,
            max_connections: 10_000,
            max_connections_per_ip: 1000,
            http_max_connections: 64,
            http_max_connections_per_ip: 16,
            connection_reserve_percent: 10,
            connection_limit_exempt_addresses: ExemptSources::default(),
            first_request_timeout: Duration::from_secs(10),
            http_first_request_timeout: Duration::from_secs(10),
            http_idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(15),
            tcp_keep_alive: Duration::from_secs(60),
            // A broker with 100k topics registers ~5 MiB of JSON.
            max_register_body_bytes: 16 * 1024 * 1024,
            max_concurrent_registrations: 4,
            table_limits: crate::limits::TableLimits::default(),
            compat: COMPAT_KEYS
                .iter()
                .map(|(k, v)| (*k, (*v).to_owned()))
                .collect(),
        }
    }
}

impl NamesrvConfig {
    /// Applies one `key=value` pair using RocketMQ's key names.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let invalid = || ConfigError::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
        };
        let value = value.trim();
        match key {
            "rocketmqHome" => self.rocketmq_home = value.to_owned(),
            "kvConfigPath" => self.kv_config_path = PathBuf::from(value),
            "productEnvName" => self.product_env_name = value.to_owned(),
            "clusterTest" => self.cluster_test = parse_bool(value),
            "orderMessageEnable" => self.order_message_enable = parse_bool(value),
            "listenPort" => self.listen_port = value.parse().map_err(|_| invalid())?,
            "bindAddress" => self.bind_address = value.parse().map_err(|_| invalid())?,
            "serverChannelMaxIdleTimeSeconds" => {
                self.server_channel_max_idle = secs(value).ok_or_else(invalid)?
            }
            "metricsPort" => self.metrics_port = value.parse().map_err(|_| invalid())?,
            "brokerChannelExpiredMillis" => {
                self.broker_channel_expired = millis(value).ok_or_else(invalid)?
            }
            "scanNotActiveBrokerIntervalMillis" => {
                self.scan_not_active_broker_interval = millis(value).ok_or_else(invalid)?
            }
            "tls.server.mode" => self.tls.mode = value.parse().map_err(|_| invalid())?,
            "tls.server.certPath" => self.tls.cert_path = path(value),
            "tls.server.keyPath" => self.tls.key_path = path(value),
            "tls.server.trustCertPath" => self.tls.trust_cert_path = path(value),
            "tls.server.need.client.auth" => {
                self.tls.client_auth = value.parse().map_err(|_| invalid())?
            }
            "tlsFileCheckIntervalMs" => {
                self.tls_file_check_interval = millis(value).ok_or_else(invalid)?
            }
            "tls.metrics.enable" => self.tls_metrics_enable = parse_bool(value),
            "aclEnable" => self.acl_enable = parse_bool(value),
            "aclFile" => self.acl_file = (!value.is_empty()).then(|| PathBuf::from(value)),
            "aclFileCheckIntervalMs" => {
                self.acl_file_check_interval = millis(value).ok_or_else(invalid)?
            }
            "adminSecret" => {
                // The value is a secret: the error names the rule, never the value.
                self.admin_secrets = security::admin_secret::AdminSecrets::parse(value)
                    .map_err(|e| ConfigError::InvalidValue {
                        key: key.to_owned(),
                        value: format!("<hidden>: {e}"),
                    })?
                    .with_guard_of(&self.admin_secrets)
            }
            "adminSignatureWindowMillis" | "adminReplayCacheMaxEntries" => {
                let n: u64 = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(invalid)?;
                if key == "adminSignatureWindowMillis" {
                    self.admin_signature_window_millis = n;
                } else {
                    self.admin_replay_cache_max_entries = usize::try_from(n).unwrap_or(usize::MAX);
                }
                self.admin_secrets = self.admin_secrets.clone().with_replay_window(
                    self.admin_signature_window_millis,
                    self.admin_replay_cache_max_entries,
                );
            }
            "maxConnections" => self.max_connections = count(value, 1).ok_or_else(invalid)?,
            "maxConnectionsPerIp" => {
                self.max_connections_per_ip = count(value, 0).ok_or_else(invalid)?
            }
            "httpMaxConnections" => {
                self.http_max_connections = count(value, 1).ok_or_else(invalid)?
            }
            "httpMaxConnectionsPerIp" => {
                self.http_max_connections_per_ip = count(value, 0).ok_or_else(invalid)?
            }
            "connectionReservePercent" => {
                self.connection_reserve_percent = value
                    .parse()
                    .ok()
                    .filter(|p| *p <= 100)
                    .ok_or_else(invalid)?
            }
            "connectionLimitExemptAddresses" => {
                self.connection_limit_exempt_addresses = value.parse().map_err(|_| invalid())?
            }
            "firstRequestTimeoutMillis" => {
                self.first_request_timeout = millis(value)
                    .filter(|d| *d >= Duration::from_millis(100))
                    .ok_or_else(invalid)?
            }
            "httpFirstRequestTimeoutMillis" => {
                self.http_first_request_timeout = millis(value)
                    .filter(|d| *d >= Duration::from_millis(100))
                    .ok_or_else(invalid)?
            }
            "httpIdleTimeoutMillis" => {
                self.http_idle_timeout = millis(value)
                    .filter(|d| *d >= Duration::from_millis(100))
                    .ok_or_else(invalid)?
            }
            "writeTimeoutMillis" => {
                self.write_timeout = millis(value)
                    .filter(|d| *d >= Duration::from_millis(100))
                    .ok_or_else(invalid)?
            }
            "tcpKeepAliveSeconds" => self.tcp_keep_alive = secs(value).ok_or_else(invalid)?,
            "maxRegisterBodyBytes" => {
                self.max_register_body_bytes = count(value, 1024).ok_or_else(invalid)?
            }
            "maxConcurrentRegistrations" => {
                self.max_concurrent_registrations = count(value, 1).ok_or_else(invalid)?
            }
            _ if crate::limits::TableLimits::KEYS.contains(&key) => {
                self.table_limits.set(key, value).ok_or_else(invalid)?
            }
            _ => match self.compat.get_mut(key) {
                Some(slot) => *slot = value.to_owned(),
                None => return Err(ConfigError::UnknownKey(key.to_owned())),
            },
        }
        Ok(())
    }

    /// Applies a properties file; unknown keys are returned for the caller to log,
    /// invalid values are errors.
    pub fn apply_properties(&mut self, text: &str) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        for (key, value) in remoting::properties::parse(text) {
            match self.set(&key, &value) {
                Ok(()) => {}
                Err(ConfigError::UnknownKey(k)) => unknown.push(k),
                Err(e) => return Err(e),
            }
        }
        Ok(unknown)
    }

    /// Applies an UPDATE_NAMESRV_CONFIG body. All-or-nothing: any key outside
    /// [`RUNTIME_UPDATABLE`], any bad value or any value outside the key's safe range
    /// ([`runtime_range_ok`]) rejects the whole update.
    pub fn update_at_runtime(&mut self, text: &str) -> Result<Vec<String>, ConfigError> {
        let entries = remoting::properties::parse(text);
        let mut next = self.clone();
        for (key, value) in &entries {
            if !RUNTIME_UPDATABLE.contains(&key.as_str()) {
                return Err(ConfigError::NotUpdatable(key.clone()));
            }
            if !runtime_range_ok(key, value.trim()) {
                return Err(ConfigError::InvalidValue {
                    key: key.clone(),
                    value: value.clone(),
                });
            }
            next.set(key, value)?;
        }
        *self = next;
        Ok(entries.into_iter().map(|(k, _)| k).collect())
    }

    /// Every key with its effective value, for `-p` and GET_NAMESRV_CONFIG.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("rocketmqHome", self.rocketmq_home.clone()),
            ("kvConfigPath", self.kv_config_path.display().to_string()),
            ("productEnvName", self.product_env_name.clone()),
            ("clusterTest", self.cluster_test.to_string()),
            ("orderMessageEnable", self.order_message_enable.to_string()),
            ("listenPort", self.listen_port.to_string()),
            ("bindAddress", self.bind_address.to_string()),
            (
                "serverChannelMaxIdleTimeSeconds",
                self.server_channel_max_idle.as_secs().to_string(),
            ),
            ("metricsPort", self.metrics_port.to_string()),
            (
                "brokerChannelExpiredMillis",
                self.broker_channel_expired.as_millis().to_string(),
            ),
            (
                "scanNotActiveBrokerIntervalMillis",
                self.scan_not_active_broker_interval.as_millis().to_string(),
            ),
            ("maxConnections", self.max_connections.to_string()),
            (
                "maxConnectionsPerIp",
                self.max_connections_per_ip.to_string(),
            ),
            ("httpMaxConnections", self.http_max_connections.to_string()),
            (
                "httpMaxConnectionsPerIp",
                self.http_max_connections_per_ip.to_string(),
            ),
            (
                "connectionReservePercent",
                self.connection_reserve_percent.to_string(),
            ),
            (
                "connectionLimitExemptAddresses",
                self.connection_limit_exempt_addresses.to_string(),
            ),
            (
                "firstRequestTimeoutMillis",
                self.first_request_timeout.as_millis().to_string(),
            ),
            (
                "httpFirstRequestTimeoutMillis",
                self.http_first_request_timeout.as_millis().to_string(),
            ),
            (
                "httpIdleTimeoutMillis",
                self.http_idle_timeout.as_millis().to_string(),
            ),
            (
                "writeTimeoutMillis",
                self.write_timeout.as_millis().to_string(),
            ),
            (
                "tcpKeepAliveSeconds",
                self.tcp_keep_alive.as_secs().to_string(),
            ),
            (
                "maxRegisterBodyBytes",
                self.max_register_body_bytes.to_string(),
            ),
            (
                "maxConcurrentRegistrations",
                self.max_concurrent_registrations.to_string(),
            ),
        ];
        let shown = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        out.push(("tls.server.mode", self.tls.mode.to_string()));
        out.push(("tls.server.certPath", shown(&self.tls.cert_path)));
        out.push(("tls.server.keyPath", shown(&self.tls.key_path)));
        out.push(("tls.server.trustCertPath", shown(&self.tls.trust_cert_path)));
        out.push((
            "tls.server.need.client.auth",
            self.tls.client_auth.to_string(),
        ));
        out.push((
            "tlsFileCheckIntervalMs",
            self.tls_file_check_interval.as_millis().to_string(),
        ));
        out.push(("tls.metrics.enable", self.tls_metrics_enable.to_string()));
        out.push(("aclEnable", self.acl_enable.to_string()));
        out.push((
            "adminSecret",
            if self.admin_secrets.is_empty() {
                String::new()
            } else {
                "******".to_owned()
            },
        ));
        out.push((
            "adminSignatureWindowMillis",
            self.admin_signature_window_millis.to_string(),
        ));
        out.push((
            "adminReplayCacheMaxEntries",
            self.admin_replay_cache_max_entries.to_string(),
        ));
        out.push(("aclFile", self.acl_file_path().display().to_string()));
        out.push((
            "aclFileCheckIntervalMs",
            self.acl_file_check_interval.as_millis().to_string(),
        ));
        out.extend(self.table_limits.entries());
        out.extend(self.compat.iter().map(|(k, v)| (*k, v.clone())));
        out
    }

    /// `aclFile`, or its default.
    pub fn acl_file_path(&self) -> PathBuf {
        if let Some(p) = &self.acl_file {
            return p.clone();
        }
        if !self.rocketmq_home.is_empty() {
            return Path::new(&self.rocketmq_home)
                .join("conf")
                .join("plain_acl.yml");
        }
        self.kv_config_path
            .parent()
            .unwrap_or(Path::new("."))
            .join("plain_acl.yml")
    }

    pub fn kv_config_path(&self) -> &Path {
        &self.kv_config_path
    }
}

/// `Boolean.parseBoolean`.
fn parse_bool(v: &str) -> bool {
    v.eq_ignore_ascii_case("true")
}

fn path(v: &str) -> Option<PathBuf> {
    (!v.is_empty()).then(|| PathBuf::from(v))
}

/// The safe range of each [`RUNTIME_UPDATABLE`] key. A file may set anything `set`
/// accepts (tests shorten expiry on purpose); a runtime update comes over the network
/// and must not be able to take the nameserver down: `brokerChannelExpiredMillis=1`
/// would drop every broker on each scan.
fn runtime_range_ok(key: &str, value: &str) -> bool {
    match key {
        // Three of the shortest registration period (10 s) up to one day.
        "brokerChannelExpiredMillis" => value
            .parse::<u64>()
            .is_ok_and(|ms| (30_000..=86_400_000).contains(&ms)),
        "orderMessageEnable" | "clusterTest" => {
            value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false")
        }
        "productEnvName" => {
            !value.is_empty()
                && value.len() <= 64
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        }
        _ => false,
    }
}

/// A count of at least `min`.
fn count(v: &str, min: usize) -> Option<usize> {
    v.parse::<usize>().ok().filter(|n| *n >= min)
}

fn secs(v: &str) -> Option<Duration> {
    v.parse::<u64>().ok().map(Duration::from_secs)
}

fn millis(v: &str) -> Option<Duration> {
    v.parse::<u64>()
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_secret_parses_as_a_list_and_never_prints() {
        let mut c = NamesrvConfig::default();
        c.set(
            "adminSecret",
            "first-secret-0123456789,second-secret-012345",
        )
        .unwrap();
        assert_eq!(c.admin_secrets.len(), 2);
        let shown: Vec<_> = c
            .entries()
            .into_iter()
            .filter(|(k, _)| *k == "adminSecret")
            .collect();
        assert_eq!(shown, vec![("adminSecret", "******".to_owned())]);
        assert!(!format!("{c:?}").contains("first-secret"));
        let err = c.set("adminSecret", "short-secret").unwrap_err();
        assert!(!err.to_string().contains("short-secret"), "{err}");
        assert!(err.to_string().contains("16 characters"), "{err}");
    }

    #[test]
    fn file_keys_apply_and_unknown_are_reported() {
        let mut c = NamesrvConfig::default();
        let unknown = c
            .apply_properties(
                "listenPort=19876\nkvConfigPath=/tmp/kv.json\norderMessageEnable=TRUE\nserverWorkerThreads=16\nnoSuchKey=1\n",
            )
            .unwrap();
        assert_eq!(unknown, vec!["noSuchKey".to_string()]);
        assert_eq!(c.listen_port, 19876);
        assert_eq!(c.kv_config_path, PathBuf::from("/tmp/kv.json"));
        assert!(c.order_message_enable);
        assert!(c.entries().contains(&("serverWorkerThreads", "16".into())));
        assert!(matches!(
            c.apply_properties("listenPort=notaport"),
            Err(ConfigError::InvalidValue { .. })
        ));
    }

    #[test]
    fn runtime_update_refuses_paths_atomically() {
        let mut c = NamesrvConfig::default();
        let before = c.clone();
        assert_eq!(
            c.update_at_runtime("orderMessageEnable=true\nkvConfigPath=/etc/passwd"),
            Err(ConfigError::NotUpdatable("kvConfigPath".into()))
        );
        assert_eq!(c, before);
        for key in [
            "configStorePath",
            "rocketmqHome",
            "listenPort",
            "metricsPort",
        ] {
            assert!(c.update_at_runtime(&format!("{key}=x")).is_err());
        }
        assert_eq!(
            c.update_at_runtime("orderMessageEnable=true\nbrokerChannelExpiredMillis=30000")
                .unwrap()
                .len(),
            2
        );
        assert!(c.order_message_enable);
        assert_eq!(c.broker_channel_expired, Duration::from_secs(30));
    }

    #[test]
    fn runtime_updates_stay_in_safe_ranges() {
        let mut c = NamesrvConfig::default();
        let before = c.clone();
        for body in [
            "brokerChannelExpiredMillis=1",
            "brokerChannelExpiredMillis=29999",
            "brokerChannelExpiredMillis=86400001",
            "brokerChannelExpiredMillis=-5",
            "orderMessageEnable=yes",
            "clusterTest=1",
            "productEnvName=",
            "productEnvName=a b",
            "orderMessageEnable=true\nbrokerChannelExpiredMillis=10",
        ] {
            assert!(
                matches!(
                    c.update_at_runtime(body),
                    Err(ConfigError::InvalidValue { .. })
                ),
                "{body}"
            );
            assert_eq!(c, before, "{body} changed nothing");
        }
        c.update_at_runtime("brokerChannelExpiredMillis=86400000\nproductEnvName=prod-1")
            .unwrap();
        assert_eq!(c.broker_channel_expired, Duration::from_secs(86_400));
        // A file may still shorten expiry (tests do).
        c.apply_properties("brokerChannelExpiredMillis=1500")
            .unwrap();
        assert_eq!(c.broker_channel_expired, Duration::from_millis(1500));
    }

    #[test]
    fn listener_keys_apply_and_bad_values_name_the_key() {
        let mut c = NamesrvConfig::default();
        assert_eq!(c.max_connections_per_ip, 1000);
        c.apply_properties(
            "maxConnectionsPerIp=5\nhttpMaxConnectionsPerIp=2\nconnectionReservePercent=25\n\
             connectionLimitExemptAddresses=10.0.0.0/8, 192.168.1.9\n\
             firstRequestTimeoutMillis=700\nhttpFirstRequestTimeoutMillis=800\n",
        )
        .unwrap();
        assert_eq!(
            (c.max_connections_per_ip, c.http_max_connections_per_ip),
            (5, 2)
        );
        assert_eq!(c.connection_reserve_percent, 25);
        assert!(
            c.connection_limit_exempt_addresses
                .contains("10.2.3.4".parse().unwrap())
        );
        assert_eq!(c.first_request_timeout, Duration::from_millis(700));
        assert_eq!(c.http_first_request_timeout, Duration::from_millis(800));
        assert!(c.entries().contains(&(
            "connectionLimitExemptAddresses",
            "10.0.0.0/8, 192.168.1.9".into()
        )));
        for bad in [
            "connectionLimitExemptAddresses=10.0.0.*",
            "connectionReservePercent=101",
            "firstRequestTimeoutMillis=5",
        ] {
            let e = c.apply_properties(bad).unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(e.to_string().contains(key), "{e}");
        }
    }

    #[test]
    fn table_limits_are_file_keys_only() {
        let mut c = NamesrvConfig::default();
        c.apply_properties("maxBrokers=8\nmaxKvBytes=4096\n")
            .unwrap();
        assert_eq!(c.table_limits.route.max_brokers, 8);
        assert_eq!(c.table_limits.kv.max_bytes, 4096);
        assert!(c.entries().contains(&("maxRouteTopics", "200000".into())));
        assert!(matches!(
            c.apply_properties("maxBrokers=0"),
            Err(ConfigError::InvalidValue { .. })
        ));
        assert_eq!(
            c.update_at_runtime("maxBrokers=9"),
            Err(ConfigError::NotUpdatable("maxBrokers".into()))
        );
    }

    #[test]
    fn default_kv_path_is_under_home() {
        let c = NamesrvConfig::default();
        assert!(c.kv_config_path.ends_with("namesrv/kvConfig.json"));
    }
}
