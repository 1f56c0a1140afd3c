//! One memory-mapped, preallocated ConsumeQueue segment file.
//!
//! Concurrency contract: a single writer (the reput thread, or recovery before serving)
//! appends units and then publishes the new write position with `Release`; readers load the
//! position with `Acquire` and only read below it, so they never see a half-written unit.
//! Truncation (recovery, `truncate_dirty`) lowers the position before zeroing the tail and
//! happens while no dispatch runs.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use memmap2::MmapRaw;

use super::CqError;
use super::unit::{CqUnit, UNIT_SIZE};
use crate::fs::StoreFs;

pub struct CqFile {
    path: PathBuf,
    /// Byte offset of the file's first unit in the queue's logical stream (its file name).
    from: i64,
    size: usize,
    map: MmapRaw,
    wrote: AtomicUsize,
    flushed: AtomicUsize,
    deleted: AtomicBool,
}

/// `UtilAll.offset2FileName`: 20-digit zero-padded decimal.
pub fn file_name(offset: i64) -> String {
    format!("{offset:020}")
}

impl CqFile {
    /// Creates the file `dir/<20-digit from>` with `size` allocated bytes through `fs`; it
    /// appears under its final name only once allocated (see
    /// `fs::create_allocated_named`).
    pub fn create(fs: &dyn StoreFs, dir: &Path, from: i64, size: usize) -> Result<Self, CqError> {
        let (path, file) =
            crate::fs::create_allocated_named(fs, dir, &file_name(from), size as u64)
                .map_err(CqError::io(dir))?;
        let map = MmapRaw::map_raw(&file).map_err(CqError::io(&path))?;
        Ok(Self::new(path, from, size, map, 0))
    }

    /// Maps an existing file; like `MappedFileQueue.load` its length must equal `size`,
    /// except that the queue's newest file (`repair_short`) may be short: it is extended
    /// with zeros, which recovery reads as "never written" (stores written before files
    /// were created atomically could hold a 0-byte newest file after a crash).
    /// It starts out as "full"; recovery sets the real write position.
    pub fn open(path: &Path, size: usize, repair_short: bool) -> Result<Self, CqError> {
        let from = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.len() == 20)
            .and_then(|n| n.parse::<i64>().ok())
            .ok_or_else(|| CqError::BadFileName(path.to_path_buf()))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(CqError::io(path))?;
        let mut len = file.metadata().map_err(CqError::io(path))?.len();
        if repair_short && len < size as u64 {
            tracing::warn!(path = %path.display(), len, size, "extending a short newest ConsumeQueue file with zeros");
            file.set_len(size as u64).map_err(CqError::io(path))?;
            len = size as u64;
        }
        if len != size as u64 {
            return Err(CqError::FileSize {
                path: path.to_path_buf(),
                expected: size as u64,
                actual: len,
            });
        }
        let map = MmapRaw::map_raw(&file).map_err(CqError::io(path))?;
        Ok(Self::new(path.to_path_buf(), from, size, map, size))
    }

    fn new(path: PathBuf, from: i64, size: usize, map: MmapRaw, wrote: usize) -> Self {
        Self {
            path,
            from,
            size,
            map,
            wrote: AtomicUsize::new(wrote),
            flushed: AtomicUsize::new(wrote),
            deleted: AtomicBool::new(false),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn from(&self) -> i64 {
        self.from
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn wrote(&self) -> usize {
        self.wrote.load(Ordering::Acquire)
    }

    pub fn is_full(&self) -> bool {
        self.wrote() >= self.size
    }

    /// Logical byte offset just past the last written unit.
    pub fn end(&self) -> i64 {
        self.from + self.wrote() as i64
    }

    /// Last-modified time in ms since the epoch, 0 when unknown (`File.lastModified`).
    pub fn modified_millis(&self) -> i64 {
        fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// Unit at byte `pos` of this file, if `pos` is below the write position.
    pub fn unit_at(&self, pos: usize) -> Option<CqUnit> {
        if !pos.is_multiple_of(UNIT_SIZE) || pos + UNIT_SIZE > self.wrote() {
            return None;
        }
        Some(self.raw_unit(pos))
    }

    /// Reads a unit regardless of the write position (recovery scans files still "full").
    pub(super) fn raw_unit(&self, pos: usize) -> CqUnit {
        let mut bytes = [0u8; UNIT_SIZE];
        if pos + UNIT_SIZE > self.size {
            return CqUnit::decode(&bytes);
        }
        // SAFETY: pos + UNIT_SIZE <= size, checked above; the mapping is `size` bytes long
        // and lives as long as `self`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.map.as_ptr().add(pos),
                bytes.as_mut_ptr(),
                UNIT_SIZE,
            );
        }
        CqUnit::decode(&bytes)
    }

    /// Appends one unit at the write position (single writer). `false` when full.
    pub fn append(&self, unit: &CqUnit) -> bool {
        let pos = self.wrote.load(Ordering::Relaxed);
        if pos + UNIT_SIZE > self.size {
            return false;
        }
        let bytes = unit.encode();
        // SAFETY: pos + UNIT_SIZE <= size; only the single writer touches bytes at or after
        // the published write position, and readers never read there.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(pos),
                UNIT_SIZE,
            );
        }
        self.wrote.store(pos + UNIT_SIZE, Ordering::Release);
        true
    }

    /// Moves the write position to `pos` (a unit boundary) and zeroes the stale units after
    /// it, up to the first already-zero unit, and syncs the zeroed range: a crash soon
    /// after must not bring the stale units back (the zeros would otherwise sit only in
    /// the page cache until the next flush of a lower range, which never covers them).
    pub fn truncate_to(&self, fs: &dyn StoreFs, pos: usize) -> Result<(), CqError> {
        let pos = pos.min(self.size) / UNIT_SIZE * UNIT_SIZE;
        self.wrote.store(pos, Ordering::Release);
        let flushed = self.flushed.load(Ordering::Relaxed).min(pos);
        self.flushed.store(flushed, Ordering::Relaxed);
        let zero = [0u8; UNIT_SIZE];
        let mut at = pos;
        while at + UNIT_SIZE <= self.size && self.raw_unit(at) != CqUnit::decode(&zero) {
            // SAFETY: bounds checked by the loop condition; no reader reads at or past `pos`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    zero.as_ptr(),
                    self.map.as_mut_ptr().add(at),
                    UNIT_SIZE,
                );
            }
            at += UNIT_SIZE;
        }
        if at > pos {
            fs.sync_range(&self.path, &self.map, pos, at - pos)
                .map_err(CqError::io(&self.path))?;
        }
        Ok(())
    }

    /// Live truncation: a new file under the same name holding only the units below
    /// `pos`, which replaces this one on disk. Readers holding a window of this file keep
    /// reading unchanged bytes (zeroing in place would change units under them).
    pub fn replace_with_prefix(&self, fs: &dyn StoreFs, pos: usize) -> Result<Self, CqError> {
        let pos = pos.min(self.wrote()) / UNIT_SIZE * UNIT_SIZE;
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        let tmp = dir.join(format!("{}.tmp", file_name(self.from)));
        let io = CqError::io(&self.path);
        let file = fs
            .create_allocated(&tmp, self.size as u64)
            .map_err(CqError::io(&tmp))?;
        let mut prefix = vec![0u8; pos];
        // SAFETY: [0, pos) is below the write position: written and no longer changing.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr(), prefix.as_mut_ptr(), pos) };
        fs.write_at(&tmp, &file, &prefix, 0)
            .map_err(CqError::io(&tmp))?;
        let map = MmapRaw::map_raw(&file).map_err(io)?;
        fs.sync_range(&tmp, &map, 0, pos)
            .map_err(CqError::io(&tmp))?;
        fs.rename(&tmp, &self.path)
            .map_err(CqError::io(&self.path))?;
        crate::fs::sync_dir(dir).map_err(CqError::io(dir))?;
        Ok(Self::new(self.path.clone(), self.from, self.size, map, pos))
    }

    /// Sets the write/flush position after recovery, without touching the bytes.
    pub(super) fn set_positions(&self, pos: usize) {
        self.wrote.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Relaxed);
    }

    /// Bytes written but not yet flushed.
    pub fn dirty_bytes(&self) -> usize {
        self.wrote()
            .saturating_sub(self.flushed.load(Ordering::Relaxed))
    }

    /// msync of the dirty range (`MappedFile.flush`).
    pub fn flush(&self, fs: &dyn StoreFs) -> Result<(), CqError> {
        let wrote = self.wrote();
        let flushed = self.flushed.load(Ordering::Relaxed);
        if wrote > flushed {
            fs.sync_range(&self.path, &self.map, flushed, wrote - flushed)
                .map_err(CqError::io(&self.path))?;
            self.flushed.store(wrote, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Removes the file from disk; the mapping stays valid until the last `Arc` drops.
    pub fn delete(&self) -> Result<(), CqError> {
        if self.deleted.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(CqError::io(&self.path)(e)),
        }
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }
}
