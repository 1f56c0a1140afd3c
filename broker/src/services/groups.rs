//! Subscription group configs (`SubscriptionGroupManager`): auto-created on first use
//! when `autoCreateSubscriptionGroup` is on, persisted to `subscriptionGroup.json`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use protocol::body::DataVersion;
use store::config_files::{
    ConfigFile, ConfigFileError, ConfigState, ConfigWriter, Durable, SubscriptionGroupConfig,
    SubscriptionGroupTable, subscription_group_path,
};
use store::fs::{OsFs, StoreFs};

use crate::metrics::limits::Refusals;
use crate::names;
use crate::now_ms;

/// `subscriptionGroup.json` is rewritten by a [`ConfigWriter`] thread: groups
/// auto-created on request paths are in force at once and written soon after; admin
/// changes (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP, a slave's
/// sync) are in force, and answered, only once a rewrite carrying them succeeded, and
/// refused (not applied) when it failed.
/// The key of the group table's cap.
pub const MAX_GROUPS_KEY: &str = "maxSubscriptionGroups";

pub struct GroupManager {
    groups: Arc<Groups>,
    file: ConfigFile,
    writer: ConfigWriter<Groups>,
    /// `maxSubscriptionGroups`: past it no group is auto-created or created by an admin.
    max_groups: usize,
    refusals: Refusals,
}

/// The live table, shared with the writer thread.
struct Groups {
    table: RwLock<SubscriptionGroupTable>,
}

/// An admin change of the table.
pub enum GroupChange {
    Upsert(SubscriptionGroupConfig),
    Delete(String),
}

fn apply(table: &mut SubscriptionGroupTable, change: &GroupChange) {
    let changed = match change {
        GroupChange::Upsert(config) => {
            table
                .subscription_group_table
                .insert(config.group_name.clone(), config.clone());
            true
        }
        GroupChange::Delete(group) => table.subscription_group_table.remove(group).is_some(),
    };
    if changed {
        table.data_version = table.data_version.next(now_ms());
    }
}

impl ConfigState for Groups {
    type Change = GroupChange;

    fn render(&self, staged: &[GroupChange]) -> Vec<u8> {
        if staged.is_empty() {
            return protocol::body::encode(&*self.table.read());
        }
        let mut table = self.table.read().clone();
        for change in staged {
            apply(&mut table, change);
        }
        protocol::body::encode(&table)
    }

    fn apply(&self, written: Vec<GroupChange>) {
        let mut table = self.table.write();
        for change in &written {
            apply(&mut table, change);
        }
    }
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
        let groups = Arc::new(Groups {
            table: RwLock::new(table),
        });
        let writer = ConfigWriter::spawn(file.clone(), Arc::clone(&groups))?;
        Ok(Self {
            groups,
            file,
            writer,
            max_groups: usize::MAX,
            refusals: Refusals::default(),
        })
    }

    /// Caps the table at `max` groups (`maxSubscriptionGroups`), counting auto-creations
    /// refused by it in `refusals`.
    pub fn with_max_groups(self, max: usize, refusals: Refusals) -> Self {
        Self {
            max_groups: max,
            refusals,
            ..self
        }
    }

    /// Whether `maxSubscriptionGroups` is reached: a new group would pass it.
    pub fn is_full(&self) -> bool {
        self.groups.table.read().subscription_group_table.len() >= self.max_groups
    }

    /// `maxSubscriptionGroups`.
    pub fn max_groups(&self) -> usize {
        self.max_groups
    }

    pub fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.groups
            .table
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
        if self.is_full() {
            self.refusals.count(MAX_GROUPS_KEY);
            return None;
        }
        let config = SubscriptionGroupConfig {
            group_name: group.to_owned(),
            ..SubscriptionGroupConfig::default()
        };
        {
            let mut t = self.groups.table.write();
            t.subscription_group_table
                .entry(group.to_owned())
                .or_insert_with(|| config.clone());
            t.data_version = t.data_version.next(now_ms());
        }
        tracing::info!(group, "subscription group created");
        self.writer.mark_dirty();
        Some(config)
    }

    /// Inserts or replaces a group once the returned future reports it written.
    pub fn upsert(&self, config: SubscriptionGroupConfig) -> Durable {
        self.writer.commit(GroupChange::Upsert(config))
    }

    /// Removes a group (absent: nothing changes) once the returned future reports the
    /// table without it written.
    pub fn delete(&self, group: &str) -> Durable {
        self.writer.commit(GroupChange::Delete(group.to_owned()))
    }

    pub fn snapshot(&self) -> SubscriptionGroupTable {
        self.groups.table.read().clone()
    }

    /// Writes `subscriptionGroup.json` now, from a snapshot taken under the file's
    /// persist lock (shutdown; blocks, so never on an async worker).
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.file
            .persist_with(|| protocol::body::encode(&*self.groups.table.read()))
    }

    /// Waits until auto-created groups are on disk; `true` when they are.
    pub fn flush_created(&self, within: Duration) -> bool {
        self.writer.flush(within)
    }
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;

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
        block_on(on.upsert(SubscriptionGroupConfig {
            group_name: "g2".into(),
            retry_max_times: 3,
            ..SubscriptionGroupConfig::default()
        }))
        .unwrap();
        block_on(on.delete("g1")).unwrap();
        assert!(on.get("g1").is_none());
        let again = GroupManager::open(dir.path()).unwrap();
        assert_eq!(again.get("g2").unwrap().retry_max_times, 3);
        assert!(again.get("g1").is_none());
        let text =
            std::fs::read_to_string(dir.path().join("config/subscriptionGroup.json")).unwrap();
        assert!(text.contains("\"retryMaxTimes\":3"), "{text}");
    }
}
