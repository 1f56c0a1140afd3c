//! Subscription group configs (`SubscriptionGroupManager`): auto-created on first use
//! when `autoCreateSubscriptionGroup` is on, persisted to `subscriptionGroup.json`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use protocol::body::DataVersion;
use store::config_files::{
    ConfigFile, ConfigFileError, DeferredPersist, SubscriptionGroupConfig, SubscriptionGroupTable,
    subscription_group_path,
};
use store::fs::{OsFs, StoreFs};

use crate::names;
use crate::now_ms;

pub struct GroupManager {
    table: Arc<RwLock<SubscriptionGroupTable>>,
    file: ConfigFile,
    /// Persists of groups auto-created on request paths, coalesced off the async workers.
    deferred: DeferredPersist,
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
        Self::open_with_fs(store_root, Arc::new(OsFs))
    }

    /// [`Self::open`] writing through `fs` (the store's file system).
    pub fn open_with_fs(store_root: &Path, fs: Arc<dyn StoreFs>) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::with_fs(subscription_group_path(store_root), fs);
        let mut table = file
            .load_with("subscriptionGroup.json", |text| {
                protocol::body::decode::<SubscriptionGroupTable>(text.as_bytes())
                    .map_err(|e| e.to_string())
            })?
            .unwrap_or_else(|| SubscriptionGroupTable {
                data_version: DataVersion::new(now_ms()),
                ..SubscriptionGroupTable::default()
            });
        for name in DEFAULT_GROUPS {
            table
                .subscription_group_table
                .entry((*name).to_owned())
                .or_insert_with(|| SubscriptionGroupConfig {
                    group_name: (*name).to_owned(),
                    ..SubscriptionGroupConfig::default()
                });
        }
        let table = Arc::new(RwLock::new(table));
        let snapshot_of = Arc::clone(&table);
        let deferred = DeferredPersist::spawn(
            file.clone(),
            Box::new(move || protocol::body::encode(&*snapshot_of.read())),
        )?;
        Ok(Self {
            table,
            file,
            deferred,
        })
    }

    pub fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.table
            .read()
            .subscription_group_table
            .get(group)
            .cloned()
    }

    /// `findSubscriptionGroupConfig`: the group's config, created with defaults when
    /// `auto_create` (autoCreateSubscriptionGroup) is on or the group is a system group.
    /// A name that is not a valid group name (`Validators.checkGroup`, which 4.9 only
    /// applies in clients) is never created. The new group reaches disk through the
    /// deferred persist.
    pub fn find_or_create(
        &self,
        group: &str,
        auto_create: bool,
    ) -> Option<SubscriptionGroupConfig> {
        if let Some(g) = self.get(group) {
            return Some(g);
        }
        if !auto_create && !group.starts_with(names::CID_RMQ_SYS_PREFIX) {
            return None;
        }
        if names::validate_group(group).is_err() {
            return None;
        }
        let config = SubscriptionGroupConfig {
            group_name: group.to_owned(),
            ..SubscriptionGroupConfig::default()
        };
        {
            let mut t = self.table.write();
            t.subscription_group_table
                .entry(group.to_owned())
                .or_insert_with(|| config.clone());
            t.data_version = t.data_version.next(now_ms());
        }
        tracing::info!(group, "subscription group created");
        self.deferred.mark_dirty();
        Some(config)
    }

    pub fn upsert(&self, config: SubscriptionGroupConfig) -> Result<(), ConfigFileError> {
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

    pub fn snapshot(&self) -> SubscriptionGroupTable {
        self.table.read().clone()
    }

    /// Writes `subscriptionGroup.json` now, from a snapshot taken under the file's
    /// persist lock.
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.file
            .persist_with(|| protocol::body::encode(&*self.table.read()))
    }

    /// Waits until auto-created groups are on disk; `true` when they are.
    pub fn flush_created(&self, within: Duration) -> bool {
        self.deferred.flush(within)
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
        assert!(off.flush_created(Duration::from_secs(10)));
        let on = GroupManager::open(dir.path()).unwrap();
        assert!(
            on.get("CID_RMQ_SYS_TRANS").is_some(),
            "persisted by the first manager"
        );
        let g = on.find_or_create("g1", true).unwrap();
        assert_eq!((g.retry_queue_nums, g.retry_max_times), (1, 16));
        on.upsert(SubscriptionGroupConfig {
            group_name: "g2".into(),
            retry_max_times: 3,
            ..SubscriptionGroupConfig::default()
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
