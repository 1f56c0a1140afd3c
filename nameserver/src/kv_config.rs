//! Namespaced key/value configuration (`namesrv/kvconfig/KVConfigManager.java`),
//! persisted to `kvConfigPath` in RocketMQ's shape `{"configTable":{ns:{k:v}}}` so a
//! file written by a Java nameserver loads here and the reverse.
//!
//! Any peer may PUT_KV_CONFIG with ACL off, so the table is bounded ([`KvLimits`]): a
//! put that would pass a cap is refused, and deleting entries (and the namespaces they
//! leave empty) makes room again. A file over the caps still loads; only growth is
//! refused then.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, RwLock};
use protocol::body::KvTable;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::limits::{
    KvLimits, LimitRefusal, MAX_KV_BYTES, MAX_KV_ENTRIES, MAX_KV_KEY_LENGTH, MAX_KV_VALUE_LENGTH,
};

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
    #[error("{}", .0.remark())]
    Limit(LimitRefusal),
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KvConfigFile {
    #[serde(default)]
    config_table: Table,
}

type Table = BTreeMap<String, BTreeMap<String, String>>;

/// What the table holds, as the caps count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KvUsage {
    pub entries: usize,
    /// Namespace + key + value bytes of every entry.
    pub bytes: usize,
}

impl KvUsage {
    fn of(table: &Table) -> Self {
        let mut usage = Self::default();
        for (namespace, entries) in table {
            for (key, value) in entries {
                usage.entries += 1;
                usage.bytes += entry_bytes(namespace, key, value);
            }
        }
        usage
    }
}

fn entry_bytes(namespace: &str, key: &str, value: &str) -> usize {
    namespace.len() + key.len() + value.len()
}

/// Internally synchronized: readers never wait for a write's fsync, because writers
/// persist a copy and swap it in afterwards; `writer` serializes the writers and holds
/// the usage of the table they last swapped in.
#[derive(Debug)]
pub struct KvConfig {
    path: PathBuf,
    limits: KvLimits,
    table: RwLock<Table>,
    writer: Mutex<KvUsage>,
}

impl KvConfig {
    /// Loads `path`; a missing file is an empty table, a corrupt one an error (starting
    /// empty would overwrite it on the next put).
    pub fn load(path: &Path, limits: KvLimits) -> Result<Self, KvError> {
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
            limits,
            writer: Mutex::new(KvUsage::of(&table)),
            table: RwLock::new(table),
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

    pub fn usage(&self) -> KvUsage {
        *self.writer.lock()
    }

    /// Sets and persists. The in-memory table is changed only if the file was written;
    /// nothing is if the put would pass a limit (a replaced value counts only what it
    /// adds).
    pub fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), KvError> {
        self.check_lengths(namespace, key, value)?;
        let mut usage = self.writer.lock();
        let replaced = self
            .table
            .read()
            .get(namespace)
            .and_then(|ns| ns.get(key))
            .map(|old| entry_bytes(namespace, key, old));
        let next_usage = KvUsage {
            entries: usage.entries + usize::from(replaced.is_none()),
            bytes: usage.bytes - replaced.unwrap_or(0) + entry_bytes(namespace, key, value),
        };
        self.check_usage(*usage, next_usage)?;
        let mut next = self.table.read().clone();
        next.entry(namespace.to_owned())
            .or_default()
            .insert(key.to_owned(), value.to_owned());
        self.persist(&next)?;
        *self.table.write() = next;
        *usage = next_usage;
        Ok(())
    }

    /// Removes and persists; removing an absent key is not an error (Java's behaviour).
    /// A namespace left empty goes too (4.9 keeps it, and so a table any peer can fill
    /// with empty namespaces).
    pub fn delete(&self, namespace: &str, key: &str) -> Result<(), KvError> {
        let mut usage = self.writer.lock();
        let mut next = self.table.read().clone();
        let Some(ns) = next.get_mut(namespace) else {
            return Ok(());
        };
        let Some(old) = ns.remove(key) else {
            return Ok(());
        };
        if ns.is_empty() {
            next.remove(namespace);
        }
        self.persist(&next)?;
        *self.table.write() = next;
        usage.entries -= 1;
        usage.bytes -= entry_bytes(namespace, key, &old);
        Ok(())
    }

    fn check_lengths(&self, namespace: &str, key: &str, value: &str) -> Result<(), KvError> {
        let l = &self.limits;
        let over = |what: &str, len: usize, limit: &'static str, max: usize| {
            KvError::Limit(LimitRefusal::new(
                limit,
                format!("the {what} is {len} bytes, longer than {limit} {max}"),
            ))
        };
        if namespace.len() > l.max_key_length {
            return Err(over(
                "namespace",
                namespace.len(),
                MAX_KV_KEY_LENGTH,
                l.max_key_length,
            ));
        }
        if key.len() > l.max_key_length {
            return Err(over("key", key.len(), MAX_KV_KEY_LENGTH, l.max_key_length));
        }
        if value.len() > l.max_value_length {
            return Err(over(
                "value",
                value.len(),
                MAX_KV_VALUE_LENGTH,
                l.max_value_length,
            ));
        }
        Ok(())
    }

    /// Growth only: a put that shrinks an over-full table (loaded from a file written
    /// under other limits) passes.
    fn check_usage(&self, now: KvUsage, next: KvUsage) -> Result<(), KvError> {
        let l = &self.limits;
        if next.entries > now.entries && next.entries > l.max_entries {
            return Err(KvError::Limit(LimitRefusal::new(
                MAX_KV_ENTRIES,
                format!(
                    "the KV table holds {} entries; one more would pass maxKvEntries {}",
                    now.entries, l.max_entries
                ),
            )));
        }
        if next.bytes > now.bytes && next.bytes > l.max_bytes {
            return Err(KvError::Limit(LimitRefusal::new(
                MAX_KV_BYTES,
                format!(
                    "the KV table holds {} bytes; {} would pass maxKvBytes {}",
                    now.bytes, next.bytes, l.max_bytes
                ),
            )));
        }
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
        let kv = KvConfig::load(&path, KvLimits::default()).unwrap();
        kv.put("ns", "k", "v").unwrap();
        kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "T", "broker-a:4")
            .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"},"ns":{"k":"v"}}}"#
        );
        let again = KvConfig::load(&path, KvLimits::default()).unwrap();
        assert_eq!(again.get("ns", "k").as_deref(), Some("v"));
        again.delete("ns", "k").unwrap();
        again.delete("ns", "absent").unwrap();
        assert!(
            KvConfig::load(&path, KvLimits::default())
                .unwrap()
                .list("ns")
                .is_none()
        );
        assert!(again.list(NAMESPACE_ORDER_TOPIC_CONFIG).is_some());
        assert!(!dir.path().join("sub").join("kvConfig.json.tmp").exists());
    }

    #[test]
    fn corrupt_file_is_an_error_and_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(
            KvConfig::load(&path, KvLimits::default()),
            Err(KvError::Corrupt { .. })
        ));

        // A directory where the file should be makes the rename fail.
        let blocked = dir.path().join("blocked");
        fs::create_dir_all(blocked.join("x")).unwrap();
        let mut kv = KvConfig::load(&dir.path().join("none.json"), KvLimits::default()).unwrap();
        kv.path = blocked;
        assert!(kv.put("ns", "k", "v").is_err());
        assert_eq!(kv.get("ns", "k"), None);
    }

    fn limit_key(r: Result<(), KvError>) -> &'static str {
        match r {
            Err(KvError::Limit(refusal)) => {
                assert!(
                    refusal.remark().contains(refusal.key),
                    "{}",
                    refusal.remark()
                );
                refusal.key
            }
            other => panic!("expected a limit refusal, got {other:?}"),
        }
    }

    #[test]
    fn puts_are_bounded_and_deletes_make_room() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        let limits = KvLimits {
            max_entries: 3,
            max_bytes: 38,
            max_key_length: 8,
            max_value_length: 10,
        };
        let kv = KvConfig::load(&path, limits.clone()).unwrap();
        assert_eq!(
            limit_key(kv.put("n".repeat(9).as_str(), "k", "v")),
            MAX_KV_KEY_LENGTH
        );
        assert_eq!(
            limit_key(kv.put("ns", &"k".repeat(9), "v")),
            MAX_KV_KEY_LENGTH
        );
        assert_eq!(
            limit_key(kv.put("ns", "k", &"v".repeat(11))),
            MAX_KV_VALUE_LENGTH
        );
        assert_eq!(kv.usage(), KvUsage::default());
        assert!(!path.exists(), "nothing was persisted");

        kv.put("a", "k1", "v").unwrap();
        kv.put("b", "k2", "v").unwrap();
        kv.put("c", "k3", "0123456789").unwrap();
        assert_eq!(
            kv.usage(),
            KvUsage {
                entries: 3,
                bytes: 21
            }
        );
        let file = fs::read_to_string(&path).unwrap();
        assert_eq!(limit_key(kv.put("d", "k4", "v")), MAX_KV_ENTRIES);
        // Replacing a value adds no entry; it may grow up to the byte cap.
        kv.put("a", "k1", "0123456789").unwrap();
        assert_eq!(kv.usage().bytes, 30);
        kv.put("b", "k2", "012345678").unwrap();
        assert_eq!(limit_key(kv.put("b", "k2", "0123456789")), MAX_KV_BYTES);
        assert_eq!(kv.get("b", "k2").as_deref(), Some("012345678"));
        assert_ne!(fs::read_to_string(&path).unwrap(), file);

        // Deleting makes room, and the emptied namespace goes.
        kv.delete("a", "k1").unwrap();
        assert_eq!(
            kv.usage(),
            KvUsage {
                entries: 2,
                bytes: 25
            }
        );
        assert!(!fs::read_to_string(&path).unwrap().contains("\"a\""));
        kv.put("d", "k4", "v").unwrap();
        let again = KvConfig::load(&path, limits).unwrap();
        assert_eq!(again.usage(), kv.usage());
    }

    #[test]
    fn an_over_full_file_loads_and_only_growth_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        let big = KvConfig::load(&path, KvLimits::default()).unwrap();
        for i in 0..5 {
            big.put("ns", &format!("k{i}"), "value").unwrap();
        }
        let limits = KvLimits {
            max_entries: 2,
            ..KvLimits::default()
        };
        let kv = KvConfig::load(&path, limits).unwrap();
        assert_eq!(kv.usage().entries, 5);
        assert_eq!(limit_key(kv.put("ns", "k9", "v")), MAX_KV_ENTRIES);
        kv.put("ns", "k0", "v").unwrap();
        kv.delete("ns", "k1").unwrap();
        assert_eq!(kv.usage().entries, 4);
    }
}
