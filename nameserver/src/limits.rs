//! Bounds of the tables a peer fills by what it sends: the route table (REGISTER_BROKER)
//! and the KV table (PUT_KV_CONFIG). With `aclEnable=false`, RocketMQ 4.9's default,
//! any peer reaching the remoting port may send both, so every table keyed by their
//! content has a cap here; none of these keys is a RocketMQ key.
//!
//! A cap refuses what would pass it and never evicts a live entry to make room; the
//! tables shrink when their owners go (a broker's connection closes or it expires, a KV
//! entry is deleted).

use std::time::Duration;

/// `maxBrokers`: live broker addresses, and also address entries of brokerData and
/// (brokerName, cluster) memberships, each of which a registration may add one of.
pub const MAX_BROKERS: &str = "maxBrokers";
/// `maxRouteTopics`: distinct topics with route data.
pub const MAX_ROUTE_TOPICS: &str = "maxRouteTopics";
/// `maxQueueDatas`: (topic, brokerName) pairs, the QueueData entries of every route.
pub const MAX_QUEUE_DATAS: &str = "maxQueueDatas";
/// `maxFilterServersPerBroker`: the filter server list of one registration.
pub const MAX_FILTER_SERVERS_PER_BROKER: &str = "maxFilterServersPerBroker";
/// `maxNameLength`: cluster and broker names, addresses and topic names of a
/// registration.
pub const MAX_NAME_LENGTH: &str = "maxNameLength";
/// `maxMasterEpochs`: broker names whose newest master epoch is remembered.
pub const MAX_MASTER_EPOCHS: &str = "maxMasterEpochs";
/// `masterEpochRetentionMillis`: how long an epoch is kept after the last broker of its
/// name went.
pub const MASTER_EPOCH_RETENTION_MILLIS: &str = "masterEpochRetentionMillis";
/// `maxKvEntries`: entries of the KV table, all namespaces together.
pub const MAX_KV_ENTRIES: &str = "maxKvEntries";
/// `maxKvBytes`: namespace + key + value bytes of every KV entry together.
pub const MAX_KV_BYTES: &str = "maxKvBytes";
/// `maxKvKeyLength`: the namespace and the key of one PUT_KV_CONFIG.
pub const MAX_KV_KEY_LENGTH: &str = "maxKvKeyLength";
/// `maxKvValueLength`: the value of one PUT_KV_CONFIG.
pub const MAX_KV_VALUE_LENGTH: &str = "maxKvValueLength";
/// `maxRegisterBodyBytes` (in `crate::config`), counted with the others.
pub const MAX_REGISTER_BODY_BYTES: &str = "maxRegisterBodyBytes";

/// A request refused by a limit: the config key and what would have passed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRefusal {
    pub key: &'static str,
    pub detail: String,
}

impl LimitRefusal {
    pub fn new(key: &'static str, detail: impl Into<String>) -> Self {
        Self {
            key,
            detail: detail.into(),
        }
    }

    /// The remark answered to the peer; it always names the key.
    pub fn remark(&self) -> String {
        if self.detail.contains(self.key) {
            self.detail.clone()
        } else {
            format!("{} ({})", self.detail, self.key)
        }
    }
}

/// Bounds of [`crate::route_table::RouteTable`].
#[derive(Debug, Clone, PartialEq)]
pub struct RouteLimits {
    pub max_brokers: usize,
    pub max_route_topics: usize,
    pub max_queue_datas: usize,
    pub max_filter_servers_per_broker: usize,
    pub max_name_length: usize,
    pub max_master_epochs: usize,
    pub master_epoch_retention: Duration,
}

impl Default for RouteLimits {
    fn default() -> Self {
        Self {
            // Large clusters run hundreds of broker processes; each costs ~2 KiB here
            // plus its topics, which the two caps below bound.
            max_brokers: 4096,
            // A cluster of 100k topics fits twice over; QueueData entries are the bulk
            // (a topic on ten broker groups is ten). Each costs ~100 bytes plus its
            // names, so the worst case (255-byte names) is well under 1 GiB.
            max_route_topics: 200_000,
            max_queue_datas: 1_000_000,
            // Filter servers are deprecated since 4.x; brokers start a handful at most.
            max_filter_servers_per_broker: 16,
            // `Validators.CHARACTER_MAX_LENGTH`; topics are at most 127 since 4.7.
            max_name_length: 255,
            max_master_epochs: 4096,
            master_epoch_retention: Duration::from_secs(24 * 3600),
        }
    }
}

/// Bounds of [`crate::kv_config::KvConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct KvLimits {
    pub max_entries: usize,
    pub max_bytes: usize,
    pub max_key_length: usize,
    pub max_value_length: usize,
}

impl Default for KvLimits {
    fn default() -> Self {
        Self {
            // ORDER_TOPIC_CONFIG holds one entry per ordered topic ("broker-a:8;...").
            max_entries: 100_000,
            max_bytes: 16 * 1024 * 1024,
            max_key_length: 255,
            max_value_length: 64 * 1024,
        }
    }
}

/// Both table bounds, as `namesrv.conf` sets them. None may change at run time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableLimits {
    pub route: RouteLimits,
    pub kv: KvLimits,
}

impl TableLimits {
    /// Every key this block owns.
    pub const KEYS: &'static [&'static str] = &[
        MAX_BROKERS,
        MAX_ROUTE_TOPICS,
        MAX_QUEUE_DATAS,
        MAX_FILTER_SERVERS_PER_BROKER,
        MAX_NAME_LENGTH,
        MAX_MASTER_EPOCHS,
        MASTER_EPOCH_RETENTION_MILLIS,
        MAX_KV_ENTRIES,
        MAX_KV_BYTES,
        MAX_KV_KEY_LENGTH,
        MAX_KV_VALUE_LENGTH,
    ];

    /// Applies `key=value`; `None` when the value is not valid for the key (or the key
    /// is not one of [`Self::KEYS`]).
    pub fn set(&mut self, key: &str, value: &str) -> Option<()> {
        let at_least = |min: usize| value.parse::<usize>().ok().filter(|n| *n >= min);
        let (r, kv) = (&mut self.route, &mut self.kv);
        match key {
            MAX_BROKERS => r.max_brokers = at_least(1)?,
            MAX_ROUTE_TOPICS => r.max_route_topics = at_least(1)?,
            MAX_QUEUE_DATAS => r.max_queue_datas = at_least(1)?,
            MAX_FILTER_SERVERS_PER_BROKER => r.max_filter_servers_per_broker = at_least(0)?,
            // A broker named by its host needs room for a host name.
            MAX_NAME_LENGTH => r.max_name_length = at_least(16)?,
            MAX_MASTER_EPOCHS => r.max_master_epochs = at_least(1)?,
            MASTER_EPOCH_RETENTION_MILLIS => {
                r.master_epoch_retention = Duration::from_millis(value.parse().ok()?)
            }
            MAX_KV_ENTRIES => kv.max_entries = at_least(1)?,
            MAX_KV_BYTES => kv.max_bytes = at_least(1024)?,
            MAX_KV_KEY_LENGTH => kv.max_key_length = at_least(16)?,
            MAX_KV_VALUE_LENGTH => kv.max_value_length = at_least(16)?,
            _ => return None,
        }
        Some(())
    }

    /// Every key with its effective value.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let (r, kv) = (&self.route, &self.kv);
        vec![
            (MAX_BROKERS, r.max_brokers.to_string()),
            (MAX_ROUTE_TOPICS, r.max_route_topics.to_string()),
            (MAX_QUEUE_DATAS, r.max_queue_datas.to_string()),
            (
                MAX_FILTER_SERVERS_PER_BROKER,
                r.max_filter_servers_per_broker.to_string(),
            ),
            (MAX_NAME_LENGTH, r.max_name_length.to_string()),
            (MAX_MASTER_EPOCHS, r.max_master_epochs.to_string()),
            (
                MASTER_EPOCH_RETENTION_MILLIS,
                r.master_epoch_retention.as_millis().to_string(),
            ),
            (MAX_KV_ENTRIES, kv.max_entries.to_string()),
            (MAX_KV_BYTES, kv.max_bytes.to_string()),
            (MAX_KV_KEY_LENGTH, kv.max_key_length.to_string()),
            (MAX_KV_VALUE_LENGTH, kv.max_value_length.to_string()),
        ]
    }
}

/// A cluster or broker name: 1 to `max` characters of `[%|A-Za-z0-9_.-]`. This is
/// `TopicValidator`'s topic charset (both names are topics on the brokers) plus `.`,
/// because 4.9's default `brokerName` is the host name.
pub fn check_broker_name(what: &str, name: &str, max: usize) -> Result<(), LimitRefusal> {
    if name.trim().is_empty() {
        return Err(LimitRefusal::new(
            MAX_NAME_LENGTH,
            format!("the {what} is blank"),
        ));
    }
    check_length(what, name, max)?;
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-' | b'.'))
    {
        return Err(LimitRefusal::new(
            MAX_NAME_LENGTH,
            format!("the {what} contains illegal characters, allowing only ^[%|a-zA-Z0-9_.-]+$"),
        ));
    }
    Ok(())
}

/// At most `max` bytes.
pub fn check_length(what: &str, value: &str, max: usize) -> Result<(), LimitRefusal> {
    if value.len() > max {
        return Err(LimitRefusal::new(
            MAX_NAME_LENGTH,
            format!(
                "the {what} is {} bytes, longer than maxNameLength {max}",
                value.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_print() {
        let mut l = TableLimits::default();
        for key in TableLimits::KEYS {
            assert_eq!(l.set(key, "100000"), Some(()), "{key}");
            assert_eq!(l.set(key, "x"), None, "{key}");
        }
        assert_eq!(l.set("maxNameLength", "3"), None);
        assert_eq!(l.set("maxFilterServersPerBroker", "0"), Some(()));
        assert_eq!(l.set("other", "1"), None);
        let printed = l.entries();
        assert_eq!(printed.len(), TableLimits::KEYS.len());
        assert!(printed.contains(&("maxFilterServersPerBroker", "0".into())));
        assert!(printed.contains(&("masterEpochRetentionMillis", "100000".into())));
    }

    #[test]
    fn broker_names_follow_the_topic_charset_plus_dots() {
        assert!(check_broker_name("brokerName", "broker-a", 255).is_ok());
        assert!(check_broker_name("brokerName", "ip-10-0-0-1.ec2.internal", 255).is_ok());
        assert!(check_broker_name("brokerName", "%|_x", 255).is_ok());
        for bad in ["", " ", "a b", "a/b", "a\nb", "é"] {
            let e = check_broker_name("brokerName", bad, 255).unwrap_err();
            assert_eq!(e.key, MAX_NAME_LENGTH, "{bad:?}");
        }
        let e = check_broker_name("clusterName", &"a".repeat(256), 255).unwrap_err();
        assert!(e.remark().contains("maxNameLength"), "{}", e.remark());
        assert!(check_broker_name("clusterName", &"a".repeat(255), 255).is_ok());
    }
}
