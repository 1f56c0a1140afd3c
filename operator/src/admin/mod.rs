//! The admin side of RocketMQ's remoting protocol the operator needs, behind a trait so
//! reconcilers and the failover machine can be tested with a fake.
//! [`client::RemotingAdmin`] is the real client: a thin adapter over the shared remoting
//! client library (`remoting::client`), which `rmqctl` uses too.

pub mod client;
pub mod ha;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use security::sign::Credentials;
use security::tls::TlsClient;
use thiserror::Error;

pub use client::RemotingAdmin;
pub use ha::{EpochCache, HaStatus, RoleChange};

#[derive(Debug, Error)]
pub enum AdminError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("{addr} did not answer within {timeout_ms} ms")]
    Timeout { addr: String, timeout_ms: u64 },
    #[error("{addr} closed the connection before answering")]
    Closed { addr: String },
    /// The call could not be made as asked (not a network failure and not a refusal).
    #[error("protocol error talking to {addr}: {reason}")]
    Protocol { addr: String, reason: String },
    /// The peer answered with a non-success code.
    #[error("{addr} refused request {request}: code {code} ({remark})")]
    Refused {
        addr: String,
        request: &'static str,
        code: i32,
        remark: String,
    },
    #[error("cannot parse the {what} answered by {addr}: {reason}")]
    BadBody {
        addr: String,
        what: &'static str,
        reason: String,
    },
}

/// What UPDATE_AND_CREATE_TOPIC sends (`CreateTopicRequestHeader`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    pub topic: String,
    pub read_queues: i32,
    pub write_queues: i32,
    pub perm: i32,
    pub order: bool,
}

/// `ClusterInfo`: brokers by name and broker names by cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    pub cluster_addr_table: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerData {
    pub cluster: String,
    pub broker_name: String,
    /// brokerId (as text) → `host:port`; id 0 is the master.
    pub broker_addrs: BTreeMap<String, String>,
}

/// The wire body the library decodes, in the operator's shape (text broker ids, which is
/// how the reconcilers and fakes have always keyed them).
impl From<protocol::body::ClusterInfo> for ClusterInfo {
    fn from(wire: protocol::body::ClusterInfo) -> Self {
        let broker_addr_table = wire
            .broker_addr_table
            .into_iter()
            .map(|(name, data)| {
                let data = BrokerData {
                    cluster: data.cluster,
                    broker_name: data.broker_name,
                    broker_addrs: data
                        .broker_addrs
                        .into_iter()
                        .map(|(id, addr)| (id.to_string(), addr))
                        .collect(),
                };
                (name, data)
            })
            .collect();
        let cluster_addr_table = wire
            .cluster_addr_table
            .into_iter()
            .map(|(cluster, names)| (cluster, names.into_iter().collect()))
            .collect();
        Self {
            broker_addr_table,
            cluster_addr_table,
        }
    }
}

impl ClusterInfo {
    /// `(brokerName, master address)` of every group of `cluster` that has a live master.
    pub fn masters(&self, cluster: &str) -> Vec<(String, String)> {
        let Some(names) = self.cluster_addr_table.get(cluster) else {
            return Vec::new();
        };
        let mut out: Vec<(String, String)> = names
            .iter()
            .filter_map(|name| {
                let addr = self.broker_addr_table.get(name)?.broker_addrs.get("0")?;
                Some((name.clone(), addr.clone()))
            })
            .collect();
        out.sort();
        out
    }
}

/// The `KVTable` of GET_BROKER_RUNTIME_INFO.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeInfo(pub BTreeMap<String, String>);

impl RuntimeInfo {
    pub fn int(&self, key: &str) -> Option<i64> {
        self.0.get(key).and_then(|v| v.trim().parse().ok())
    }

    pub fn dispatch_behind_bytes(&self) -> Option<i64> {
        self.int("dispatchBehindBytes")
    }

    /// Bytes written but not yet flushed to disk (`flushBehindBytes`).
    pub fn flush_behind_bytes(&self) -> Option<i64> {
        self.int("flushBehindBytes")
    }

    pub fn commit_log_max_offset(&self) -> Option<i64> {
        self.int("commitLogMaxOffset")
    }
}

/// How the operator reaches one resource's pods: the account it signs with (RocketMQ
/// ACL 1.0) and TLS when the pods serve it. The default is unsigned plaintext.
#[derive(Clone, Debug, Default)]
pub struct PeerAccess {
    pub credentials: Option<Credentials>,
    pub tls: Option<TlsClient>,
}

/// Admin operations against brokers and nameservers, addressed as `host:port`.
pub trait Admin: Send + Sync {
    /// This client reaching its peers as `access` says; timeouts and the rest are shared.
    /// A Broker's reconcile calls its pods through the one built from that Broker's
    /// `adminCredentials` and `tls`.
    fn scoped(&self, access: PeerAccess) -> Arc<dyn Admin>;
    fn cluster_info<'a>(
        &'a self,
        namesrv: &'a str,
    ) -> BoxFuture<'a, Result<ClusterInfo, AdminError>>;
    fn create_topic<'a>(
        &'a self,
        broker: &'a str,
        config: &'a TopicConfig,
    ) -> BoxFuture<'a, Result<(), AdminError>>;
    fn delete_topic_in_broker<'a>(
        &'a self,
        broker: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>>;
    /// Removes `cluster`'s route data for `topic` from one nameserver.
    fn delete_topic_in_namesrv<'a>(
        &'a self,
        namesrv: &'a str,
        topic: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>>;
    fn runtime_info<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<RuntimeInfo, AdminError>>;
    /// GET_ALL_TOPIC_CONFIG: every topic the broker holds, by name (what the Topic
    /// reconciler compares with the spec before writing anything).
    fn topic_configs<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, TopicConfig>, AdminError>>;
    /// UPDATE_BROKER_CONFIG: RocketMQ applies `namesrvAddr` live.
    fn update_broker_config<'a>(
        &'a self,
        broker: &'a str,
        properties: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), AdminError>>;
    /// GET_BROKER_HA_STATUS: role, epoch, offsets and replication connections.
    fn ha_status<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<HaStatus, AdminError>>;
    /// GET_BROKER_EPOCH_CACHE: the broker's epoch file.
    fn epoch_cache<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<EpochCache, AdminError>>;
    /// NOTIFY_BROKER_ROLE_CHANGED: makes the broker master or slave at an epoch.
    fn notify_role_changed<'a>(
        &'a self,
        broker: &'a str,
        change: &'a RoleChange,
    ) -> BoxFuture<'a, Result<(), AdminError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masters_of_a_cluster_skip_groups_without_id_zero() {
        let body = r#"{"brokerAddrTable":{"c-0":{"brokerAddrs":{0:"h0:10911",1:"h1:10911"},"brokerName":"c-0","cluster":"c"},"c-1":{"brokerAddrs":{1:"h2:10911"},"brokerName":"c-1","cluster":"c"},"x-0":{"brokerAddrs":{0:"x:10911"},"brokerName":"x-0","cluster":"x"}},"clusterAddrTable":{"c":["c-1","c-0"],"x":["x-0"]}}"#;
        let wire: protocol::body::ClusterInfo = protocol::body::decode(body.as_bytes()).unwrap();
        let info = ClusterInfo::from(wire);
        assert_eq!(
            info.masters("c"),
            vec![("c-0".to_owned(), "h0:10911".to_owned())]
        );
        assert!(info.masters("missing").is_empty());
    }
}
