//! Crash-safe persistence of one config file (RocketMQ `MixAll.string2File` +
//! `ConfigManager.load`/`loadBak`).
//!
//! Write order: `<file>.tmp` is written and fsynced, the current `<file>` is copied to
//! `<file>.bak` (fsynced), then `.tmp` is renamed over `<file>` and the directory fsynced.
//! Unlike Java we rename over the old file instead of deleting it first, so at every instant
//! `<file>` holds either the complete old or the complete new content; a torn `.tmp` left by
//! a crash is never read and is overwritten by the next persist.
//!
//! Persists of one path are serialised by a process-wide lock per path (every
//! `ConfigFile` of that path shares it): two writers never interleave on the shared
//! `.tmp`, and [`ConfigFile::persist_with`] takes its snapshot under that lock, so the
//! last write always carries the newest state (a stale snapshot cannot win the race).
//!
//! The writes, the rename and the directory sync go through a [`StoreFs`] (the real file
//! system unless a test injects faults with [`ConfigFile::with_fs`]).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};

use super::{ConfigDocument, ConfigFileError};
use crate::fs::{OsFs, StoreFs};

/// One config file on disk.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    /// Shared by every `ConfigFile` of this path in the process.
    lock: Arc<Mutex<()>>,
    fs: Arc<dyn StoreFs>,
}

/// The persist lock of `path` (as spelled: every caller derives it from the one store
/// root). Entries stay for the process lifetime: a fixed handful per store.
fn path_lock(path: &Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS.get_or_init(Mutex::default).lock();
    Arc::clone(locks.entry(path.to_path_buf()).or_default())
}

impl ConfigFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_fs(path, Arc::new(OsFs))
    }

    /// A config file written through `fs` (fault injection).
    pub fn with_fs(path: impl Into<PathBuf>, fs: Arc<dyn StoreFs>) -> Self {
        let path = path.into();
        let lock = path_lock(&path);
        Self { path, lock, fs }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn backup_path(&self) -> PathBuf {
        with_suffix(&self.path, ".bak")
    }

    pub fn temp_path(&self) -> PathBuf {
        with_suffix(&self.path, ".tmp")
    }

    /// Loads the document: the main file if it parses, else the `.bak` copy, else (neither
    /// exists) the default document. A corrupt `.bak` behind a corrupt main file is an error.
    pub fn load<T: ConfigDocument>(&self) -> Result<T, ConfigFileError> {
        Ok(self.load_with(T::NAME, T::decode)?.unwrap_or_default())
    }

    /// [`Self::load`] for documents whose shape is owned elsewhere (the broker's wire
    /// types): `None` when neither the file nor its `.bak` holds anything. `what` names
    /// the document in parse errors.
    pub fn load_with<T>(
        &self,
        what: &'static str,
        decode: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigFileError> {
        match self.read_and_decode(&self.path, what, &decode) {
            Ok(Some(doc)) => return Ok(Some(doc)),
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(error = %err, "config file unreadable, trying its .bak copy");
            }
        }
        self.read_and_decode(&self.backup_path(), what, &decode)
    }

    /// Writes the document atomically, keeping the previous content as `.bak`.
    pub fn persist<T: ConfigDocument>(&self, doc: &T) -> Result<(), ConfigFileError> {
        self.persist_text(&doc.encode())
    }

    pub fn persist_text(&self, text: &str) -> Result<(), ConfigFileError> {
        self.persist_bytes(text.as_bytes())
    }

    pub fn persist_bytes(&self, bytes: &[u8]) -> Result<(), ConfigFileError> {
        let _serialised = self.lock.lock();
        self.write_locked(bytes)
    }

    /// Holds off every other persist of this path (for a writer that must install what
    /// it wrote before another persist can snapshot the state).
    pub(super) fn lock_persists(&self) -> MutexGuard<'_, ()> {
        self.lock.lock()
    }

    /// Persists what `snapshot` renders, taking the snapshot under this file's persist
    /// lock: concurrent persists of changing state can only end with the newest state.
    pub fn persist_with(&self, snapshot: impl FnOnce() -> Vec<u8>) -> Result<(), ConfigFileError> {
        let _serialised = self.lock.lock();
        let bytes = snapshot();
        self.write_locked(&bytes)
    }

    /// The write sequence; the caller holds `self.lock`.
    pub(super) fn write_locked(&self, bytes: &[u8]) -> Result<(), ConfigFileError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ConfigFileError::Io { path, source }
        };
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;

        let tmp = self.temp_path();
        self.fs
            .write_file_synced(&tmp, bytes)
            .map_err(io_err(&tmp))?;

        // The new file and the copy keep the current file's mode: a file kept private
        // (a broker.conf holding secrets) must not become readable by a rewrite.
        let bak = self.backup_path();
        match fs::read(&self.path) {
            Ok(previous) => {
                self.fs
                    .write_file_synced(&bak, &previous)
                    .map_err(io_err(&bak))?;
                let mode = fs::metadata(&self.path)
                    .map_err(io_err(&self.path))?
                    .permissions();
                fs::set_permissions(&bak, mode.clone()).map_err(io_err(&bak))?;
                fs::set_permissions(&tmp, mode).map_err(io_err(&tmp))?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&self.path)(e)),
        }

        self.fs
            .rename(&tmp, &self.path)
            .map_err(io_err(&self.path))?;
        self.fs.sync_dir(&dir).map_err(io_err(&dir))
    }

    /// `Ok(None)` when the file is missing or blank.
    fn read_and_decode<T>(
        &self,
        path: &Path,
        what: &'static str,
        decode: &impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigFileError> {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(ConfigFileError::Parse {
                    path: path.to_path_buf(),
                    what,
                    reason: "not UTF-8".into(),
                });
            }
            Err(source) => {
                return Err(ConfigFileError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        if text.trim().is_empty() {
            return Ok(None);
        }
        decode(&text)
            .map(Some)
            .map_err(|reason| ConfigFileError::Parse {
                path: path.to_path_buf(),
                what,
                reason,
            })
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}
