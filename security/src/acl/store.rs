//! The live ACL of a server: one `plain_acl.yml`, reloaded when its content changes, and
//! the admin edits of request codes 50, 51 and 53.
//!
//! Failure policy: at startup a missing or broken file refuses to start (the error names
//! the file). Later, a file that does not parse or does not validate is logged and
//! counted, and the last good table stays in force (4.9 could end up half-updated).
//! Edits are written to a temporary file and renamed over the original, then take effect
//! at once (4.9 waited for its file watcher).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use super::addr::AddrPattern;
use super::file::{AccountEntry, FileDataVersion, FileSyntaxError, PlainAclFile};
use super::perm::Perm;
use super::table::{AclTable, TableError};

#[derive(Debug, thiserror::Error)]
pub enum AclError {
    #[error("ACL file {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("ACL file {path}: {source}")]
    Syntax {
        path: String,
        #[source]
        source: FileSyntaxError,
    },
    #[error("ACL file {path}: {source}")]
    Invalid {
        path: String,
        #[source]
        source: TableError,
    },
    #[error("{0}")]
    BadEdit(String),
}

/// What a reload poll found.
#[derive(Debug, PartialEq, Eq)]
pub enum ReloadOutcome {
    Unchanged,
    Reloaded,
    /// The file changed but is broken; the previous table is still in force.
    KeptLastGood,
}

/// An account as UPDATE_AND_CREATE_ACL_CONFIG (50) sends it. `None` keeps the file's
/// value for an existing account.
#[derive(Debug, Clone, Default)]
pub struct AccountEdit {
    pub access_key: String,
    pub secret_key: Option<String>,
    pub white_remote_address: Option<String>,
    pub admin: bool,
    pub default_topic_perm: Option<String>,
    pub default_group_perm: Option<String>,
    /// Comma-separated `name=PERM` items.
    pub topic_perms: Option<String>,
    pub group_perms: Option<String>,
}

struct Loaded {
    /// The file could not be read at the last poll (reported once).
    missing: bool,
    file: PlainAclFile,
    /// The bytes the table was built from; a poll compares against them, so a mounted
    /// Secret swapped by symlink is noticed too.
    text: String,
}

pub struct AclStore {
    path: PathBuf,
    table: RwLock<Arc<AclTable>>,
    loaded: Mutex<Loaded>,
    reload_failures: AtomicU64,
    reloads: AtomicU64,
}

impl std::fmt::Debug for AclStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclStore")
            .field("path", &self.path)
            .finish()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl AclStore {
    /// Loads `path`; any problem is an error naming the file.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, AclError> {
        let path = path.into();
        let text = read(&path)?;
        let (file, table) = compile(&path, &text)?;
        Ok(Self {
            path,
            table: RwLock::new(Arc::new(table)),
            loaded: Mutex::new(Loaded {
                missing: false,
                file,
                text,
            }),
            reload_failures: AtomicU64::new(0),
            reloads: AtomicU64::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The table in force (cheap: one `Arc` clone under a read lock).
    pub fn table(&self) -> Arc<AclTable> {
        self.table.read().clone()
    }

    pub fn reload_failures(&self) -> u64 {
        self.reload_failures.load(Ordering::Relaxed)
    }

    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Re-reads the file and swaps the table in when its content changed and is valid.
    pub fn reload_if_changed(&self) -> ReloadOutcome {
        let text = match read(&self.path) {
            Ok(t) => t,
            Err(e) => {
                // A file being replaced may be missing for a moment; the old table stays.
                let mut loaded = self.loaded.lock();
                if loaded.missing {
                    return ReloadOutcome::Unchanged;
                }
                tracing::warn!(error = %e, "ACL file unreadable; keeping the last good ACL");
                loaded.missing = true;
                loaded.text.clear();
                self.reload_failures.fetch_add(1, Ordering::Relaxed);
                return ReloadOutcome::KeptLastGood;
            }
        };
        let mut loaded = self.loaded.lock();
        loaded.missing = false;
        if text == loaded.text {
            return ReloadOutcome::Unchanged;
        }
        match compile(&self.path, &text) {
            Ok((file, table)) => {
                tracing::info!(
                    path = %self.path.display(),
                    accounts = table.account_count(),
                    "ACL file reloaded"
                );
                *self.table.write() = Arc::new(table);
                *loaded = Loaded {
                    missing: false,
                    file,
                    text,
                };
                self.reloads.fetch_add(1, Ordering::Relaxed);
                ReloadOutcome::Reloaded
            }
            Err(e) => {
                tracing::error!(error = %e, "ACL file changed but is invalid; keeping the last good ACL");
                // Remember the broken text so it is reported once, not every poll.
                loaded.text = text;
                self.reload_failures.fetch_add(1, Ordering::Relaxed);
                ReloadOutcome::KeptLastGood
            }
        }
    }

    /// Polls the file every `interval` until `cancel`.
    pub fn spawn_watcher(
        self: &Arc<Self>,
        interval: Duration,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let store = Arc::clone(self);
        crate::file_watch::spawn_poll(interval, cancel, move || {
            store.reload_if_changed();
        })
    }

    /// The file's version (52's `version`).
    pub fn version(&self) -> FileDataVersion {
        self.loaded.lock().file.version()
    }

    /// The global whitelist and the accounts with their secret keys removed (54).
    pub fn redacted(&self) -> PlainAclFile {
        let mut file = self.loaded.lock().file.clone();
        for a in &mut file.accounts {
            a.secret_key.clear();
        }
        file
    }

    /// UPDATE_AND_CREATE_ACL_CONFIG (50): creates the account or edits it in place.
    pub fn upsert_account(&self, edit: &AccountEdit) -> Result<(), AclError> {
        let ak = edit.access_key.trim();
        self.edit(|file| {
            let index = match file.accounts.iter().position(|a| a.access_key == ak) {
                Some(i) => i,
                None => {
                    file.accounts.push(AccountEntry {
                        access_key: ak.to_owned(),
                        ..AccountEntry::default()
                    });
                    file.accounts.len() - 1
                }
            };
            let entry = &mut file.accounts[index];
            if let Some(sk) = &edit.secret_key {
                entry.secret_key = sk.trim().to_owned();
            }
            if let Some(w) = &edit.white_remote_address {
                AddrPattern::parse(w).map_err(|e| AclError::BadEdit(e.to_string()))?;
                entry.white_remote_address = w.trim().to_owned();
            }
            entry.admin = edit.admin;
            for (value, slot) in [
                (&edit.default_topic_perm, &mut entry.default_topic_perm),
                (&edit.default_group_perm, &mut entry.default_group_perm),
            ] {
                if let Some(p) = value {
                    Perm::parse_strict(p).ok_or_else(|| {
                        AclError::BadEdit(format!("{p:?} is not one of PUB, SUB, PUB|SUB, DENY"))
                    })?;
                    *slot = p.trim().to_owned();
                }
            }
            for (value, slot) in [
                (&edit.topic_perms, &mut entry.topic_perms),
                (&edit.group_perms, &mut entry.group_perms),
            ] {
                if let Some(list) = value {
                    *slot = perm_items(list)?;
                }
            }
            Ok(())
        })
    }

    /// DELETE_ACL_CONFIG (51).
    pub fn delete_account(&self, access_key: &str) -> Result<(), AclError> {
        let ak = access_key.trim();
        self.edit(|file| {
            let before = file.accounts.len();
            file.accounts.retain(|a| a.access_key != ak);
            if file.accounts.len() == before {
                return Err(AclError::BadEdit(format!("no account {ak:?}")));
            }
            Ok(())
        })
    }

    /// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): the list replaces the file's.
    pub fn set_global_whitelist(&self, patterns: &[String]) -> Result<(), AclError> {
        for p in patterns {
            AddrPattern::parse(p).map_err(|e| AclError::BadEdit(e.to_string()))?;
        }
        self.edit(|file| {
            file.global_white_remote_addresses = patterns.to_vec();
            Ok(())
        })
    }

    /// Applies `change` to the last good document, validates it, writes it atomically
    /// with the next data version and puts it in force.
    fn edit(
        &self,
        change: impl FnOnce(&mut PlainAclFile) -> Result<(), AclError>,
    ) -> Result<(), AclError> {
        let mut loaded = self.loaded.lock();
        let mut file = loaded.file.clone();
        change(&mut file)?;
        let v = file.version();
        file.data_version = vec![FileDataVersion {
            counter: v.counter.wrapping_add(1),
            timestamp: now_ms(),
        }];
        let table = AclTable::compile(&file).map_err(|e| AclError::BadEdit(e.to_string()))?;
        let text = file.render();
        write_atomically(&self.path, &text)?;
        *self.table.write() = Arc::new(table);
        *loaded = Loaded {
            missing: false,
            file,
            text,
        };
        Ok(())
    }
}

fn perm_items(list: &str) -> Result<Vec<String>, AclError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| match item.split_once('=') {
            Some((name, perm)) if !name.trim().is_empty() && Perm::parse_strict(perm).is_some() => {
                Ok(format!("{}={}", name.trim(), perm.trim()))
            }
            _ => Err(AclError::BadEdit(format!(
                "{item:?} is not `name=PERM` with PERM one of PUB, SUB, PUB|SUB, DENY"
            ))),
        })
        .collect()
}

fn read(path: &Path) -> Result<String, AclError> {
    std::fs::read_to_string(path).map_err(|e| AclError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn compile(path: &Path, text: &str) -> Result<(PlainAclFile, AclTable), AclError> {
    let name = || path.display().to_string();
    let file = PlainAclFile::parse(text).map_err(|source| AclError::Syntax {
        path: name(),
        source,
    })?;
    let table = AclTable::compile(&file).map_err(|source| AclError::Invalid {
        path: name(),
        source,
    })?;
    Ok((file, table))
}

fn write_atomically(path: &Path, text: &str) -> Result<(), AclError> {
    use std::io::Write as _;
    let io = |e: std::io::Error| AclError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let tmp = path.with_extension("yml.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{Requirement, Resource};
    use crate::sign::{Credentials, sign_request};
    use protocol::RemotingCommand;

    const GOOD: &str =
        "accounts:\n  - accessKey: producer1\n    secretKey: secret123\n    topicPerms: [T=PUB]\n";

    fn may_send(store: &AclStore, topic: &str) -> bool {
        let mut cmd = RemotingCommand::bare_request(310);
        sign_request(&mut cmd, &Credentials::new("producer1", "secret123"));
        store
            .table()
            .check(
                None,
                &cmd,
                &Requirement::Resources(vec![(Resource::topic(topic), Perm::PUB)]),
            )
            .is_ok()
    }

    #[test]
    fn reload_keeps_last_good_on_a_broken_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        std::fs::write(&path, GOOD).unwrap();
        let store = AclStore::open(&path).unwrap();
        assert!(may_send(&store, "T"));
        assert!(!may_send(&store, "U"));
        assert_eq!(store.reload_if_changed(), ReloadOutcome::Unchanged);
        std::fs::write(&path, GOOD.replace("T=PUB", "U=PUB")).unwrap();
        assert_eq!(store.reload_if_changed(), ReloadOutcome::Reloaded);
        assert!(may_send(&store, "U"));
        std::fs::write(&path, "accounts: [ {accessKey: x").unwrap();
        assert_eq!(store.reload_if_changed(), ReloadOutcome::KeptLastGood);
        assert_eq!(store.reload_if_changed(), ReloadOutcome::Unchanged);
        assert!(may_send(&store, "U"));
        std::fs::write(&path, "accounts:\n  - {accessKey: short, secretKey: x}\n").unwrap();
        assert_eq!(store.reload_if_changed(), ReloadOutcome::KeptLastGood);
        assert!(may_send(&store, "U"));
        assert_eq!(store.reload_failures(), 2);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(store.reload_if_changed(), ReloadOutcome::KeptLastGood);
        assert!(may_send(&store, "U"));
        // Startup is strict.
        assert!(
            AclStore::open(&path)
                .unwrap_err()
                .to_string()
                .contains("plain_acl.yml")
        );
    }

    #[test]
    fn edits_are_written_and_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        std::fs::write(&path, GOOD).unwrap();
        let store = AclStore::open(&path).unwrap();
        store
            .upsert_account(&AccountEdit {
                access_key: "producer1".into(),
                topic_perms: Some("T=PUB, V=PUB|SUB".into()),
                ..AccountEdit::default()
            })
            .unwrap();
        assert!(may_send(&store, "V"));
        assert_eq!(store.version().counter, 1);
        let on_disk = PlainAclFile::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(on_disk.accounts[0].secret_key, "secret123");
        assert_eq!(on_disk.accounts[0].topic_perms, ["T=PUB", "V=PUB|SUB"]);
        assert_eq!(store.reload_if_changed(), ReloadOutcome::Unchanged);
        assert!(
            store
                .upsert_account(&AccountEdit {
                    access_key: "producer1".into(),
                    topic_perms: Some("T=ALL".into()),
                    ..AccountEdit::default()
                })
                .is_err()
        );
        store
            .upsert_account(&AccountEdit {
                access_key: "consumer1".into(),
                secret_key: Some("another1".into()),
                ..AccountEdit::default()
            })
            .unwrap();
        assert!(store.table().account("consumer1").is_some());
        assert!(
            store
                .redacted()
                .accounts
                .iter()
                .all(|a| a.secret_key.is_empty())
        );
        store.delete_account("consumer1").unwrap();
        assert!(store.delete_account("consumer1").is_err());
        store.set_global_whitelist(&["10.0.0.0/8".into()]).unwrap();
        assert!(store.set_global_whitelist(&["nonsense".into()]).is_err());
        assert_eq!(store.version().counter, 4);
    }
}
