//! The routing state of the nameserver, with the semantics of RocketMQ 4.9's
//! `namesrv/routeinfo/RouteInfoManager.java`. Pure data: callers pass the clock and the
//! connection id, and hold the lock.
//!
//! Every table here is keyed by what a peer sends in REGISTER_BROKER, so each is bounded
//! ([`RouteLimits`], checked in `admission` before anything is applied) and shrinks with
//! its owners: an address's entries go with its connection or its expiry, a broker
//! name's topics, cluster memberships and filter servers with its last address, its
//! master epoch `masterEpochRetentionMillis` later (`epochs`).

mod admission;
mod epochs;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use protocol::body::route::MASTER_ID;
use protocol::body::{
    BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfigSerializeWrapper, TopicList,
    TopicRouteData,
};

use self::epochs::MasterEpochs;
use crate::limits::{LimitRefusal, RouteLimits};

/// Identity of a client connection (Java keys live brokers by Netty channel).
pub type ConnId = u64;

/// `PermName.PERM_READ` / `PERM_WRITE`.
const PERM_READ: i32 = 0x4;
const PERM_WRITE: i32 = 0x2;
/// `TopicSysFlag.FLAG_UNIT` / `FLAG_UNIT_SUB`.
const FLAG_UNIT: i32 = 0x1;
const FLAG_UNIT_SUB: i32 = 0x2;

#[derive(Debug, Clone)]
struct BrokerLiveInfo {
    last_update: Instant,
    data_version: DataVersion,
    conn: ConnId,
    ha_server_addr: String,
    /// The port of its 5.x gRPC endpoint, when it registered one.
    grpc_port: Option<u16>,
}

/// One REGISTER_BROKER request.
#[derive(Debug, Clone)]
pub struct Registration {
    pub cluster_name: String,
    pub broker_addr: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub ha_server_addr: String,
    pub topic_config: TopicConfigSerializeWrapper,
    pub filter_server_list: Vec<String>,
    pub conn: ConnId,
    /// The replication epoch a master (brokerId 0) registers with (`masterEpoch`, sent
    /// by this project's brokers; `None` from RocketMQ's).
    pub master_epoch: Option<i32>,
    /// The port of the broker's 5.x gRPC endpoint (`grpcPort`, sent by this project's
    /// brokers that serve one), published as `BrokerData.grpcAddrs`.
    pub grpc_port: Option<u16>,
}

/// What a registering slave learns about its master.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegisterResult {
    pub master_addr: Option<String>,
    pub ha_server_addr: Option<String>,
    /// Set when an already registered broker reported topics that would pass
    /// `maxRouteTopics` or `maxQueueDatas`: those new topics were not added (none of
    /// them), everything else of the registration was, and its data version was not
    /// taken, so its next periodic registration is applied again and adds them once
    /// there is room.
    pub growth_refused: Option<LimitRefusal>,
}

/// Why nothing of a registration was applied.
#[derive(Debug, Clone, PartialEq)]
pub enum RegisterRefusal {
    /// A brokerId-0 registration while the group has a master of a newer epoch.
    StaleMaster { theirs: Option<i32>, ours: i32 },
    /// It would pass a limit (or breaks a name rule, counted under `maxNameLength`).
    Limit(LimitRefusal),
}

impl From<LimitRefusal> for RegisterRefusal {
    fn from(refusal: LimitRefusal) -> Self {
        Self::Limit(refusal)
    }
}

/// How full each table is, for the gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RouteSizes {
    pub live_brokers: usize,
    pub broker_names: usize,
    pub topics: usize,
    pub queue_datas: usize,
    pub filter_servers: usize,
    pub master_epochs: usize,
}

/// Which unit-topic list (codes 311/312/313).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnitFilter {
    Unit,
    HasUnitSub,
    HasUnitSubNotUnit,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WritePermOp {
    /// WIPE_WRITE_PERM_OF_BROKER: clear the WRITE bit.
    Wipe,
    /// ADD_WRITE_PERM_OF_BROKER: set perm to READ|WRITE.
    Add,
}

#[derive(Debug, Default)]
pub struct RouteTable {
    limits: RouteLimits,
    /// topic → brokerName → queue data.
    topic_queue_table: BTreeMap<String, BTreeMap<String, QueueData>>,
    /// brokerName → addresses by brokerId.
    broker_addr_table: BTreeMap<String, BrokerData>,
    /// cluster → broker names.
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    /// brokerAddr → liveness.
    broker_live_table: HashMap<String, BrokerLiveInfo>,
    /// brokerAddr → filter servers.
    filter_server_table: HashMap<String, Vec<String>>,
    /// (topic, brokerName) pairs in `topic_queue_table`.
    queue_datas: usize,
    /// brokerName → the highest `masterEpoch` a brokerId-0 registration carried, kept
    /// for a while after the name's last broker went (see `epochs`).
    epochs: MasterEpochs,
    /// Whether registrations are authenticated (ACL or `adminSecret`): only then does an
    /// epoch keep fencing older masters after the broker that registered it is gone.
    authenticated: bool,
}

impl RouteTable {
    pub fn new(limits: RouteLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Registrations are signed (ACL or `adminSecret`), so a registered epoch is trusted
    /// to fence older masters for its whole retention, its holder live or not.
    pub fn with_authenticated_registrations(mut self, authenticated: bool) -> Self {
        self.authenticated = authenticated;
        self
    }

    /// `registerBroker`, all or nothing: a registration refused (a stale master, a
    /// limit) changes nothing. Growth an already registered broker reports past the
    /// topic caps is the one partial case ([`RegisterResult::growth_refused`]): refusing
    /// its whole registration would let it expire and drop every route it serves.
    pub fn register(
        &mut self,
        reg: Registration,
        now: Instant,
    ) -> Result<RegisterResult, RegisterRefusal> {
        let admission = self.admit(&reg, now)?;
        if reg.broker_id == MASTER_ID
            && let Some(epoch) = reg.master_epoch
        {
            self.epochs
                .record(&reg.broker_name, epoch, &reg.broker_addr);
        } else {
            self.epochs.name_registered(&reg.broker_name);
        }
        self.cluster_addr_table
            .entry(reg.cluster_name.clone())
            .or_default()
            .insert(reg.broker_name.clone());

        let broker_data = self
            .broker_addr_table
            .entry(reg.broker_name.clone())
            .or_insert_with(|| BrokerData {
                cluster: reg.cluster_name.clone(),
                broker_name: reg.broker_name.clone(),
                broker_addrs: BTreeMap::new(),
                enable_acting_master: None,
                grpc_addrs: BTreeMap::new(),
            });
        // One address has one brokerId: a slave promoted to master (or the reverse)
        // first loses its old id.
        broker_data
            .broker_addrs
            .retain(|id, addr| *addr != reg.broker_addr || *id == reg.broker_id);
        broker_data
            .broker_addrs
            .insert(reg.broker_id, reg.broker_addr.clone());

        if admission.apply_topics {
            for config in reg.topic_config.topic_config_table.values() {
                let known = self
                    .topic_queue_table
                    .get(&config.topic_name)
                    .is_some_and(|by_broker| by_broker.contains_key(&reg.broker_name));
                if !known && admission.growth_refused.is_some() {
                    continue;
                }
                let queue_data = QueueData {
                    broker_name: reg.broker_name.clone(),
                    read_queue_nums: config.read_queue_nums,
                    write_queue_nums: config.write_queue_nums,
                    perm: config.perm,
                    topic_sys_flag: config.topic_sys_flag,
                };
                let old = self
                    .topic_queue_table
                    .entry(config.topic_name.clone())
                    .or_default()
                    .insert(reg.broker_name.clone(), queue_data);
                self.queue_datas += usize::from(old.is_none());
            }
        }

        // A broker whose growth was refused keeps its last applied version, so the
        // next QUERY_DATA_VERSION says "changed" and it registers its topics again.
        let data_version = match (
            &admission.growth_refused,
            self.data_version(&reg.broker_addr),
        ) {
            (Some(_), Some(applied)) => applied,
            _ => reg.topic_config.data_version,
        };
        self.broker_live_table.insert(
            reg.broker_addr.clone(),
            BrokerLiveInfo {
                last_update: now,
                data_version,
                conn: reg.conn,
                ha_server_addr: reg.ha_server_addr.clone(),
                grpc_port: reg.grpc_port,
            },
        );
        if reg.filter_server_list.is_empty() {
            self.filter_server_table.remove(&reg.broker_addr);
        } else {
            self.filter_server_table
                .insert(reg.broker_addr.clone(), reg.filter_server_list);
        }

        let mut result = RegisterResult {
            growth_refused: admission.growth_refused,
            ..RegisterResult::default()
        };
        if reg.broker_id != MASTER_ID {
            let master = self
                .broker_addr_table
                .get(&reg.broker_name)
                .and_then(|bd| bd.master_addr());
            if let Some(master) = master
                && let Some(live) = self.broker_live_table.get(master)
            {
                result.master_addr = Some(master.to_owned());
                result.ha_server_addr = Some(live.ha_server_addr.clone());
            }
        }
        Ok(result)
    }

    /// Deviation from 4.9, which lets the last brokerId-0 registration win: a master
    /// registering with an epoch below the highest one seen for its group is refused, and
    /// so is one without an epoch (a RocketMQ broker) while a live master of the group
    /// registered with one. Equal or higher epochs register as before. Without
    /// authenticated registrations the highest epoch counts only while the broker that
    /// registered it is live.
    fn stale_master(&self, reg: &Registration) -> Option<(Option<i32>, i32)> {
        // Unauthenticated, an epoch fences only while its holder is live: anyone may
        // have registered it, and a peer that is gone must not keep the real master out.
        let highest = self
            .epochs
            .highest_with_holder(&reg.broker_name)
            .filter(|(_, holder)| {
                self.authenticated || self.broker_live_table.contains_key(*holder)
            })
            .map(|(epoch, _)| epoch);
        match (reg.master_epoch, highest) {
            (Some(theirs), Some(ours)) if theirs < ours => Some((Some(theirs), ours)),
            (Some(_), _) => None,
            (None, Some(ours)) => {
                let live_master = self
                    .broker_addr_table
                    .get(&reg.broker_name)
                    .and_then(|bd| bd.master_addr())
                    .filter(|addr| *addr != reg.broker_addr)
                    .is_some_and(|addr| self.broker_live_table.contains_key(addr));
                live_master.then_some((None, ours))
            }
            (None, None) => None,
        }
    }

    /// `isBrokerTopicConfigChanged`: unknown brokers count as changed.
    pub fn is_topic_config_changed(&self, broker_addr: &str, version: &DataVersion) -> bool {
        self.broker_live_table
            .get(broker_addr)
            .is_none_or(|live| live.data_version != *version)
    }

    /// The DataVersion last registered by `broker_addr`.
    pub fn data_version(&self, broker_addr: &str) -> Option<DataVersion> {
        self.broker_live_table
            .get(broker_addr)
            .map(|l| l.data_version)
    }

    /// Refreshes a broker's liveness (QUERY_DATA_VERSION with an unchanged version).
    pub fn touch(&mut self, broker_addr: &str, now: Instant) {
        if let Some(live) = self.broker_live_table.get_mut(broker_addr) {
            live.last_update = now;
        }
    }

    /// UNREGISTER_BROKER: drops `broker_addr` wherever it is registered. 4.9 removes the
    /// liveness of the address and whatever address holds the named brokerId, which can
    /// leave an address in brokerData (and its cluster membership) with no liveness, so
    /// that no scan ever removes it; here every address in brokerData is live.
    pub fn unregister(&mut self, broker_addr: &str, now: Instant) {
        self.drop_broker_addr(broker_addr, now);
    }

    /// `onChannelDestroy` for every broker registered over `conn`; returns the dropped
    /// broker addresses.
    pub fn on_connection_closed(&mut self, conn: ConnId, now: Instant) -> Vec<String> {
        let addrs: Vec<String> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| live.conn == conn)
            .map(|(addr, _)| addr.clone())
            .collect();
        for addr in &addrs {
            self.drop_broker_addr(addr, now);
        }
        addrs
    }

    /// `scanNotActiveBroker`: drops brokers silent for longer than `expiry`; returns
    /// their addresses and connections so the caller can close those. Also forgets the
    /// master epochs of names gone longer than `masterEpochRetentionMillis`.
    pub fn expire(&mut self, now: Instant, expiry: Duration) -> Vec<(String, ConnId)> {
        let expired: Vec<(String, ConnId)> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| now.saturating_duration_since(live.last_update) > expiry)
            .map(|(addr, live)| (addr.clone(), live.conn))
            .collect();
        for (addr, _) in &expired {
            self.drop_broker_addr(addr, now);
        }
        self.epochs.purge(now, self.limits.master_epoch_retention);
        expired
    }

    fn drop_broker_addr(&mut self, addr: &str, now: Instant) {
        self.broker_live_table.remove(addr);
        self.filter_server_table.remove(addr);
        let mut gone_names = BTreeSet::new();
        self.broker_addr_table.retain(|name, bd| {
            bd.broker_addrs.retain(|_, a| a != addr);
            if bd.broker_addrs.is_empty() {
                gone_names.insert(name.clone());
                false
            } else {
                true
            }
        });
        if gone_names.is_empty() {
            return;
        }
        for name in &gone_names {
            self.epochs.name_gone(name, now);
        }
        self.cluster_addr_table.retain(|_, names| {
            names.retain(|n| !gone_names.contains(n));
            !names.is_empty()
        });
        self.remove_topics_of_brokers(&gone_names);
    }

    /// Removes the queue data of `broker_names`; topics left with none disappear.
    fn remove_topics_of_brokers(&mut self, broker_names: &BTreeSet<String>) {
        let mut removed = 0;
        self.topic_queue_table.retain(|_, by_broker| {
            let before = by_broker.len();
            by_broker.retain(|name, _| !broker_names.contains(name));
            removed += before - by_broker.len();
            !by_broker.is_empty()
        });
        self.queue_datas -= removed;
    }

    /// `pickupTopicRouteData`: `None` unless the topic has queue data and at least one
    /// of its brokers is known.
    pub fn route(&self, topic: &str) -> Option<TopicRouteData> {
        let by_broker = self.topic_queue_table.get(topic)?;
        let mut route = TopicRouteData {
            queue_datas: by_broker.values().cloned().collect(),
            ..Default::default()
        };
        for name in by_broker.keys() {
            if let Some(bd) = self.broker_addr_table.get(name) {
                for addr in bd.broker_addrs.values() {
                    if let Some(servers) = self.filter_server_table.get(addr) {
                        route
                            .filter_server_table
                            .insert(addr.clone(), servers.clone());
                    }
                }
                route.broker_datas.push(self.with_grpc_addrs(bd));
            }
        }
        (!route.broker_datas.is_empty()).then_some(route)
    }

    /// `bd` with `grpcAddrs`: for each of its brokers that registered a gRPC port, the
    /// host it registered (`brokerAddr` without its port, i.e. brokerIP1) and that port.
    /// Derived from the live table, so an expired broker's endpoint goes with it.
    fn with_grpc_addrs(&self, bd: &BrokerData) -> BrokerData {
        let mut bd = bd.clone();
        bd.grpc_addrs = bd
            .broker_addrs
            .iter()
            .filter_map(|(id, addr)| {
                let port = self.broker_live_table.get(addr)?.grpc_port?;
                let (host, _) = addr.rsplit_once(':')?;
                Some((*id, format!("{host}:{port}")))
            })
            .collect();
        bd
    }

    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr_table.clone(),
            cluster_addr_table: self.cluster_addr_table.clone(),
        }
    }

    pub fn all_topics(&self) -> TopicList {
        topic_list(self.topic_queue_table.keys().cloned())
    }

    pub fn topics_by_cluster(&self, cluster: &str) -> TopicList {
        let Some(names) = self.cluster_addr_table.get(cluster) else {
            return TopicList::default();
        };
        topic_list(
            self.topic_queue_table
                .iter()
                .filter(|(_, by_broker)| by_broker.keys().any(|n| names.contains(n)))
                .map(|(t, _)| t.clone()),
        )
    }

    /// `getSystemTopicList`: cluster names and broker names (each is a topic on the
    /// brokers), plus one broker address the caller may query for more.
    pub fn system_topics(&self) -> TopicList {
        let mut list = TopicList::default();
        for (cluster, names) in &self.cluster_addr_table {
            list.topic_list.insert(cluster.clone());
            list.topic_list.extend(names.iter().cloned());
        }
        list.broker_addr = self
            .broker_addr_table
            .values()
            .find_map(|bd| bd.broker_addrs.values().next().cloned());
        list
    }

    /// Java tests the flag of the topic's first queue data only.
    pub fn unit_topics(&self, filter: UnitFilter) -> TopicList {
        topic_list(
            self.topic_queue_table
                .iter()
                .filter(|(_, by_broker)| {
                    by_broker.values().next().is_some_and(|qd| {
                        let unit = qd.topic_sys_flag & FLAG_UNIT != 0;
                        let unit_sub = qd.topic_sys_flag & FLAG_UNIT_SUB != 0;
                        match filter {
                            UnitFilter::Unit => unit,
                            UnitFilter::HasUnitSub => unit_sub,
                            UnitFilter::HasUnitSubNotUnit => unit_sub && !unit,
                        }
                    })
                })
                .map(|(t, _)| t.clone()),
        )
    }

    /// DELETE_TOPIC_IN_NAMESRV; with a cluster only that cluster's queue data goes.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) {
        match cluster.and_then(|c| self.cluster_addr_table.get(c)) {
            Some(names) => {
                if let Some(by_broker) = self.topic_queue_table.get_mut(topic) {
                    let before = by_broker.len();
                    by_broker.retain(|name, _| !names.contains(name));
                    self.queue_datas -= before - by_broker.len();
                    if by_broker.is_empty() {
                        self.topic_queue_table.remove(topic);
                    }
                }
            }
            None if cluster.is_some() => {}
            None => {
                if let Some(by_broker) = self.topic_queue_table.remove(topic) {
                    self.queue_datas -= by_broker.len();
                }
            }
        }
    }

    /// Changes the WRITE permission of every queue data of `broker_name`; returns how
    /// many topics were touched.
    pub fn change_write_perm(&mut self, broker_name: &str, op: WritePermOp) -> i32 {
        let mut count = 0;
        for by_broker in self.topic_queue_table.values_mut() {
            if let Some(qd) = by_broker.get_mut(broker_name) {
                qd.perm = match op {
                    WritePermOp::Wipe => qd.perm & !PERM_WRITE,
                    WritePermOp::Add => PERM_READ | PERM_WRITE,
                };
                count += 1;
            }
        }
        count
    }

    pub fn sizes(&self) -> RouteSizes {
        RouteSizes {
            live_brokers: self.broker_live_table.len(),
            broker_names: self.broker_addr_table.len(),
            topics: self.topic_queue_table.len(),
            queue_datas: self.queue_datas,
            filter_servers: self.filter_server_table.values().map(Vec::len).sum(),
            master_epochs: self.epochs.len(),
        }
    }
}

fn topic_list(topics: impl Iterator<Item = String>) -> TopicList {
    TopicList {
        topic_list: topics.collect(),
        broker_addr: None,
    }
}

#[cfg(test)]
mod tests;
