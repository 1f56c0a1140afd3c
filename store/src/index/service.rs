//! The chain of IndexFiles of a store (`IndexService.java`): building entries for message
//! keys, querying by key over a time range, recovery and retention.

use crate::fs::{OsFs, StoreFs};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::{Mutex, RwLock};
use protocol::message::PhysicalOffset;

use super::file::IndexFile;
use super::hash::topic_key_hash;
use super::{IndexError, local_time_file_name};

/// Dimensions and limits (`maxHashSlotNum`, `maxIndexNum`, `maxMsgsNumBatch`).
#[derive(Debug, Clone, Copy)]
pub struct IndexConfig {
    pub slot_num: usize,
    pub index_num: usize,
    pub max_msgs_num_batch: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            slot_num: 5_000_000,
            index_num: 20_000_000,
            max_msgs_num_batch: 64,
        }
    }
}

/// Candidates of a key query (`QueryOffsetResult`): physical offsets whose index entry has
/// the key's hash — collisions included, the caller checks the real record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryOffsetResult {
    pub offsets: Vec<PhysicalOffset>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phy_offset: PhysicalOffset,
}

pub struct IndexService {
    dir: PathBuf,
    config: IndexConfig,
    fs: Arc<dyn StoreFs>,
    files: RwLock<Vec<Arc<IndexFile>>>,
    /// Offset of the newest record indexed; re-dispatched records below it are skipped.
    last_indexed: Mutex<Option<PhysicalOffset>>,
    /// endTimestamp of the newest file that filled up and was flushed: the checkpoint's
    /// `indexMsgTimestamp`.
    flushed_full_timestamp: Arc<AtomicI64>,
}

impl IndexService {
    /// `IndexService.load`: maps every file; after an abnormal exit, files whose
    /// endTimestamp is newer than the checkpoint's index timestamp are deleted (their
    /// content is rebuilt by re-dispatch).
    pub fn load(
        dir: &Path,
        config: IndexConfig,
        last_exit_ok: bool,
        checkpoint_index_timestamp: i64,
    ) -> Result<Self, IndexError> {
        Self::load_with_fs(
            dir,
            config,
            last_exit_ok,
            checkpoint_index_timestamp,
            Arc::new(OsFs),
        )
    }

    /// [`Self::load`] with new files allocated through `fs`.
    pub fn load_with_fs(
        dir: &Path,
        config: IndexConfig,
        last_exit_ok: bool,
        checkpoint_index_timestamp: i64,
        store_fs: Arc<dyn StoreFs>,
    ) -> Result<Self, IndexError> {
        let mut files = Vec::new();
        match fs::read_dir(dir) {
            Ok(entries) => {
                let mut paths: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_file())
                    .collect();
                paths.retain(|p| !matches!(crate::fs::remove_stale_tmp(p), Ok(true)));
                paths.sort();
                let newest = paths.len().saturating_sub(1);
                for (i, path) in paths.into_iter().enumerate() {
                    let file = match IndexFile::open(
                        store_fs.as_ref(),
                        &path,
                        config.slot_num,
                        config.index_num,
                    ) {
                        // A wrong-sized newest file was cut while being created (by a
                        // version that did not create files atomically): nothing in it was
                        // ever persisted, and dispatch rebuilds what it should hold.
                        Err(IndexError::FileSize { .. }) if i == newest => {
                            tracing::warn!(path = %path.display(), "removing a wrong-sized newest index file");
                            store_fs.remove_file(&path).map_err(IndexError::io(&path))?;
                            continue;
                        }
                        other => other?,
                    };
                    if !last_exit_ok && file.end_timestamp() > checkpoint_index_timestamp {
                        tracing::info!(path = %path.display(), "deleting index file newer than the checkpoint");
                        file.delete(store_fs.as_ref())?;
                        continue;
                    }
                    files.push(Arc::new(file));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(IndexError::io(dir)(e)),
        }
        let last_indexed = last_indexed_of(&files);
        Ok(Self {
            dir: dir.to_path_buf(),
            config,
            fs: store_fs,
            files: RwLock::new(files),
            last_indexed: Mutex::new(last_indexed),
            flushed_full_timestamp: Arc::new(AtomicI64::new(checkpoint_index_timestamp)),
        })
    }

    pub fn file_count(&self) -> usize {
        self.files.read().len()
    }

    pub fn flushed_full_timestamp(&self) -> i64 {
        self.flushed_full_timestamp.load(Ordering::Acquire)
    }

    /// `buildIndex` for one dispatched record (the caller skips rollback records): entries
    /// for `UNIQ_KEY` and every non-empty space-separated token of `KEYS`, as `topic#key`.
    pub fn build_index(
        &self,
        topic: &str,
        physical_offset: PhysicalOffset,
        store_timestamp: i64,
        uniq_key: Option<&str>,
        keys: Option<&str>,
    ) -> Result<(), IndexError> {
        let mut last = self.last_indexed.lock();
        // Strictly below, like `IndexService.buildIndex`: the newest indexed record may have
        // had only some of its keys written before a file it shared was dropped, so it is
        // indexed again on replay (duplicate candidates are harmless; queries dedup).
        if last.is_some_and(|l| physical_offset < l) {
            return Ok(());
        }
        let tokens = uniq_key
            .into_iter()
            .chain(keys.into_iter().flat_map(|k| k.split(' ')))
            .filter(|k| !k.is_empty());
        for key in tokens {
            let hash = topic_key_hash(topic, key);
            let mut file = self.writable_file()?;
            while !file.put(hash, physical_offset, store_timestamp) {
                file = self.roll_file(&file)?;
            }
        }
        *last = Some(physical_offset);
        Ok(())
    }

    fn writable_file(&self) -> Result<Arc<IndexFile>, IndexError> {
        if let Some(last) = self.files.read().last()
            && !last.is_full()
        {
            return Ok(Arc::clone(last));
        }
        let last = self.files.read().last().cloned();
        match last {
            Some(full) => self.roll_file(&full),
            None => self.create_file(PhysicalOffset(0), 0),
        }
    }

    /// Creates the next file after `full` and flushes `full` in the background; once
    /// flushed, its end timestamp becomes the checkpoint's index timestamp.
    fn roll_file(&self, full: &Arc<IndexFile>) -> Result<Arc<IndexFile>, IndexError> {
        let next = self.create_file(full.end_phy_offset(), full.end_timestamp())?;
        let full = Arc::clone(full);
        let flushed = Arc::clone(&self.flushed_full_timestamp);
        let fs = Arc::clone(&self.fs);
        let spawned = std::thread::Builder::new()
            .name("index-flush".into())
            .spawn(move || match full.flush(fs.as_ref()) {
                Ok(()) => {
                    flushed.fetch_max(full.end_timestamp(), Ordering::AcqRel);
                }
                Err(e) => tracing::error!(error = %e, "flushing a full index file failed"),
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot spawn the index flush thread");
        }
        Ok(next)
    }

    fn create_file(
        &self,
        end_phy: PhysicalOffset,
        end_ts: i64,
    ) -> Result<Arc<IndexFile>, IndexError> {
        fs::create_dir_all(&self.dir).map_err(IndexError::io(&self.dir))?;
        let mut now = now_millis();
        let path = loop {
            let path = self.dir.join(local_time_file_name(now));
            if !path.exists() {
                break path;
            }
            now += 1;
        };
        let file = Arc::new(IndexFile::create(
            self.fs.as_ref(),
            &path,
            self.config.slot_num,
            self.config.index_num,
            end_phy,
            end_ts,
        )?);
        self.files.write().push(Arc::clone(&file));
        Ok(file)
    }

    /// `queryOffset`: newest file first, files whose time range overlaps `[begin, end]`;
    /// at most `min(max_num, maxMsgsNumBatch)` candidates.
    pub fn query(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryOffsetResult {
        let max = max_num.min(self.config.max_msgs_num_batch);
        let hash = topic_key_hash(topic, key);
        let files = self.files.read().clone();
        let mut result = QueryOffsetResult::default();
        if let Some(last) = files.last() {
            result.index_last_update_timestamp = last.end_timestamp();
            result.index_last_update_phy_offset = last.end_phy_offset();
        }
        for file in files.iter().rev() {
            if file.is_time_matched(begin, end) {
                file.select(hash, max, begin, end, &mut result.offsets);
            }
            if file.begin_timestamp() < begin || result.offsets.len() >= max {
                break;
            }
        }
        result
    }

    /// `deleteExpiredFile`: deletes files (never the newest) whose last entry points below
    /// the CommitLog minimum. Returns how many were deleted.
    pub fn delete_below(&self, commitlog_min: PhysicalOffset) -> Result<usize, IndexError> {
        let mut files = self.files.write();
        let mut deleted = 0;
        while files.len() > 1 && files[0].end_phy_offset() < commitlog_min {
            files[0].delete(self.fs.as_ref())?;
            files.remove(0);
            deleted += 1;
        }
        Ok(deleted)
    }

    pub fn flush(&self) -> Result<(), IndexError> {
        let files = self.files.read().clone();
        for file in files {
            file.flush(self.fs.as_ref())?;
        }
        Ok(())
    }

    /// Abnormal-exit recovery (`IndexService.load` with `lastExitOK == false`): deletes files
    /// whose endTimestamp is newer than the checkpoint's index timestamp.
    pub fn drop_files_newer_than(
        &self,
        checkpoint_index_timestamp: i64,
    ) -> Result<usize, IndexError> {
        let mut files = self.files.write();
        let before = files.len();
        let mut kept = Vec::with_capacity(before);
        for file in files.drain(..) {
            if file.end_timestamp() > checkpoint_index_timestamp {
                tracing::info!(path = %file.path().display(), "deleting index file newer than the checkpoint");
                file.delete(self.fs.as_ref())?;
            } else {
                kept.push(file);
            }
        }
        *self.last_indexed.lock() = last_indexed_of(&kept);
        *files = kept;
        Ok(before - files.len())
    }

    /// Replication truncation: deletes, newest first, every file holding an entry for a
    /// record at or beyond `offset`. Returns where re-dispatch must start to rebuild
    /// what those files held below `offset` (`None` when nothing was deleted).
    pub fn truncate_beyond(
        &self,
        offset: PhysicalOffset,
    ) -> Result<Option<PhysicalOffset>, IndexError> {
        let mut files = self.files.write();
        let mut rebuild = None;
        while let Some(last) = files.last() {
            if last.end_phy_offset() < offset {
                break;
            }
            rebuild = Some(last.begin_phy_offset());
            last.delete(self.fs.as_ref())?;
            files.pop();
        }
        *self.last_indexed.lock() = last_indexed_of(&files);
        Ok(rebuild)
    }

    /// endTimestamp of the newest file (0 without files).
    pub fn last_end_timestamp(&self) -> i64 {
        self.files.read().last().map_or(0, |f| f.end_timestamp())
    }

    /// Deletes all files (no CommitLog left).
    pub fn destroy(&self) -> Result<(), IndexError> {
        let mut files = self.files.write();
        for file in files.drain(..) {
            file.delete(self.fs.as_ref())?;
        }
        *self.last_indexed.lock() = None;
        Ok(())
    }
}

fn last_indexed_of(files: &[Arc<IndexFile>]) -> Option<PhysicalOffset> {
    match files {
        [] => None,
        [only] if only.index_count() <= 1 => None,
        [.., last] => Some(last.end_phy_offset()),
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
