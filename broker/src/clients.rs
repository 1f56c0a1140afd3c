//! Connected clients (`ProducerManager`, `ConsumerManager`): which connection belongs to
//! which producer and consumer groups, each consumer group's subscriptions, and
//! expiry of channels that stopped heart-beating (120 s).

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
}

#[derive(Debug, Clone)]
pub struct ConsumerGroupInfo {
    pub consume_type: ConsumeType,
    pub message_model: MessageModel,
    pub consume_from_where: ConsumeFromWhere,
    pub subscriptions: BTreeMap<String, SubscriptionData>,
    pub members: HashMap<ConnId, ClientInfo>,
}

#[derive(Default)]
struct Tables {
    channels: HashMap<ConnId, Channel>,
    producers: HashMap<String, HashMap<ConnId, ClientInfo>>,
    consumers: HashMap<String, ConsumerGroupInfo>,
}

#[derive(Default)]
pub struct ClientManager {
    tables: RwLock<Tables>,
}

impl ClientManager {
    pub fn add_channel(&self, channel: Channel) {
        self.tables.write().channels.insert(channel.id, channel);
    }

    pub fn channel(&self, id: ConnId) -> Option<Channel> {
        self.tables.read().channels.get(&id).cloned()
    }

    pub fn connection_count(&self) -> usize {
        self.tables.read().channels.len()
    }

    pub fn register_producer(&self, group: &str, conn: ConnId, info: ClientInfo) {
        self.tables
            .write()
            .producers
            .entry(group.to_owned())
            .or_default()
            .insert(conn, info);
    }

    pub fn unregister_producer(&self, group: &str, conn: ConnId) {
        let mut t = self.tables.write();
        if let Some(members) = t.producers.get_mut(group) {
            members.remove(&conn);
            if members.is_empty() {
                t.producers.remove(group);
            }
        }
    }

    /// `ConsumerManager.registerConsumer`: returns true when the group's member set
    /// changed (new member), which must be announced to every member.
    pub fn register_consumer(&self, data: &ConsumerData, conn: ConnId, info: ClientInfo) -> bool {
        let mut t = self.tables.write();
        let group = t
            .consumers
            .entry(data.group_name.clone())
            .or_insert_with(|| ConsumerGroupInfo {
                consume_type: data.consume_type,
                message_model: data.message_model,
                consume_from_where: data.consume_from_where,
                subscriptions: BTreeMap::new(),
                members: HashMap::new(),
            });
        group.consume_type = data.consume_type;
        group.message_model = data.message_model;
        group.consume_from_where = data.consume_from_where;
        let is_new = group.members.insert(conn, info).is_none();
        // `updateSubscription`: keep an unchanged subscription's version, replace changed
        // ones and drop topics the client no longer subscribes to.
        let mut next = BTreeMap::new();
        for sub in &data.subscription_data_set {
            let keep = group.subscriptions.get(&sub.topic).filter(|old| {
                old.sub_string == sub.sub_string && old.sub_version >= sub.sub_version
            });
            next.insert(
                sub.topic.clone(),
                keep.cloned().unwrap_or_else(|| sub.clone()),
            );
        }
        group.subscriptions = next;
        is_new
    }

    /// Removes `conn` from the consumer group; true when it was a member.
    pub fn unregister_consumer(&self, group: &str, conn: ConnId) -> bool {
        let mut t = self.tables.write();
        let Some(info) = t.consumers.get_mut(group) else {
            return false;
        };
        let removed = info.members.remove(&conn).is_some();
        if info.members.is_empty() {
            t.consumers.remove(group);
        }
        removed
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

    /// A live connection of the producer group, the one that heart-beat last
    /// (`ProducerManager.getAvailableChannel`; the newest is the likeliest to be alive).
    pub fn producer_channel(&self, group: &str) -> Option<Channel> {
        let t = self.tables.read();
        let members = t.producers.get(group)?;
        let mut by_recency: Vec<_> = members.iter().collect();
        by_recency.sort_by_key(|(_, info)| std::cmp::Reverse(info.last_update));
        by_recency.into_iter().find_map(|(conn, _)| {
            t.channels
                .get(conn)
                .filter(|c| !c.close.is_cancelled())
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
        t.producers.retain(|_, members| {
            members.remove(&conn);
            !members.is_empty()
        });
        let mut left = Vec::new();
        t.consumers.retain(|group, info| {
            if info.members.remove(&conn).is_some() {
                left.push(group.clone());
            }
            !info.members.is_empty()
        });
        left
    }

    /// Channels whose last heartbeat (as producer or consumer) is older than `expiry`.
    pub fn expired_channels(&self, now: Instant, expiry: Duration) -> Vec<Channel> {
        let t = self.tables.read();
        let mut stale: HashMap<ConnId, bool> = HashMap::new();
        let members = t
            .producers
            .values()
            .flat_map(|m| m.iter())
            .chain(t.consumers.values().flat_map(|g| g.members.iter()));
        for (conn, info) in members {
            let expired = now.saturating_duration_since(info.last_update) > expiry;
            let entry = stale.entry(*conn).or_insert(true);
            *entry &= expired;
        }
        stale
            .into_iter()
            .filter(|(_, expired)| *expired)
            .filter_map(|(c, _)| t.channels.get(&c).cloned())
            .collect()
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
mod tests {
    use super::*;

    fn channel(id: ConnId) -> (Channel, mpsc::Receiver<RemotingCommand>) {
        let (tx, rx) = mpsc::channel(4);
        let ch = Channel {
            id,
            peer: SocketAddr::from(([127, 0, 0, 1], 1000 + id as u16)),
            outbound: tx,
            close: CancellationToken::new(),
        };
        (ch, rx)
    }

    fn consumer(group: &str, topic: &str, expr: &str, version: i64) -> ConsumerData {
        ConsumerData {
            group_name: group.into(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            subscription_data_set: vec![SubscriptionData {
                class_filter_mode: false,
                topic: topic.into(),
                sub_string: expr.into(),
                tags_set: Default::default(),
                code_set: Default::default(),
                sub_version: version,
                expression_type: "TAG".into(),
            }],
            unit_mode: false,
        }
    }

    fn info(id: &str, at: Instant) -> ClientInfo {
        ClientInfo {
            client_id: id.into(),
            language: LanguageCode::Java,
            version: 409,
            last_update: at,
        }
    }

    #[test]
    fn membership_subscriptions_and_expiry() {
        let m = ClientManager::default();
        let now = Instant::now();
        let (c1, _r1) = channel(1);
        let (c2, _r2) = channel(2);
        m.add_channel(c1);
        m.add_channel(c2);
        assert!(m.register_consumer(&consumer("g", "T", "*", 1), 1, info("a", now)));
        assert!(!m.register_consumer(&consumer("g", "T", "*", 1), 1, info("a", now)));
        assert!(m.register_consumer(&consumer("g", "T", "TagA", 2), 2, info("b", now)));
        assert_eq!(m.consumer_ids("g"), vec!["a", "b"]);
        assert_eq!(m.subscription("g", "T").unwrap().sub_string, "TagA");
        assert_eq!(m.consumer_channels("g").len(), 2);
        m.register_producer("pg", 2, info("b", now));
        let later = now + Duration::from_secs(121);
        assert_eq!(m.expired_channels(later, Duration::from_secs(120)).len(), 2);
        m.register_producer("pg", 2, info("b", later));
        let expired = m.expired_channels(later, Duration::from_secs(120));
        assert_eq!(expired.iter().map(|c| c.id).collect::<Vec<_>>(), vec![1]);
        assert_eq!(m.remove_channel(1), vec!["g"]);
        assert_eq!(m.consumer_ids("g"), vec!["b"]);
        assert!(m.unregister_consumer("g", 2));
        assert!(m.consumer_group("g").is_none());
        assert_eq!(m.producer_group_names(), vec!["pg"]);
    }
}
