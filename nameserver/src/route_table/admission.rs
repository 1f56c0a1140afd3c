//! Whether a registration fits the route table's limits, decided before any of it is
//! applied. A cap refuses the registration that would pass it; nothing registered is
//! ever evicted to make room.

use std::collections::HashSet;
use std::time::Instant;

use protocol::body::route::MASTER_ID;

use super::{RegisterRefusal, Registration, RouteTable};
use crate::limits::{
    LimitRefusal, MAX_BROKERS, MAX_FILTER_SERVERS_PER_BROKER, MAX_MASTER_EPOCHS, MAX_NAME_LENGTH,
    MAX_QUEUE_DATAS, MAX_ROUTE_TOPICS, check_broker_name, check_length,
};

/// How an admitted registration is applied.
pub(super) struct Admission {
    /// A master registering for the first time or with a changed data version.
    pub apply_topics: bool,
    /// The registration's new topics are skipped ([`super::RegisterResult`]).
    pub growth_refused: Option<LimitRefusal>,
}

impl RouteTable {
    pub(super) fn admit(
        &mut self,
        reg: &Registration,
        now: Instant,
    ) -> Result<Admission, RegisterRefusal> {
        self.check_names(reg)?;
        if reg.broker_id == MASTER_ID
            && let Some((theirs, ours)) = self.stale_master(reg)
        {
            return Err(RegisterRefusal::StaleMaster { theirs, ours });
        }
        self.check_broker_slots(reg)?;
        self.check_epoch_slot(reg, now)?;

        let first = !self
            .broker_addr_table
            .get(&reg.broker_name)
            .is_some_and(|bd| bd.broker_addrs.contains_key(&reg.broker_id));
        let apply_topics = reg.broker_id == MASTER_ID
            && (first
                || self.is_topic_config_changed(&reg.broker_addr, &reg.topic_config.data_version));
        let mut admission = Admission {
            apply_topics,
            growth_refused: None,
        };
        if apply_topics && let Some(refusal) = self.topic_growth_refusal(reg) {
            // A registered broker keeps its routes and its liveness; a new one is
            // refused whole.
            if !self.broker_live_table.contains_key(&reg.broker_addr) {
                return Err(refusal.into());
            }
            admission.growth_refused = Some(refusal);
        }
        Ok(admission)
    }

    /// Names, addresses and list lengths a registration carries (`maxNameLength`,
    /// `maxFilterServersPerBroker`). Topic names matter only for masters, the only
    /// brokers whose topics are kept.
    fn check_names(&self, reg: &Registration) -> Result<(), LimitRefusal> {
        let max = self.limits.max_name_length;
        check_broker_name("clusterName", &reg.cluster_name, max)?;
        check_broker_name("brokerName", &reg.broker_name, max)?;
        if reg.broker_addr.trim().is_empty() {
            return Err(LimitRefusal::new(
                MAX_NAME_LENGTH,
                "the brokerAddr is blank",
            ));
        }
        check_length("brokerAddr", &reg.broker_addr, max)?;
        check_length("haServerAddr", &reg.ha_server_addr, max)?;
        let filters = reg.filter_server_list.len();
        let max_filters = self.limits.max_filter_servers_per_broker;
        if filters > max_filters {
            return Err(LimitRefusal::new(
                MAX_FILTER_SERVERS_PER_BROKER,
                format!(
                    "{filters} filter servers would pass maxFilterServersPerBroker {max_filters}"
                ),
            ));
        }
        for server in &reg.filter_server_list {
            check_length("filter server address", server, max)?;
        }
        if reg.broker_id == MASTER_ID {
            for config in reg.topic_config.topic_config_table.values() {
                check_length("topic name", &config.topic_name, max)?;
            }
        }
        Ok(())
    }

    /// `maxBrokers` bounds three things a registration may add one of: a live address,
    /// an address entry of brokerData (an address may be listed under several names),
    /// and a (cluster, brokerName) membership (a name may be in several clusters).
    /// Broker names are bounded with the address entries: each has at least one.
    fn check_broker_slots(&self, reg: &Registration) -> Result<(), LimitRefusal> {
        let max = self.limits.max_brokers;
        let refuse = |what: &str, held: usize| {
            Err(LimitRefusal::new(
                MAX_BROKERS,
                format!(
                    "the nameserver holds {held} {what}; broker {} ({}) would pass maxBrokers {max}",
                    reg.broker_addr, reg.broker_name
                ),
            ))
        };
        let live = self.broker_live_table.len();
        if live >= max && !self.broker_live_table.contains_key(&reg.broker_addr) {
            return refuse("live broker addresses", live);
        }
        // A promotion moves the address to another id; replacing the address of an id
        // adds nothing either.
        let adds_entry = self
            .broker_addr_table
            .get(&reg.broker_name)
            .is_none_or(|bd| {
                !bd.broker_addrs.contains_key(&reg.broker_id)
                    && !bd.broker_addrs.values().any(|a| *a == reg.broker_addr)
            });
        let entries: usize = self
            .broker_addr_table
            .values()
            .map(|bd| bd.broker_addrs.len())
            .sum();
        if adds_entry && entries >= max {
            return refuse("broker address entries", entries);
        }
        let adds_membership = !self
            .cluster_addr_table
            .get(&reg.cluster_name)
            .is_some_and(|names| names.contains(&reg.broker_name));
        let memberships: usize = self.cluster_addr_table.values().map(|n| n.len()).sum();
        if adds_membership && memberships >= max {
            return refuse("cluster memberships", memberships);
        }
        Ok(())
    }

    /// A master with an epoch under a name the epoch table does not hold yet needs a
    /// slot (`maxMasterEpochs`); expired entries are dropped first.
    fn check_epoch_slot(&mut self, reg: &Registration, now: Instant) -> Result<(), LimitRefusal> {
        if reg.broker_id != MASTER_ID
            || reg.master_epoch.is_none()
            || self.epochs.contains(&reg.broker_name)
        {
            return Ok(());
        }
        self.epochs.purge(now, self.limits.master_epoch_retention);
        let (held, max) = (self.epochs.len(), self.limits.max_master_epochs);
        if held >= max {
            return Err(LimitRefusal::new(
                MAX_MASTER_EPOCHS,
                format!(
                    "the nameserver remembers the master epochs of {held} broker names, none \
                     of them gone longer than masterEpochRetentionMillis; brokerName {} would \
                     pass maxMasterEpochs {max}",
                    reg.broker_name
                ),
            ));
        }
        Ok(())
    }

    /// The refusal of the topics and QueueData entries a master's registration would
    /// add past `maxRouteTopics` / `maxQueueDatas`.
    fn topic_growth_refusal(&self, reg: &Registration) -> Option<LimitRefusal> {
        let mut new_topics = HashSet::new();
        let mut new_entries = 0;
        for config in reg.topic_config.topic_config_table.values() {
            match self.topic_queue_table.get(&config.topic_name) {
                None => new_entries += usize::from(new_topics.insert(config.topic_name.as_str())),
                Some(by_broker) => {
                    new_entries += usize::from(!by_broker.contains_key(&reg.broker_name))
                }
            }
        }
        let (topics, max_topics) = (self.topic_queue_table.len(), self.limits.max_route_topics);
        if !new_topics.is_empty() && topics + new_topics.len() > max_topics {
            return Some(LimitRefusal::new(
                MAX_ROUTE_TOPICS,
                format!(
                    "the route table holds {topics} topics; the {} new topics of broker {} \
                     ({}) would pass maxRouteTopics {max_topics}",
                    new_topics.len(),
                    reg.broker_addr,
                    reg.broker_name
                ),
            ));
        }
        let max_entries = self.limits.max_queue_datas;
        if new_entries > 0 && self.queue_datas + new_entries > max_entries {
            return Some(LimitRefusal::new(
                MAX_QUEUE_DATAS,
                format!(
                    "the route table holds {} queue datas; the {new_entries} new ones of \
                     broker {} ({}) would pass maxQueueDatas {max_entries}",
                    self.queue_datas, reg.broker_addr, reg.broker_name
                ),
            ));
        }
        None
    }
}
