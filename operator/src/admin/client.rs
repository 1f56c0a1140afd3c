//! [`Admin`] over the shared remoting client (`remoting::client`): the transport, the
//! request/response matching, request signing and the request and body formats live
//! there, once, for `rmqctl` and the operator alike. This file only adapts types and
//! errors to what the reconcilers and the failover machine expect.
//!
//! Connections: one per call, opened and closed around it
//! ([`Client::with_connection_per_call`]). The operator calls rarely, and its peers are
//! pods whose address behind a DNS name changes on restart; a pooled connection to a
//! vanished pod would not close, only time out on every later call.
//!
//! Timeouts: `timeout` bounds a whole call, connection included, as before the move (the
//! library bounds the connect and the exchange separately, so alone it could take twice).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use protocol::body::TopicConfig as WireTopicConfig;
use protocol::code::request;
use remoting::client::{Client, ClientError, Peer};
use security::sign::Credentials;

use super::ha::{EpochCache, HaStatus, RoleChange};
use super::{Admin, AdminError, ClusterInfo, PeerAccess, RuntimeInfo, TopicConfig};
use crate::builders::config_file::render_properties;

#[derive(Debug)]
pub struct RemotingAdmin {
    client: Client,
    timeout: Duration,
}

impl RemotingAdmin {
    pub fn new(timeout: Duration) -> Self {
        Self::with_access(timeout, PeerAccess::default())
    }

    /// [`Self::new`], signing every request with `credentials` (RocketMQ ACL 1.0) when
    /// given, for brokers that enforce ACL on admin requests.
    pub fn with_credentials(timeout: Duration, credentials: Option<Credentials>) -> Self {
        Self::with_access(
            timeout,
            PeerAccess {
                credentials,
                tls: None,
            },
        )
    }

    /// [`Self::new`], reaching its peers as `access` says (signed, over TLS).
    pub fn with_access(timeout: Duration, access: PeerAccess) -> Self {
        // No nameserver list: every call names its peer.
        let client = Client::new("", timeout)
            .with_connection_per_call()
            .with_credentials(access.credentials)
            .with_tls(access.tls);
        Self { client, timeout }
    }

    /// Runs one library call under the whole-call timeout and maps its error.
    async fn run<T>(
        &self,
        addr: &str,
        call: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, AdminError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(|e| admin_error(addr, e)),
            Err(_) => Err(AdminError::Timeout {
                addr: addr.to_owned(),
                timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }
}

/// The library's error as the failover machine and reconcilers classify it.
pub fn admin_error(addr: &str, error: ClientError) -> AdminError {
    let addr = addr.to_owned();
    match error {
        ClientError::Connect { error, .. } => AdminError::Connect {
            addr,
            source: error,
        },
        ClientError::Timeout { timeout_ms, .. } => AdminError::Timeout { addr, timeout_ms },
        ClientError::Closed { .. } => AdminError::Closed { addr },
        ClientError::Refused {
            request: code,
            code: answer,
            remark,
            ..
        } => AdminError::Refused {
            addr,
            request: request::name(code).unwrap_or("UNKNOWN"),
            code: answer,
            remark,
        },
        ClientError::BadResponse { what, reason, .. } => AdminError::BadBody { addr, what, reason },
        // Neither arises from a call that names its peer; kept distinct rather than
        // disguised as a network failure.
        e @ (ClientError::NoNameServer | ClientError::Invalid(_)) => AdminError::Protocol {
            addr,
            reason: e.to_string(),
        },
    }
}

/// The wire topic config UPDATE_AND_CREATE_TOPIC sends for `config`: a single-tag,
/// non-system topic.
fn wire_topic(config: &TopicConfig) -> WireTopicConfig {
    let mut wire = WireTopicConfig::new(config.topic.clone());
    wire.read_queue_nums = config.read_queues;
    wire.write_queue_nums = config.write_queues;
    wire.perm = config.perm;
    wire.topic_sys_flag = 0;
    wire.order = config.order;
    wire
}

impl Admin for RemotingAdmin {
    fn scoped(&self, access: PeerAccess) -> Arc<dyn Admin> {
        Arc::new(Self::with_access(self.timeout, access))
    }

    fn cluster_info<'a>(
        &'a self,
        namesrv: &'a str,
    ) -> BoxFuture<'a, Result<ClusterInfo, AdminError>> {
        Box::pin(async move {
            let peer = Peer::NameServer(namesrv.to_owned());
            let info = self
                .run(namesrv, self.client.cluster_info_at(&peer))
                .await?;
            Ok(ClusterInfo::from(info))
        })
    }

    fn create_topic<'a>(
        &'a self,
        broker: &'a str,
        config: &'a TopicConfig,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let peer = Peer::Broker(broker.to_owned());
            let wire = wire_topic(config);
            self.run(broker, self.client.create_topic(&peer, &wire))
                .await
        })
    }

    fn delete_topic_in_broker<'a>(
        &'a self,
        broker: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let peer = Peer::Broker(broker.to_owned());
            self.run(broker, self.client.delete_topic_in_broker(&peer, topic))
                .await
        })
    }

    fn delete_topic_in_namesrv<'a>(
        &'a self,
        namesrv: &'a str,
        topic: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let peer = Peer::NameServer(namesrv.to_owned());
            let call = self
                .client
                .delete_topic_in_namesrv_at(&peer, topic, Some(cluster));
            self.run(namesrv, call).await
        })
    }

    fn runtime_info<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<RuntimeInfo, AdminError>> {
        Box::pin(async move {
            let peer = Peer::Broker(broker.to_owned());
            let table = self.run(broker, self.client.runtime_info(&peer)).await?;
            Ok(RuntimeInfo(table))
        })
    }

    fn topic_configs<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, TopicConfig>, AdminError>> {
        Box::pin(async move {
            let peer = Peer::Broker(broker.to_owned());
            let wrapper = self.run(broker, self.client.topic_configs(&peer)).await?;
            Ok(wrapper
                .topic_config_table
                .into_iter()
                .map(|(name, c)| {
                    let config = TopicConfig {
                        topic: name.clone(),
                        read_queues: c.read_queue_nums,
                        write_queues: c.write_queue_nums,
                        perm: c.perm,
                        order: c.order,
                    };
                    (name, config)
                })
                .collect())
        })
    }

    fn update_broker_config<'a>(
        &'a self,
        broker: &'a str,
        properties: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let peer = Peer::Broker(broker.to_owned());
            // The operator's renderer escapes as java.util.Properties reads.
            let text = render_properties(properties);
            self.run(broker, self.client.update_broker_config_text(&peer, text))
                .await
        })
    }

    fn ha_status<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<HaStatus, AdminError>> {
        Box::pin(async move {
            let peer = Peer::Broker(broker.to_owned());
            self.run(broker, self.client.ha_status(&peer)).await
        })
    }

    fn epoch_cache<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<EpochCache, AdminError>> {
        Box::pin(async move {
            let peer = Peer::Broker(broker.to_owned());
            self.run(broker, self.client.epoch_cache(&peer)).await
        })
    }

    fn notify_role_changed<'a>(
        &'a self,
        broker: &'a str,
        change: &'a RoleChange,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let peer = Peer::Broker(broker.to_owned());
            self.run(broker, self.client.notify_role_changed(&peer, change))
                .await
        })
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
