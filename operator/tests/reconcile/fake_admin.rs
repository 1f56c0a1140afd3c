//! A scripted [`Admin`]: answers from in-memory broker/nameserver state and records every
//! call, so tests can assert what the reconcilers asked the cluster to do.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use operator::admin::ha::{EpochEntry, HaConnection, HaRole};
use operator::admin::{
    Admin, AdminError, BrokerData, ClusterInfo, EpochCache, HaStatus, PeerAccess, RoleChange,
    RuntimeInfo, TopicConfig,
};
use security::sign::Credentials;

#[derive(Default)]
struct State {
    cluster: ClusterInfo,
    runtime: BTreeMap<String, RuntimeInfo>,
    /// Topics per broker address.
    topics: BTreeMap<String, BTreeMap<String, TopicConfig>>,
    /// GET_BROKER_HA_STATUS answers by address; NOTIFY_BROKER_ROLE_CHANGED edits them.
    ha: BTreeMap<String, HaStatus>,
    /// Addresses that refuse connections.
    down: BTreeSet<String>,
    /// The master each broker was told about at its current epoch (the broker's
    /// equal-epoch rule).
    named: BTreeMap<String, String>,
    /// NOTIFY_BROKER_ROLE_CHANGED takes this long (an operator caught mid-failover).
    role_change_delay: Option<std::time::Duration>,
    /// Every call, with how it reached its peer.
    calls: Vec<(String, PeerAccess)>,
}

/// Clones (and the clients [`Admin::scoped`] returns) share one state; each records how
/// it reaches its peers (credentials, TLS) on every call it makes.
#[derive(Clone, Default)]
pub struct FakeAdmin {
    state: Arc<Mutex<State>>,
    access: PeerAccess,
}

impl FakeAdmin {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a master (brokerId 0) of `cluster`.
    pub fn register_master(&self, cluster: &str, broker_name: &str, addr: &str) {
        let mut st = self.state.lock().unwrap();
        st.cluster
            .cluster_addr_table
            .entry(cluster.to_owned())
            .or_default()
            .push(broker_name.to_owned());
        st.cluster.broker_addr_table.insert(
            broker_name.to_owned(),
            BrokerData {
                cluster: cluster.to_owned(),
                broker_name: broker_name.to_owned(),
                broker_addrs: BTreeMap::from([("0".to_owned(), addr.to_owned())]),
            },
        );
    }

    pub fn set_runtime(&self, addr: &str, pairs: &[(&str, i64)]) {
        self.state.lock().unwrap().runtime.insert(
            addr.to_owned(),
            RuntimeInfo(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.to_string()))
                    .collect(),
            ),
        );
    }

    pub fn set_down(&self, addr: &str, down: bool) {
        let mut st = self.state.lock().unwrap();
        if down {
            st.down.insert(addr.to_owned());
        } else {
            st.down.remove(addr);
        }
    }

    pub fn topic(&self, addr: &str, topic: &str) -> Option<TopicConfig> {
        self.state
            .lock()
            .unwrap()
            .topics
            .get(addr)?
            .get(topic)
            .cloned()
    }

    /// A broker that answers GET_BROKER_HA_STATUS.
    pub fn set_ha(&self, addr: &str, ha: HaStatus) {
        self.state.lock().unwrap().ha.insert(addr.to_owned(), ha);
    }

    pub fn ha(&self, addr: &str) -> Option<HaStatus> {
        self.state.lock().unwrap().ha.get(addr).cloned()
    }

    /// Changes a topic behind the operator's back (drift).
    pub fn put_topic(&self, addr: &str, config: TopicConfig) {
        self.state
            .lock()
            .unwrap()
            .topics
            .entry(addr.to_owned())
            .or_default()
            .insert(config.topic.clone(), config);
    }

    /// Deletes a topic behind the operator's back (drift).
    pub fn remove_topic(&self, addr: &str, topic: &str) {
        if let Some(t) = self.state.lock().unwrap().topics.get_mut(addr) {
            t.remove(topic);
        }
    }

    /// Calls recorded so far, without clearing them.
    pub fn calls(&self) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.calls.iter().map(|(call, _)| call.clone()).collect()
    }

    /// Calls recorded so far with the credentials each was signed with.
    pub fn signed_calls(&self) -> Vec<(String, Option<Credentials>)> {
        let st = self.state.lock().unwrap();
        st.calls
            .iter()
            .map(|(call, access)| (call.clone(), access.credentials.clone()))
            .collect()
    }

    /// Calls recorded so far, each with whether it went over TLS.
    pub fn tls_calls(&self) -> Vec<(String, bool)> {
        let st = self.state.lock().unwrap();
        st.calls
            .iter()
            .map(|(call, access)| (call.clone(), access.tls.is_some()))
            .collect()
    }

    pub fn set_role_change_delay(&self, delay: std::time::Duration) {
        self.state.lock().unwrap().role_change_delay = (!delay.is_zero()).then_some(delay);
    }

    pub fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut self.state.lock().unwrap().calls)
            .into_iter()
            .map(|(call, _)| call)
            .collect()
    }

    fn enter(
        &self,
        call: String,
        addr: &str,
    ) -> Result<std::sync::MutexGuard<'_, State>, AdminError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push((call, self.access.clone()));
        if st.down.contains(addr) {
            return Err(AdminError::Connect {
                addr: addr.to_owned(),
                source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            });
        }
        Ok(st)
    }
}

impl Admin for FakeAdmin {
    fn scoped(&self, access: PeerAccess) -> Arc<dyn Admin> {
        Arc::new(Self {
            state: self.state.clone(),
            access,
        })
    }

    fn cluster_info<'a>(
        &'a self,
        namesrv: &'a str,
    ) -> BoxFuture<'a, Result<ClusterInfo, AdminError>> {
        Box::pin(async move {
            let st = self.enter(format!("cluster_info {namesrv}"), namesrv)?;
            Ok(st.cluster.clone())
        })
    }

    fn create_topic<'a>(
        &'a self,
        broker: &'a str,
        config: &'a TopicConfig,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let mut st = self.enter(format!("create_topic {broker} {}", config.topic), broker)?;
            st.topics
                .entry(broker.to_owned())
                .or_default()
                .insert(config.topic.clone(), config.clone());
            Ok(())
        })
    }

    fn delete_topic_in_broker<'a>(
        &'a self,
        broker: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let mut st = self.enter(format!("delete_topic_in_broker {broker} {topic}"), broker)?;
            if let Some(t) = st.topics.get_mut(broker) {
                t.remove(topic);
            }
            Ok(())
        })
    }

    fn delete_topic_in_namesrv<'a>(
        &'a self,
        namesrv: &'a str,
        topic: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            drop(self.enter(
                format!("delete_topic_in_namesrv {namesrv} {topic} {cluster}"),
                namesrv,
            )?);
            Ok(())
        })
    }

    fn runtime_info<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<RuntimeInfo, AdminError>> {
        Box::pin(async move {
            let st = self.enter(format!("runtime_info {broker}"), broker)?;
            st.runtime.get(broker).cloned().ok_or(AdminError::Closed {
                addr: broker.to_owned(),
            })
        })
    }

    fn topic_configs<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, TopicConfig>, AdminError>> {
        Box::pin(async move {
            let st = self.enter(format!("topic_configs {broker}"), broker)?;
            Ok(st.topics.get(broker).cloned().unwrap_or_default())
        })
    }

    fn update_broker_config<'a>(
        &'a self,
        broker: &'a str,
        properties: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let props: Vec<String> = properties.iter().map(|(k, v)| format!("{k}={v}")).collect();
            drop(self.enter(
                format!("update_broker_config {broker} {}", props.join(",")),
                broker,
            )?);
            Ok(())
        })
    }

    fn ha_status<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<HaStatus, AdminError>> {
        Box::pin(async move {
            let st = self.enter(format!("ha_status {broker}"), broker)?;
            st.ha.get(broker).cloned().ok_or(AdminError::Closed {
                addr: broker.to_owned(),
            })
        })
    }

    fn epoch_cache<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<EpochCache, AdminError>> {
        Box::pin(async move {
            let st = self.enter(format!("epoch_cache {broker}"), broker)?;
            let ha = st.ha.get(broker).ok_or(AdminError::Closed {
                addr: broker.to_owned(),
            })?;
            Ok(EpochCache {
                broker_id: ha.broker_id,
                epoch_list: vec![EpochEntry {
                    epoch: ha.epoch,
                    start_offset: 0,
                    end_offset: ha.max_offset,
                }],
                max_offset: ha.max_offset,
                ..EpochCache::default()
            })
        })
    }

    /// Applies the role change the way the broker does: a lower epoch is refused; the
    /// broker whose id is `masterBrokerId` becomes master, the others slaves.
    fn notify_role_changed<'a>(
        &'a self,
        broker: &'a str,
        change: &'a RoleChange,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            let delay = self.state.lock().unwrap().role_change_delay;
            if let Some(d) = delay {
                // A slow broker, injected: the delay itself is the fault under test.
                tokio::time::sleep(d).await;
            }
            let mut st = self.enter(
                format!(
                    "notify_role_changed {broker} epoch={} masterBrokerId={} masterAddress={}",
                    change.master_epoch, change.master_broker_id, change.master_address
                ),
                broker,
            )?;
            let ha = st.ha.get_mut(broker).ok_or(AdminError::Closed {
                addr: broker.to_owned(),
            })?;
            if change.master_epoch < ha.epoch {
                return Err(AdminError::Refused {
                    addr: broker.to_owned(),
                    request: "NOTIFY_BROKER_ROLE_CHANGED",
                    code: 1,
                    remark: "stale epoch".to_owned(),
                });
            }
            // A different master at the same epoch is refused (role_change.rs).
            let same_epoch = change.master_epoch == ha.epoch;
            let named = change.master_address.clone();
            if change.master_broker_id >= 0 {
                if same_epoch && st.named.get(broker).is_some_and(|m| *m != named) {
                    return Err(AdminError::Refused {
                        addr: broker.to_owned(),
                        request: "NOTIFY_BROKER_ROLE_CHANGED",
                        code: 1,
                        remark: "epoch already has another master".to_owned(),
                    });
                }
                st.named.insert(broker.to_owned(), named);
            } else {
                st.named.remove(broker);
            }
            let ha = st.ha.get_mut(broker).ok_or(AdminError::Closed {
                addr: broker.to_owned(),
            })?;
            ha.epoch = change.master_epoch;
            ha.master = ha.broker_id == change.master_broker_id;
            ha.role = if ha.master {
                HaRole::SyncMaster
            } else {
                HaRole::Slave
            };
            // Replication follows the new roles the way the brokers' HA connections do:
            // a new master starts with no slaves; a slave that follows a master shows in
            // that master's connection list at once (in sync when it holds everything
            // the master has). Nobody else keeps a connection from this broker.
            let slave_offset = ha.max_offset;
            let became_master = ha.master;
            if became_master {
                ha.ha_connection_info.clear();
            } else {
                ha.ha_connection_info.clear();
                let conn_addr = format!("{}:40000", broker.trim_end_matches(":10911"));
                for (addr, other) in st.ha.iter_mut() {
                    other.ha_connection_info.retain(|c| c.addr != conn_addr);
                    if *addr == change.master_address && other.master {
                        other.ha_connection_info.push(HaConnection {
                            addr: conn_addr.clone(),
                            slave_ack_offset: slave_offset,
                            diff: other.max_offset - slave_offset,
                            in_sync: slave_offset >= other.max_offset,
                        });
                        other.in_sync_slave_nums = other
                            .ha_connection_info
                            .iter()
                            .filter(|c| c.in_sync)
                            .count() as i32;
                    }
                }
            }
            Ok(())
        })
    }
}
