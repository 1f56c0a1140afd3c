//! Connected clients (`ProducerManager`, `ConsumerManager`): which connection belongs to
//! which producer and consumer groups, each consumer group's subscriptions, and
//! expiry of memberships that stopped heart-beating (120 s).
//!
//! Every entry is keyed by names a client chose, so the tables are bounded
//! ([`ClientLimits`]): a connection may belong to at most `maxGroupsPerConnection`
//! groups and the broker tracks at most `maxClientGroups` distinct groups. A heartbeat
//! that would pass a cap is refused; live memberships are never evicted to make room.
//! Entries go with their owners: a membership when its connection closes, when the
//! client unregisters, or when no heartbeat refreshed it for `channelExpiredTimeout`
//! (4.9's `scanNotActiveChannel`); a group when its last member goes.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use std::time::{Duration, Instant};

use parking_lot::RwLock;
use protocol::body::{ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, SubscriptionData};
use protocol::{LanguageCode, RemotingCommand};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Identifies one accepted TCP connection for the lifetime of the process.
pub type ConnId = u64;

/// The connection a request arrived on, as handlers see it.
#[derive(Debug, Clone)]
pub struct Conn {
    pub id: ConnId,
    pub peer: SocketAddr,
    pub channel: Channel,
}

/// What the broker can do with a client's connection from outside its task: push a
/// request (NOTIFY_CONSUMER_IDS_CHANGED) or close it.
#[derive(Debug, Clone)]
pub struct Channel {
    pub id: ConnId,
    pub peer: SocketAddr,
    pub outbound: mpsc::Sender<RemotingCommand>,
    pub close: CancellationToken,
}

#[derive(Debug, Clone)]
pub struct ClientInfo {
    pub client_id: String,
    pub language: LanguageCode,
    pub version: i32,
    pub last_update: Instant,
    /// With the ACL on, the account that signed the heartbeat registering this
    /// membership (what a broker-originated push to the connection is checked against).
    pub access_key: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ConsumerGroupInfo {
    pub consume_type: ConsumeType,
    pub message_model: MessageModel,
    pub consume_from_where: ConsumeFromWhere,
    pub subscriptions: BTreeMap<String, SubscriptionData>,
    pub members: HashMap<ConnId, ClientInfo>,
    /// What `subscriptions` holds, estimated from above.
    subscription_bytes: usize,
}

/// Bytes one subscription holds in the table, estimated from above.
fn subscription_bytes(sub: &SubscriptionData) -> usize {
    const OVERHEAD: usize = 160;
    OVERHEAD
        + 2 * sub.topic.len()
        + sub.sub_string.len()
        + sub.expression_type.len()
        + sub.tags_set.iter().map(|t| t.len() + 48).sum::<usize>()
        + sub.code_set.len() * 16
}

#[derive(Default)]
struct Tables {
    channels: HashMap<ConnId, Channel>,
    producers: HashMap<String, HashMap<ConnId, ClientInfo>>,
    consumers: HashMap<String, ConsumerGroupInfo>,
    /// Producer plus consumer memberships of each connection.
    memberships: HashMap<ConnId, usize>,
    /// Sum of the consumer groups' `subscription_bytes`.
    subscription_bytes: usize,
}

/// The bounds on the tables.
#[derive(Debug, Clone, Copy)]
pub struct ClientLimits {
    /// `maxGroupsPerConnection`: producer and consumer memberships of one connection.
    pub groups_per_connection: usize,
    /// `maxClientGroups`: distinct producer plus consumer groups with a live member.
    pub groups: usize,
    /// `maxClientSubscriptionBytes`: what the consumer groups' subscriptions may hold.
    pub subscription_bytes: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            groups_per_connection: 1024,
            groups: 65_536,
            subscription_bytes: 128 << 20,
        }
    }
}

/// A membership refused by a cap: the key of the limit and a remark for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub limit: &'static str,
    pub remark: String,
}

/// What one expiry scan removed.
#[derive(Debug, Default)]
pub struct Expired {
    /// Connections none of whose memberships was refreshed in time: to be closed.
    pub channels: Vec<Channel>,
    /// Consumer groups that lost a member (to be told to rebalance).
    pub groups: Vec<String>,
}

#[derive(Default)]
pub struct ClientManager {
    tables: RwLock<Tables>,
    limits: ClientLimits,
}

impl Tables {
    /// Whether `conn` may join `new_groups` more groups, `distinct_new` of which the
    /// broker does not track yet.
    fn admit(
        &self,
        limits: &ClientLimits,
        conn: ConnId,
        new_groups: usize,
        distinct_new: usize,
    ) -> Result<(), Refused> {
        let held = self.memberships.get(&conn).copied().unwrap_or(0);
        if held + new_groups > limits.groups_per_connection {
            return Err(Refused {
                limit: "maxGroupsPerConnection",
                remark: format!(
                    "this connection would belong to {} groups, more than maxGroupsPerConnection {}",
                    held + new_groups,
                    limits.groups_per_connection
                ),
            });
        }
        let tracked = self.producers.len() + self.consumers.len();
        if distinct_new > 0 && tracked + distinct_new > limits.groups {
            return Err(Refused {
                limit: "maxClientGroups",
                remark: format!(
                    "the broker tracks {tracked} client groups; {distinct_new} more would pass maxClientGroups {}",
                    limits.groups
                ),
            });
        }
        Ok(())
    }

    fn joined(&mut self, conn: ConnId) {
        *self.memberships.entry(conn).or_insert(0) += 1;
    }

    fn left(&mut self, conn: ConnId) {
        if let Some(n) = self.memberships.get_mut(&conn) {
            *n -= 1;
            if *n == 0 {
                self.memberships.remove(&conn);
            }
        }
    }
}

impl ClientManager {
    pub fn new(limits: ClientLimits) -> Self {
        Self {
            tables: RwLock::default(),
            limits,
        }
    }

    /// Whether a heartbeat from `conn` naming these groups fits the caps, checked before
    /// the heartbeat changes anything (each registration checks again under the lock).
    pub fn admits<'a>(
        &self,
        conn: ConnId,
        consumer_groups: impl IntoIterator<Item = &'a str>,
        producer_groups: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), Refused> {
        let t = self.tables.read();
        let (mut new_groups, mut distinct_new) = (0, 0);
        for g in consumer_groups {
            match t.consumers.get(g) {
                Some(info) if info.members.contains_key(&conn) => {}
                Some(_) => new_groups += 1,
                None => (new_groups, distinct_new) = (new_groups + 1, distinct_new + 1),
            }
        }
        for g in producer_groups {
            match t.producers.get(g) {
                Some(members) if members.contains_key(&conn) => {}
                Some(_) => new_groups += 1,
                None => (new_groups, distinct_new) = (new_groups + 1, distinct_new + 1),
            }
        }
        t.admit(&self.limits, conn, new_groups, distinct_new)
    }

    pub fn add_channel(&self, channel: Channel) {
        self.tables.write().channels.insert(channel.id, channel);
    }

    pub fn channel(&self, id: ConnId) -> Option<Channel> {
        self.tables.read().channels.get(&id).cloned()
    }

    pub fn connection_count(&self) -> usize {
        self.tables.read().channels.len()
    }

    /// `ProducerManager.registerProducer`, within the caps.
    pub fn register_producer(
        &self,
        group: &str,
        conn: ConnId,
        info: ClientInfo,
    ) -> Result<(), Refused> {
        let mut t = self.tables.write();
        let member = t.producers.get(group).map(|m| m.contains_key(&conn));
        if member != Some(true) {
            t.admit(&self.limits, conn, 1, usize::from(member.is_none()))?;
            t.joined(conn);
        }
        t.producers
            .entry(group.to_owned())
            .or_default()
            .insert(conn, info);
        Ok(())
    }

    pub fn unregister_producer(&self, group: &str, conn: ConnId) {
        let mut t = self.tables.write();
        let Some(members) = t.producers.get_mut(group) else {
            return;
        };
        let removed = members.remove(&conn).is_some();
        if members.is_empty() {
            t.producers.remove(group);
        }
        if removed {
            t.left(conn);
        }
    }

    /// `ConsumerManager.registerConsumer`, within the caps: `Ok(true)` when the group's
    /// member set changed (new member), which must be announced to every member.
    pub fn register_consumer(
        &self,
        data: &ConsumerData,
        conn: ConnId,
        info: ClientInfo,
    ) -> Result<bool, Refused> {
        let mut t = self.tables.write();
        let member = t
            .consumers
            .get(&data.group_name)
            .map(|g| g.members.contains_key(&conn));
        if member != Some(true) {
            t.admit(&self.limits, conn, 1, usize::from(member.is_none()))?;
            t.joined(conn);
        }
        // `updateSubscription`: keep an unchanged subscription's version, replace changed
        // ones and drop topics the client no longer subscribes to.
        let old = t.consumers.get(&data.group_name);
        let old_bytes = old.map_or(0, |g| g.subscription_bytes);
        let mut next = BTreeMap::new();
        for sub in &data.subscription_data_set {
            let keep = old
                .and_then(|g| g.subscriptions.get(&sub.topic))
                .filter(|old| {
                    old.sub_string == sub.sub_string && old.sub_version >= sub.sub_version
                });
            next.insert(
                sub.topic.clone(),
                keep.cloned().unwrap_or_else(|| sub.clone()),
            );
        }
        let next_bytes: usize = next.values().map(subscription_bytes).sum();
        let total = t.subscription_bytes - old_bytes + next_bytes;
        if next_bytes > old_bytes && total > self.limits.subscription_bytes {
            if member != Some(true) {
                t.left(conn);
            }
            return Err(Refused {
                limit: "maxClientSubscriptionBytes",
                remark: format!(
                    "the subscriptions of group {} ({next_bytes} bytes) would pass maxClientSubscriptionBytes {}",
                    data.group_name, self.limits.subscription_bytes
                ),
            });
        }
        t.subscription_bytes = total;
        let group = t
            .consumers
            .entry(data.group_name.clone())
            .or_insert_with(|| ConsumerGroupInfo {
                consume_type: data.consume_type,
                message_model: data.message_model,
                consume_from_where: data.consume_from_where,
                subscriptions: BTreeMap::new(),
                members: HashMap::new(),
                subscription_bytes: 0,
            });
        group.consume_type = data.consume_type;
        group.message_model = data.message_model;
        group.consume_from_where = data.consume_from_where;
        let is_new = group.members.insert(conn, info).is_none();
        group.subscriptions = next;
        group.subscription_bytes = next_bytes;
        Ok(is_new)
    }

    /// Removes `conn` from the consumer group; true when it was a member.
    pub fn unregister_consumer(&self, group: &str, conn: ConnId) -> bool {
        let mut t = self.tables.write();
        let Some(info) = t.consumers.get_mut(group) else {
            return false;
        };
        let removed = info.members.remove(&conn).is_some();
        if info.members.is_empty()
            && let Some(gone) = t.consumers.remove(group)
        {
            t.subscription_bytes -= gone.subscription_bytes;
        }
        if removed {
            t.left(conn);
        }
        removed
    }

    /// Whether `group` has a live consumer member.
    pub fn has_consumer_group(&self, group: &str) -> bool {
        self.tables.read().consumers.contains_key(group)
    }

    /// Bytes the consumer groups' subscriptions hold, estimated from above.
    pub fn subscription_bytes(&self) -> usize {
        self.tables.read().subscription_bytes
    }

    /// Distinct producer and consumer groups with a live member.
    pub fn group_count(&self) -> usize {
        let t = self.tables.read();
        t.producers.len() + t.consumers.len()
    }

    pub fn consumer_group(&self, group: &str) -> Option<ConsumerGroupInfo> {
        self.tables.read().consumers.get(group).cloned()
    }

    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.tables
            .read()
            .consumers
            .get(group)
            .and_then(|g| g.subscriptions.get(topic).cloned())
    }

    /// Client ids of the group's live members (GET_CONSUMER_LIST_BY_GROUP).
    pub fn consumer_ids(&self, group: &str) -> Vec<String> {
        let t = self.tables.read();
        let mut ids: Vec<String> = t
            .consumers
            .get(group)
            .map(|g| g.members.values().map(|c| c.client_id.clone()).collect())
            .unwrap_or_default();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Channels of the group's members, for NOTIFY_CONSUMER_IDS_CHANGED.
    pub fn consumer_channels(&self, group: &str) -> Vec<Channel> {
        let t = self.tables.read();
        t.consumers
            .get(group)
            .map(|g| {
                g.members
                    .keys()
                    .filter_map(|c| t.channels.get(c).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The group's members with their channels (4.9's `ConsumerGroupInfo.channelInfoTable`),
    /// ordered by client id.
    /// Whether `client_id` is, in consumer group `group`, the id of a live connection
    /// other than `conn`. Queue locks are keyed by the client id a request names
    /// (`RebalanceLockManager`); a lock or unlock naming an id another live connection
    /// heart-beat with is someone else's. An id no live connection holds (a client that
    /// reconnected and has not heart-beat yet) stays usable.
    pub fn client_id_held_elsewhere(&self, group: &str, client_id: &str, conn: ConnId) -> bool {
        let t = self.tables.read();
        t.consumers.get(group).is_some_and(|g| {
            g.members.iter().any(|(c, info)| {
                *c != conn
                    && info.client_id == client_id
                    && t.channels.get(c).is_some_and(|ch| !ch.close.is_cancelled())
            })
        })
    }

    pub fn consumer_members(&self, group: &str) -> Vec<(ClientInfo, Channel)> {
        let t = self.tables.read();
        let mut out: Vec<(ClientInfo, Channel)> = t
            .consumers
            .get(group)
            .map(|g| {
                g.members
                    .iter()
                    .filter_map(|(c, info)| t.channels.get(c).map(|ch| (info.clone(), ch.clone())))
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.client_id.cmp(&b.0.client_id));
        out
    }

    /// Producers of the group with their connection's peer (GET_PRODUCER_CONNECTION_LIST).
    pub fn producer_connections(&self, group: &str) -> Vec<(ClientInfo, SocketAddr)> {
        let t = self.tables.read();
        let mut out: Vec<(ClientInfo, SocketAddr)> = t
            .producers
            .get(group)
            .map(|m| {
                m.iter()
                    .filter_map(|(c, info)| t.channels.get(c).map(|ch| (info.clone(), ch.peer)))
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.client_id.cmp(&b.0.client_id));
        out
    }

    /// A live connection of the producer group that `allowed` accepts, the one that
    /// heart-beat last (`ProducerManager.getAvailableChannel`; the newest is the
    /// likeliest to be alive).
    pub fn producer_channel(
        &self,
        group: &str,
        allowed: impl Fn(&Channel, &ClientInfo) -> bool,
    ) -> Option<Channel> {
        let t = self.tables.read();
        let members = t.producers.get(group)?;
        let mut by_recency: Vec<_> = members.iter().collect();
        by_recency.sort_by_key(|(_, info)| std::cmp::Reverse(info.last_update));
        by_recency.into_iter().find_map(|(conn, info)| {
            t.channels
                .get(conn)
                .filter(|c| !c.close.is_cancelled() && allowed(c, info))
                .cloned()
        })
    }

    pub fn producer_group_names(&self) -> Vec<String> {
        self.tables.read().producers.keys().cloned().collect()
    }

    /// Drops a closed connection from every table; returns the consumer groups it left.
    pub fn remove_channel(&self, conn: ConnId) -> Vec<String> {
        let mut t = self.tables.write();
        t.channels.remove(&conn);
        t.memberships.remove(&conn);
        t.producers.retain(|_, members| {
            members.remove(&conn);
            !members.is_empty()
        });
        let mut left = Vec::new();
        let mut freed = 0;
        t.consumers.retain(|group, info| {
            if info.members.remove(&conn).is_some() {
                left.push(group.clone());
            }
            let keep = !info.members.is_empty();
            if !keep {
                freed += info.subscription_bytes;
            }
            keep
        });
        t.subscription_bytes -= freed;
        left
    }

    /// `scanNotActiveChannel`: drops every membership no heartbeat refreshed within
    /// `expiry`, and names the connections left with no fresh membership (to be closed,
    /// as 4.9 closes an expired channel). A connection that never heart-beat holds no
    /// membership and is left to the idle timeout.
    pub fn expire(&self, now: Instant, expiry: Duration) -> Expired {
        let mut t = self.tables.write();
        let stale = |info: &ClientInfo| now.saturating_duration_since(info.last_update) > expiry;
        let mut fresh: HashMap<ConnId, bool> = HashMap::new();
        let mut dropped: Vec<ConnId> = Vec::new();
        let mut out = Expired::default();
        let mut freed = 0;
        t.producers.retain(|_, members| {
            members.retain(|conn, info| {
                let keep = !stale(info);
                *fresh.entry(*conn).or_insert(false) |= keep;
                if !keep {
                    dropped.push(*conn);
                }
                keep
            });
            !members.is_empty()
        });
        t.consumers.retain(|group, g| {
            let before = g.members.len();
            g.members.retain(|conn, info| {
                let keep = !stale(info);
                *fresh.entry(*conn).or_insert(false) |= keep;
                if !keep {
                    dropped.push(*conn);
                }
                keep
            });
            if g.members.len() != before {
                out.groups.push(group.clone());
            }
            let keep = !g.members.is_empty();
            if !keep {
                freed += g.subscription_bytes;
            }
            keep
        });
        t.subscription_bytes -= freed;
        for conn in dropped {
            t.left(conn);
        }
        out.channels = fresh
            .into_iter()
            .filter(|(_, any_fresh)| !any_fresh)
            .filter_map(|(c, _)| t.channels.get(&c).cloned())
            .collect();
        out
    }

    /// `(group, client id)` of every consumer group `conn` is a member of.
    pub fn consumer_memberships(&self, conn: ConnId) -> Vec<(String, String)> {
        let t = self.tables.read();
        t.consumers
            .iter()
            .filter_map(|(group, g)| {
                g.members
                    .get(&conn)
                    .map(|info| (group.clone(), info.client_id.clone()))
            })
            .collect()
    }

    /// True when `client_id` is still a member of `group` through some connection.
    pub fn is_consumer_member(&self, group: &str, client_id: &str) -> bool {
        self.tables
            .read()
            .consumers
            .get(group)
            .is_some_and(|g| g.members.values().any(|m| m.client_id == client_id))
    }

    /// Snapshot for GET_CONSUMER_CONNECTION_LIST: members with their channel's peer.
    pub fn consumer_connections(
        &self,
        group: &str,
    ) -> Option<(ConsumerGroupInfo, Vec<(ClientInfo, SocketAddr)>)> {
        let t = self.tables.read();
        let g = t.consumers.get(group)?;
        let conns = g
            .members
            .iter()
            .filter_map(|(c, info)| t.channels.get(c).map(|ch| (info.clone(), ch.peer)))
            .collect();
        Some((g.clone(), conns))
    }
}

#[cfg(test)]
#[path = "clients_tests.rs"]
mod tests;
