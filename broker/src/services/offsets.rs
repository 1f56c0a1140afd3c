//! Committed consumer offsets (`ConsumerOffsetManager`): `topic@group` → queue → offset,
//! persisted to `consumerOffset.json` periodically and on shutdown.
//!
//! Offsets are in force in memory first, as in RocketMQ: a consumer's commit is durable
//! only at the next periodic flush. A request that must answer only once its offsets are
//! on disk (INVOKE_BROKER_TO_RESET_OFFSET) awaits [`OffsetManager::durable`]: a rewrite on
//! the file's writer thread, shared by every such request in flight. When it fails the
//! request is refused while the offsets stay in force, and dirty, so the periodic flush
//! writes them once the disk recovers.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use protocol::message::ConsumerOffset;
use serde::Deserialize;
use store::config_files::{
    ConfigFile, ConfigFileError, ConfigState, ConfigWriter, Durable, consumer_offset_path,
};
use store::fs::{OsFs, StoreFs};

use crate::services::pending_resets::PendingResets;

/// `maxPendingOffsetResets`' default, for managers opened without the broker config.
const DEFAULT_PENDING_RESETS: usize = 100_000;

type Table = BTreeMap<String, BTreeMap<i32, ConsumerOffset>>;

pub struct OffsetManager {
    table: Arc<OffsetTable>,
    file: ConfigFile,
    /// Rewrites for requests that wait until their offsets are on disk.
    writer: ConfigWriter<OffsetTable>,
    /// Set by commits, cleared by a persist: the periodic flush skips clean tables.
    dirty: AtomicBool,
    /// Resets the broker still enforces on pulls (5.x's `resetOffsetTable`).
    resets: PendingResets,
}

/// The live table, shared with the writer thread.
struct OffsetTable(RwLock<Table>);

impl ConfigState for OffsetTable {
    /// Nothing is staged: offsets are in force before they are written.
    type Change = Infallible;

    fn render(&self, _: &[Infallible]) -> Vec<u8> {
        encode(&self.0.read()).into_bytes()
    }

    fn apply(&self, _: Vec<Infallible>) {}
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default, rename = "offsetTable")]
    offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl OffsetManager {
    pub fn open(store_root: &Path) -> Result<Self, ConfigFileError> {
        Self::open_with_fs(store_root, Arc::new(OsFs))
    }

    /// [`Self::open`] writing through `fs` (the store's file system).
    pub fn open_with_fs(store_root: &Path, fs: Arc<dyn StoreFs>) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::with_fs(consumer_offset_path(store_root), fs);
        let table = file
            .load_with("consumerOffset.json", |text| {
                protocol::body::decode::<Wire>(text.as_bytes()).map_err(|e| e.to_string())
            })?
            .map(|w| {
                w.offset_table
                    .into_iter()
                    .map(|(k, q)| {
                        (
                            k,
                            q.into_iter()
                                .map(|(id, o)| (id, ConsumerOffset(o)))
                                .collect(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let table = Arc::new(OffsetTable(RwLock::new(table)));
        let writer = ConfigWriter::spawn(file.clone(), Arc::clone(&table))?;
        Ok(Self {
            table,
            file,
            writer,
            dirty: AtomicBool::new(false),
            resets: PendingResets::new(DEFAULT_PENDING_RESETS),
        })
    }

    /// Bounds the pending resets (`maxPendingOffsetResets`).
    pub fn with_reset_capacity(mut self, capacity: usize) -> Self {
        self.resets = PendingResets::new(capacity);
        self
    }

    /// The resets still enforced on the groups' pulls and commits.
    pub fn resets(&self) -> &PendingResets {
        &self.resets
    }

    fn read(&self) -> RwLockReadGuard<'_, Table> {
        self.table.0.read()
    }

    fn write(&self) -> RwLockWriteGuard<'_, Table> {
        self.table.0.write()
    }

    pub fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: ConsumerOffset) {
        self.write()
            .entry(key(topic, group))
            .or_default()
            .insert(queue_id, offset);
        self.dirty.store(true, Ordering::Release);
    }

    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<ConsumerOffset> {
        self.read()
            .get(&key(topic, group))
            .and_then(|q| q.get(&queue_id).copied())
    }

    /// Every `(topic, queue → offset)` the group has committed.
    pub fn topics_of_group(&self, group: &str) -> Vec<(String, BTreeMap<i32, ConsumerOffset>)> {
        self.read()
            .iter()
            .filter_map(|(k, q)| {
                let (topic, g) = k.rsplit_once('@')?;
                (g == group).then(|| (topic.to_owned(), q.clone()))
            })
            .collect()
    }

    /// Groups with committed offsets on `topic`.
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        self.read()
            .keys()
            .filter_map(|k| {
                let (t, g) = k.rsplit_once('@')?;
                (t == topic).then(|| g.to_owned())
            })
            .collect()
    }

    pub fn remove_group(&self, group: &str) {
        let suffix = format!("@{group}");
        self.write().retain(|k, _| !k.ends_with(&suffix));
        self.resets.remove_group(group);
        self.dirty.store(true, Ordering::Release);
    }

    pub fn remove_topic(&self, topic: &str) {
        let prefix = format!("{topic}@");
        self.write().retain(|k, _| !k.starts_with(&prefix));
        self.resets.remove_topic(topic);
        self.dirty.store(true, Ordering::Release);
    }

    /// fastjson's shape: `{"offsetTable":{"t@g":{0:5,1:7}}}` with unquoted queue ids.
    pub fn encode(&self) -> String {
        encode(&self.read())
    }

    /// Completes once a rewrite of the table as it is now (every commit made before this
    /// call) is on disk, or failed. The rewrite runs on the file's writer thread and
    /// leaves the table dirty, so a failure is retried by the periodic flush.
    pub fn durable(&self) -> Durable {
        self.writer.sync()
    }

    /// Writes the table now (the periodic flush and shutdown; blocks, so never on an
    /// async worker).
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.dirty.store(false, Ordering::Release);
        let text = self.encode();
        self.file.persist_text(&text).inspect_err(|_| {
            self.dirty.store(true, Ordering::Release);
        })
    }

    pub fn persist_if_dirty(&self) -> Result<(), ConfigFileError> {
        if self.dirty.load(Ordering::Acquire) {
            self.persist()?;
        }
        Ok(())
    }
}

fn encode(table: &Table) -> String {
    let mut out = String::from("{\"offsetTable\":{");
    for (n, (k, queues)) in table.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::String(k.clone()).to_string());
        out.push_str(":{");
        for (m, (q, o)) in queues.iter().enumerate() {
            if m > 0 {
                out.push(',');
            }
            let _ = write!(out, "{q}:{o}");
        }
        out.push('}');
    }
    out.push_str("}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_query_persist_reload() {
        let dir = tempfile::tempdir().unwrap();
        let m = OffsetManager::open(dir.path()).unwrap();
        m.commit("g", "T", 0, ConsumerOffset(5));
        m.commit("g", "T", 3, ConsumerOffset(9));
        m.commit("h", "T", 0, ConsumerOffset(1));
        assert_eq!(m.query("g", "T", 3), Some(ConsumerOffset(9)));
        assert_eq!(m.query("g", "T", 1), None);
        assert_eq!(
            m.encode(),
            r#"{"offsetTable":{"T@g":{0:5,3:9},"T@h":{0:1}}}"#
        );
        m.persist_if_dirty().unwrap();
        let again = OffsetManager::open(dir.path()).unwrap();
        assert_eq!(again.query("g", "T", 0), Some(ConsumerOffset(5)));
        let mut groups = again.groups_of_topic("T");
        groups.sort();
        assert_eq!(groups, vec!["g", "h"]);
        again.remove_group("g");
        assert_eq!(again.topics_of_group("g").len(), 0);
        assert_eq!(again.topics_of_group("h")[0].0, "T");
    }

    #[test]
    fn reads_java_pretty_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(
            dir.path().join("config/consumerOffset.json"),
            "{\n\t\"offsetTable\":{\n\t\t\"%RETRY%g@g\":{0:0\n\t\t},\n\t\t\"T@g\":{0:12,1:7\n\t\t}\n\t}\n}",
        )
        .unwrap();
        let m = OffsetManager::open(dir.path()).unwrap();
        assert_eq!(m.query("g", "T", 1), Some(ConsumerOffset(7)));
        assert_eq!(m.query("g", "%RETRY%g", 0), Some(ConsumerOffset(0)));
    }
}
