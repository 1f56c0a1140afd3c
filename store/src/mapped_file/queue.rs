//! The ordered, contiguous list of segment files making up one logical stream.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use super::allocate::{Allocator, PREFAULT_WINDOW, WRITE_AHEAD_WINDOW};
use super::{COMMIT_LOG, MappedFile, parse_file_name};
use crate::error::{IoContext, StoreError};
use crate::fence::WriteFence;
use crate::fs::StoreFs;

#[derive(Debug, Clone, Copy, Default)]
pub struct QueueOptions {
    /// Prepare the next file in a background thread.
    pub preallocate: bool,
    /// Pre-fault new files (only with `preallocate`, so no append waits for it).
    pub warm: bool,
    /// Keep the pages just ahead of the write position pre-faulted (only with
    /// `preallocate`): for appends that store through the mapping.
    pub prefault_ahead: bool,
    /// Keep the blocks just ahead of the write position written with zeros and written
    /// back (only with `preallocate`): for write-through appends, whose syncs then
    /// convert no unwritten extents (see `write_ahead.rs`).
    pub write_ahead: bool,
}

/// Result of a flush: how far the stream is durable, and the store time of the last
/// record known to be inside that durable prefix (0 if unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushOutcome {
    pub flushed: u64,
    pub store_timestamp: i64,
}

/// Files are appended by one writer at a time (the owner's put lock); lookups and flushes
/// may run concurrently with it.
#[derive(Debug)]
pub struct MappedFileQueue {
    dir: PathBuf,
    file_size: u32,
    fs: Arc<dyn StoreFs>,
    files: RwLock<Vec<Arc<MappedFile>>>,
    allocator: Option<Allocator>,
    warm: bool,
    prefault_ahead: bool,
    write_ahead: bool,
    flushed_where: AtomicU64,
    /// Tripped by the first failed flush or write; see [`crate::fence`].
    fence: WriteFence,
}

impl MappedFileQueue {
    /// Opens `dir` (created if missing) and maps every segment file in it. Leftover
    /// `*.tmp` files of an interrupted allocation are removed. Every file must have the
    /// configured size and the files must be contiguous, else the store refuses to start.
    pub fn open(
        dir: &Path,
        file_size: u32,
        fs: Arc<dyn StoreFs>,
        options: QueueOptions,
    ) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).ctx(|| format!("create {}", dir.display()))?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).ctx(|| format!("list {}", dir.display()))? {
            let path = entry.ctx(|| format!("list {}", dir.display()))?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                fs.remove_file(&path)
                    .ctx(|| format!("remove {}", path.display()))?;
                continue;
            }
            match parse_file_name(&path) {
                Some(offset) => found.push((offset, path)),
                None => {
                    tracing::warn!(path = %path.display(), "ignoring a file that is not a segment")
                }
            }
        }
        found.sort_unstable();
        // A short file may be repaired only if nothing after it was ever written.
        let mut repairable = vec![false; found.len()];
        for (i, (_, path)) in found.iter().enumerate().rev() {
            repairable[i] = true;
            if !never_written(path) {
                break;
            }
        }
        let mut files = Vec::with_capacity(found.len());
        for (i, (offset, path)) in found.into_iter().enumerate() {
            if offset % u64::from(file_size) != 0 {
                return Err(StoreError::Corrupt(format!(
                    "{}: offset is not a multiple of the file size {file_size}",
                    path.display()
                )));
            }
            if let Some(prev) = files.last().map(|f: &Arc<MappedFile>| f.end_offset())
                && prev != offset
            {
                return Err(StoreError::Corrupt(format!(
                    "{}: gap in the segment files before it",
                    path.display()
                )));
            }
            files.push(Arc::new(MappedFile::open(
                fs.as_ref(),
                COMMIT_LOG,
                &path,
                file_size,
                repairable[i],
            )?));
        }
        let flushed = files.last().map_or(0, |f| f.end_offset());
        let allocator = if options.preallocate {
            Some(
                Allocator::start(
                    dir.to_owned(),
                    file_size,
                    options.warm,
                    options.write_ahead,
                    Arc::clone(&fs),
                )
                .ctx(|| "start the file allocator".to_owned())?,
            )
        } else {
            None
        };
        Ok(Self {
            dir: dir.to_owned(),
            file_size,
            fs,
            files: RwLock::new(files),
            allocator,
            warm: options.warm,
            prefault_ahead: options.prefault_ahead,
            write_ahead: options.write_ahead,
            flushed_where: AtomicU64::new(flushed),
            fence: WriteFence::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn file_size(&self) -> u32 {
        self.file_size
    }

    /// The file system every file of this queue goes through.
    pub fn fs(&self) -> &dyn StoreFs {
        self.fs.as_ref()
    }

    /// Tripped once a write or flush of this stream failed: nothing more may be
    /// acknowledged as durable until a restart.
    pub fn fence(&self) -> &WriteFence {
        &self.fence
    }

    /// A snapshot of the files, oldest first.
    pub fn files(&self) -> Vec<Arc<MappedFile>> {
        self.files.read().clone()
    }

    pub fn file_count(&self) -> usize {
        self.files.read().len()
    }

    pub fn first(&self) -> Option<Arc<MappedFile>> {
        self.files.read().first().cloned()
    }

    pub fn last(&self) -> Option<Arc<MappedFile>> {
        self.files.read().last().cloned()
    }

    /// The file holding stream offset `offset`.
    pub fn find(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let files = self.files.read();
        let first = files.first()?.from_offset();
        let index = usize::try_from(offset.checked_sub(first)? / u64::from(self.file_size)).ok()?;
        files
            .get(index)
            .filter(|f| f.from_offset() <= offset && offset < f.end_offset())
            .cloned()
    }

    /// Start of the oldest file (0 when empty).
    pub fn min_offset(&self) -> u64 {
        self.first().map_or(0, |f| f.from_offset())
    }

    /// End of the written data.
    pub fn max_offset(&self) -> u64 {
        self.last()
            .map_or(0, |f| f.from_offset() + u64::from(f.wrote_position()))
    }

    pub fn flushed_offset(&self) -> u64 {
        self.flushed_where.load(Ordering::Acquire)
    }

    /// Start of the file after the one holding `offset`.
    pub fn roll_next(&self, offset: u64) -> u64 {
        offset + u64::from(self.file_size) - offset % u64::from(self.file_size)
    }

    /// The file to append to: the last one unless it is full, else a new one (taken from
    /// the allocator when it is ready). `start` places the first file of an empty queue.
    /// Only the queue's single writer may call this.
    pub fn last_or_create(&self, start: u64) -> std::io::Result<Arc<MappedFile>> {
        let create_at = match self.last() {
            Some(last) if !last.is_full() => {
                self.keep_prefaulted(&last);
                return Ok(last);
            }
            Some(last) => last.end_offset(),
            None => start - start % u64::from(self.file_size),
        };
        let prepared = self.allocator.as_ref().and_then(|a| a.take(create_at));
        let file = match prepared {
            Some(Ok(file)) => file,
            // A failed preallocation is retried once here; a second failure is the answer.
            Some(Err(_)) | None => {
                let file = MappedFile::create_at(
                    self.fs.as_ref(),
                    COMMIT_LOG,
                    &self.dir,
                    create_at,
                    self.file_size,
                )?;
                if self.warm {
                    file.warm();
                }
                file
            }
        };
        let file = Arc::new(file);
        {
            let mut files = self.files.write();
            if files.is_empty() {
                // The first file of an empty queue may start anywhere (a replica that
                // starts from its master's last file): nothing below it exists, so
                // everything below it counts as flushed, or `flush` would look for
                // offset 0 for ever and never sync a byte.
                self.flushed_where.fetch_max(create_at, Ordering::AcqRel);
            }
            files.push(Arc::clone(&file));
        }
        if let Some(allocator) = &self.allocator {
            allocator.request(create_at + u64::from(self.file_size));
        }
        Ok(file)
    }

    /// Has the allocator thread pre-fault the pages ahead of `file`'s write position when
    /// less than half of [`PREFAULT_WINDOW`] is left (two atomic loads otherwise). The
    /// writer calls it after appending.
    pub fn keep_prefaulted(&self, file: &Arc<MappedFile>) {
        let window = if self.write_ahead {
            WRITE_AHEAD_WINDOW
        } else {
            PREFAULT_WINDOW
        };
        if let Some(allocator) = &self.allocator
            && (self.prefault_ahead || self.write_ahead)
            && file.prefault_due(window)
        {
            allocator.request_prefault(file);
        }
    }

    /// Flushes from the flushed position on. With `least_pages > 0` the file being
    /// written is only flushed once it has that many dirty pages (full files always are).
    ///
    /// The first failure trips the fence and every later call fails too: after a failed
    /// msync Linux has already dropped the dirty state, so a "successful" retry would
    /// prove nothing.
    pub fn flush(&self, least_pages: u32) -> std::io::Result<FlushOutcome> {
        if self.fence.is_tripped() {
            return Err(self.fence.error());
        }
        self.flush_unfenced(least_pages).inspect_err(|e| {
            self.fence
                .trip(format!("flushing {} failed: {e}", self.dir.display()));
        })
    }

    fn flush_unfenced(&self, least_pages: u32) -> std::io::Result<FlushOutcome> {
        let mut store_timestamp = 0;
        loop {
            // Never below the first file: bytes there are gone (retention) or never
            // existed (a queue that started mid-stream).
            let at = self.flushed_offset().max(self.min_offset());
            let Some(file) = self.find(at) else { break };
            if !file.is_full() && least_pages > 0 && file.dirty_pages() < least_pages {
                break;
            }
            // Loaded before the flush reads the write position: the record carrying this
            // timestamp is then inside the flushed range.
            let ts = file.store_timestamp();
            let pos = file.flush(self.fs.as_ref())?;
            self.flushed_where
                .fetch_max(file.from_offset() + u64::from(pos), Ordering::AcqRel);
            if ts != 0 {
                store_timestamp = ts;
            }
            if pos < file.size() {
                break;
            }
        }
        Ok(FlushOutcome {
            flushed: self.flushed_offset(),
            store_timestamp,
        })
    }

    /// Recovery: `offset` becomes the end of the stream. Later files are deleted, the
    /// file holding it is cut there (its tail zeroed).
    pub fn truncate(&self, offset: u64) -> Result<(), StoreError> {
        let mut files = self.files.write();
        while let Some(last) = files.last() {
            if last.from_offset() > offset {
                last.delete(self.fs.as_ref())
                    .ctx(|| format!("remove {}", last.path().display()))?;
                files.pop();
                continue;
            }
            if last.end_offset() > offset {
                let pos = (offset - last.from_offset()) as u32;
                last.truncate_to(self.fs.as_ref(), pos)
                    .ctx(|| format!("truncate {}", last.path().display()))?;
            }
            break;
        }
        self.flushed_where.store(offset, Ordering::Release);
        Ok(())
    }

    /// Live truncation (readers may hold views): `offset` becomes the end of the stream.
    /// Later files are deleted, and the file holding it is replaced by a copy of its
    /// prefix (see [`MappedFile::replace_with_prefix`]) instead of being zeroed in place.
    pub fn truncate_live(&self, offset: u64) -> Result<(), StoreError> {
        let mut files = self.files.write();
        let mut deleted = false;
        while let Some(last) = files.last() {
            if last.from_offset() <= offset {
                break;
            }
            last.delete(self.fs.as_ref())
                .ctx(|| format!("remove {}", last.path().display()))?;
            files.pop();
            deleted = true;
        }
        if deleted {
            crate::fs::sync_dir(&self.dir).ctx(|| format!("sync {}", self.dir.display()))?;
        }
        if let Some(last) = files.last_mut() {
            let pos = (offset - last.from_offset()) as u32;
            if pos < last.wrote_position() {
                let replacement = last
                    .replace_with_prefix(self.fs.as_ref(), pos)
                    .ctx(|| format!("replace {}", last.path().display()))?;
                *last = Arc::new(replacement);
            }
        }
        self.flushed_where.store(offset, Ordering::Release);
        Ok(())
    }

    /// Deletes files from the oldest on while `expired` says so, at most `max` of them,
    /// never the last (written) file. Open views keep their mapping alive after this.
    pub fn delete_oldest_while(
        &self,
        max: usize,
        mut expired: impl FnMut(&MappedFile) -> bool,
    ) -> Vec<PathBuf> {
        let mut deleted = Vec::new();
        while deleted.len() < max {
            let mut files = self.files.write();
            if files.len() < 2 || !expired(&files[0]) {
                break;
            }
            let file = files.remove(0);
            drop(files);
            match file.delete(self.fs.as_ref()) {
                Ok(()) => deleted.push(file.path().to_owned()),
                Err(e) => {
                    tracing::warn!(path = %file.path().display(), error = %e, "deleting an expired segment failed");
                    self.files.write().insert(0, file);
                    break;
                }
            }
        }
        deleted
    }

    /// Deletes a preallocated file that no longer follows the last file (after a
    /// truncation), so no gap is left on disk.
    pub fn discard_prepared(&self) -> Result<(), StoreError> {
        match &self.allocator {
            Some(allocator) => allocator
                .discard()
                .ctx(|| format!("discard the preallocated file in {}", self.dir.display())),
            None => Ok(()),
        }
    }

    /// Stops background allocation.
    pub fn shutdown(&self) {
        if let Some(allocator) = &self.allocator {
            allocator.shutdown();
        }
    }
}

/// The file starts with 8 zero bytes (a preallocated file nobody wrote to).
fn never_written(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|f| f.read_exact_at(&mut head, 0))
        .is_ok_and(|()| head == [0; 8])
}
