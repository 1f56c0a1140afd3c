//! Subscription group configs (`SubscriptionGroupManager`): auto-created on first use
//! when `autoCreateSubscriptionGroup` is on, persisted to `subscriptionGroup.json`.

use std::collections::BTreeMap;
use std::path::Path;

use parking_lot::RwLock;
use protocol::body::DataVersion;
use serde::{Deserialize, Serialize};

use crate::config_file::{ConfigFile, ConfigFileError};
use crate::names;
use crate::now_ms;

/// `SubscriptionGroupConfig` with its Java defaults; fields in fastjson's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GroupConfig {
    pub broker_id: i64,
    pub consume_broadcast_enable: bool,
    pub consume_enable: bool,
    pub consume_from_min_enable: bool,
    pub group_name: String,
    pub notify_consumer_ids_changed_enable: bool,
    pub retry_max_times: i32,
    pub retry_queue_nums: i32,
    pub which_broker_when_consume_slowly: i64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            group_name: String::new(),
            notify_consumer_ids_changed_enable: true,
            retry_max_times: 16,
            retry_queue_nums: 1,
            which_broker_when_consume_slowly: 1,
        }
    }
}

/// `subscriptionGroup.json` / GET_ALL_SUBSCRIPTIONGROUP_CONFIG body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GroupTable {
    pub data_version: DataVersion,
    pub subscription_group_table: BTreeMap<String, GroupConfig>,
}

pub struct GroupManager {
    table: RwLock<GroupTable>,
    file: ConfigFile,
}

/// Groups `SubscriptionGroupManager.init` always has (all with default settings; the
/// `CID_ONS*` ones set broadcast explicitly, which is the default anyway).
const DEFAULT_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
];

impl GroupManager {
    pub fn open(store_root: &Path) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::new(store_root.join("config").join("subscriptionGroup.json"));
        let mut table = file
            .load(|b| protocol::body::decode::<GroupTable>(b).map_err(|e| e.to_string()))?
            .unwrap_or_else(|| GroupTable {
                data_version: DataVersion::new(now_ms()),
                ..GroupTable::default()
            });
        for name in DEFAULT_GROUPS {
            table
                .subscription_group_table
                .entry((*name).to_owned())
                .or_insert_with(|| GroupConfig {
                    group_name: (*name).to_owned(),
                    ..GroupConfig::default()
                });
        }
        Ok(Self {
            table: RwLock::new(table),
            file,
        })
    }

    pub fn get(&self, group: &str) -> Option<GroupConfig> {
        self.table
            .read()
            .subscription_group_table
            .get(group)
            .cloned()
    }

    /// `findSubscriptionGroupConfig`: the group's config, created with defaults when
    /// `auto_create` (autoCreateSubscriptionGroup) is on or the group is a system group.
    pub fn find_or_create(&self, group: &str, auto_create: bool) -> Option<GroupConfig> {
        if let Some(g) = self.get(group) {
            return Some(g);
        }
        if !auto_create && !group.starts_with(names::CID_RMQ_SYS_PREFIX) {
            return None;
        }
        let config = GroupConfig {
            group_name: group.to_owned(),
            ..GroupConfig::default()
        };
        {
            let mut t = self.table.write();
            t.subscription_group_table
                .entry(group.to_owned())
                .or_insert_with(|| config.clone());
            t.data_version = t.data_version.next(now_ms());
        }
        tracing::info!(group, "subscription group created");
        if let Err(e) = self.persist() {
            tracing::error!(error = %e, "cannot persist subscriptionGroup.json");
        }
        Some(config)
    }

    pub fn upsert(&self, config: GroupConfig) -> Result<(), ConfigFileError> {
        {
            let mut t = self.table.write();
            t.subscription_group_table
                .insert(config.group_name.clone(), config);
            t.data_version = t.data_version.next(now_ms());
        }
        self.persist()
    }

    pub fn delete(&self, group: &str) -> Result<bool, ConfigFileError> {
        let removed = {
            let mut t = self.table.write();
            let removed = t.subscription_group_table.remove(group).is_some();
            if removed {
                t.data_version = t.data_version.next(now_ms());
            }
            removed
        };
        if removed {
            self.persist()?;
        }
        Ok(removed)
    }

    pub fn snapshot(&self) -> GroupTable {
        self.table.read().clone()
    }

    pub fn persist(&self) -> Result<(), ConfigFileError> {
        let body = protocol::body::encode(&self.snapshot());
        self.file.persist(&body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_create_rules_and_persistence() {
        let dir = tempfile::tempdir().unwrap();
        let off = GroupManager::open(dir.path()).unwrap();
        assert!(off.find_or_create("g1", false).is_none());
        assert!(off.find_or_create("CID_RMQ_SYS_TRANS", false).is_some());
        assert!(off.get("TOOLS_CONSUMER").is_some());
        let on = GroupManager::open(dir.path()).unwrap();
        assert!(
            on.get("CID_RMQ_SYS_TRANS").is_some(),
            "persisted by the first manager"
        );
        let g = on.find_or_create("g1", true).unwrap();
        assert_eq!((g.retry_queue_nums, g.retry_max_times), (1, 16));
        on.upsert(GroupConfig {
            group_name: "g2".into(),
            retry_max_times: 3,
            ..GroupConfig::default()
        })
        .unwrap();
        assert!(on.delete("g1").unwrap());
        let again = GroupManager::open(dir.path()).unwrap();
        assert_eq!(again.get("g2").unwrap().retry_max_times, 3);
        assert!(again.get("g1").is_none());
        let text =
            std::fs::read_to_string(dir.path().join("config/subscriptionGroup.json")).unwrap();
        assert!(text.contains("\"retryMaxTimes\":3"), "{text}");
    }
}
