//! Namespaced key/value configuration (`namesrv/kvconfig/KVConfigManager.java`),
//! persisted to `kvConfigPath` in RocketMQ's shape `{"configTable":{ns:{k:v}}}` so a
//! file written by a Java nameserver loads here and the reverse.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, RwLock};
use protocol::body::KvTable;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Namespace holding `topic → "broker-a:4;broker-b:4"` for ordered topics.
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

#[derive(Debug, Error)]
pub enum KvError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid KV config file: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot persist {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KvConfigFile {
    #[serde(default)]
    config_table: Table,
}

type Table = BTreeMap<String, BTreeMap<String, String>>;

/// Internally synchronized: readers never wait for a write's fsync, because writers
/// persist a copy and swap it in afterwards; `writer` serializes the writers.
#[derive(Debug)]
pub struct KvConfig {
    path: PathBuf,
    table: RwLock<Table>,
    writer: Mutex<()>,
}

impl KvConfig {
    /// Loads `path`; a missing file is an empty table, a corrupt one an error (starting
    /// empty would overwrite it on the next put).
    pub fn load(path: &Path) -> Result<Self, KvError> {
        let table = match fs::read(path) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => BTreeMap::new(),
            Ok(bytes) => {
                protocol::body::decode::<KvConfigFile>(&bytes)
                    .map_err(|e| KvError::Corrupt {
                        path: path.to_owned(),
                        reason: e.to_string(),
                    })?
                    .config_table
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(KvError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        Ok(Self {
            path: path.to_owned(),
            table: RwLock::new(table),
            writer: Mutex::new(()),
        })
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        self.table.read().get(namespace)?.get(key).cloned()
    }

    /// The namespace as a `KVTable`, `None` when it is empty or unknown.
    pub fn list(&self, namespace: &str) -> Option<KvTable> {
        self.table
            .read()
            .get(namespace)
            .filter(|t| !t.is_empty())
            .map(|t| KvTable { table: t.clone() })
    }

    /// Sets and persists. The in-memory table is changed only if the file was written.
    pub fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), KvError> {
        let _writer = self.writer.lock();
        let mut next = self.table.read().clone();
        next.entry(namespace.to_owned())
            .or_default()
            .insert(key.to_owned(), value.to_owned());
        self.persist(&next)?;
        *self.table.write() = next;
        Ok(())
    }

    /// Removes and persists; removing an absent key is not an error (Java's behaviour).
    pub fn delete(&self, namespace: &str, key: &str) -> Result<(), KvError> {
        let _writer = self.writer.lock();
        let mut next = self.table.read().clone();
        let Some(ns) = next.get_mut(namespace) else {
            return Ok(());
        };
        if ns.remove(key).is_none() {
            return Ok(());
        }
        self.persist(&next)?;
        *self.table.write() = next;
        Ok(())
    }

    /// Write-to-temp, fsync, rename, fsync the directory: a crash leaves either the old
    /// or the new file, never a torn one.
    fn persist(&self, table: &Table) -> Result<(), KvError> {
        let err = |source| KvError::Write {
            path: self.path.clone(),
            source,
        };
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(err)?;
        let content = protocol::body::encode(&KvConfigFile {
            config_table: table.clone(),
        });
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_owned();
        tmp_name.push(".tmp");
        let tmp = dir.join(tmp_name);
        let mut file = File::create(&tmp).map_err(err)?;
        file.write_all(&content).map_err(err)?;
        file.sync_all().map_err(err)?;
        drop(file);
        fs::rename(&tmp, &self.path).map_err(err)?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persists_and_reloads_in_rocketmq_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("kvConfig.json");
        let kv = KvConfig::load(&path).unwrap();
        kv.put("ns", "k", "v").unwrap();
        kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "T", "broker-a:4")
            .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"},"ns":{"k":"v"}}}"#
        );
        let again = KvConfig::load(&path).unwrap();
        assert_eq!(again.get("ns", "k").as_deref(), Some("v"));
        again.delete("ns", "k").unwrap();
        again.delete("ns", "absent").unwrap();
        assert!(KvConfig::load(&path).unwrap().list("ns").is_none());
        assert!(again.list(NAMESPACE_ORDER_TOPIC_CONFIG).is_some());
        assert!(!dir.path().join("sub").join("kvConfig.json.tmp").exists());
    }

    #[test]
    fn corrupt_file_is_an_error_and_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(
            KvConfig::load(&path),
            Err(KvError::Corrupt { .. })
        ));

        // A directory where the file should be makes the rename fail.
        let blocked = dir.path().join("blocked");
        fs::create_dir_all(blocked.join("x")).unwrap();
        let mut kv = KvConfig::load(&dir.path().join("none.json")).unwrap();
        kv.path = blocked;
        assert!(kv.put("ns", "k", "v").is_err());
        assert_eq!(kv.get("ns", "k"), None);
    }
}
