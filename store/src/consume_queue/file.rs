//! One ConsumeQueue segment file: the 20-byte unit encoding over a
//! [`MappedFile`] of kind [`CONSUME_QUEUE`], which owns allocation, positions, flushing
//! (and its fence) and truncation.
//!
//! Concurrency contract: a single writer (the reput thread, or recovery before serving)
//! appends units and publishes the write position; readers only read below it, so they
//! never see a half-written unit. Recovery reads units above the position (`raw_unit`)
//! only while nothing is appended.

use std::path::Path;

use super::CqError;
use super::unit::{CqUnit, UNIT_SIZE};
use crate::fs::StoreFs;
use crate::mapped_file::{CONSUME_QUEUE, MappedFile, OpenError};

pub struct CqFile {
    file: MappedFile,
}

/// `UtilAll.offset2FileName`: 20-digit zero-padded decimal.
pub fn file_name(offset: i64) -> String {
    format!("{offset:020}")
}

impl From<OpenError> for CqError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Io { path, source } => CqError::Io { path, source },
            OpenError::FileSize {
                path,
                expected,
                actual,
            } => CqError::FileSize {
                path,
                expected,
                actual,
            },
            OpenError::BadName(path) => CqError::BadFileName(path),
        }
    }
}

/// A file size the base can map (`u32`).
fn checked_size(size: usize) -> Result<u32, CqError> {
    u32::try_from(size)
        .map_err(|_| CqError::BadConfig(format!("ConsumeQueue file size {size} is too large")))
}

impl CqFile {
    /// Creates the file `dir/<20-digit from>` with `size` allocated bytes through `fs`.
    pub fn create(fs: &dyn StoreFs, dir: &Path, from: i64, size: usize) -> Result<Self, CqError> {
        let start = u64::try_from(from)
            .map_err(|_| CqError::Internal(format!("negative ConsumeQueue file offset {from}")))?;
        let file = MappedFile::create_at(fs, CONSUME_QUEUE, dir, start, checked_size(size)?)
            .map_err(CqError::io(dir))?;
        Ok(Self { file })
    }

    /// Maps an existing file; like `MappedFileQueue.load` its length must equal `size`,
    /// except that the queue's newest file (`repair_short`) may be short: it is extended
    /// with zeros, which recovery reads as "never written" (stores written before files
    /// were created atomically could hold a 0-byte newest file after a crash).
    /// It starts out as "full"; recovery sets the real write position.
    pub fn open(
        fs: &dyn StoreFs,
        path: &Path,
        size: usize,
        repair_short: bool,
    ) -> Result<Self, CqError> {
        let file = MappedFile::open(fs, CONSUME_QUEUE, path, checked_size(size)?, repair_short)?;
        if i64::try_from(file.end_offset()).is_err() {
            return Err(CqError::BadFileName(path.to_path_buf()));
        }
        Ok(Self { file })
    }

    /// The shared mapped-file base.
    pub fn mapped(&self) -> &MappedFile {
        &self.file
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Byte offset of the file's first unit in the queue's logical stream (its file name;
    /// checked at open to fit an `i64`).
    pub fn from(&self) -> i64 {
        self.file.from_offset() as i64
    }

    pub fn size(&self) -> usize {
        self.file.size() as usize
    }

    pub fn wrote(&self) -> usize {
        self.file.wrote_position() as usize
    }

    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Logical byte offset just past the last written unit.
    pub fn end(&self) -> i64 {
        self.from() + self.wrote() as i64
    }

    /// Last-modified time in ms since the epoch, 0 when unknown (`File.lastModified`).
    pub fn modified_millis(&self) -> i64 {
        self.file.modified_millis()
    }

    /// Unit at byte `pos` of this file, if `pos` is below the write position.
    pub fn unit_at(&self, pos: usize) -> Option<CqUnit> {
        if !pos.is_multiple_of(UNIT_SIZE) || pos + UNIT_SIZE > self.wrote() {
            return None;
        }
        Some(self.raw_unit(pos))
    }

    /// Reads a unit regardless of the write position (recovery scans files still "full");
    /// all zeros past the end of the file.
    pub(super) fn raw_unit(&self, pos: usize) -> CqUnit {
        let pos = u32::try_from(pos).unwrap_or(u32::MAX);
        CqUnit::decode(&self.file.read_array::<UNIT_SIZE>(pos))
    }

    /// Appends one unit at the write position (single writer). `false` when full.
    pub fn append(&self, unit: &CqUnit) -> bool {
        self.file.append(&unit.encode())
    }

    /// Recovery: moves the write position to `pos` (rounded down to a unit) and zeroes
    /// and syncs the stale units after it: a crash soon after must not bring them back.
    pub fn truncate_to(&self, fs: &dyn StoreFs, pos: usize) -> Result<(), CqError> {
        let pos = u32::try_from(pos).unwrap_or(u32::MAX);
        self.file
            .truncate_to(fs, pos)
            .map_err(CqError::io(self.path()))
    }

    /// Live truncation: a new file under the same name holding only the units below
    /// `pos`, which replaces this one on disk. Readers holding a window of this file keep
    /// reading unchanged bytes.
    pub fn replace_with_prefix(&self, fs: &dyn StoreFs, pos: usize) -> Result<Self, CqError> {
        let pos = u32::try_from(pos).unwrap_or(u32::MAX);
        let file = self
            .file
            .replace_with_prefix(fs, pos)
            .map_err(CqError::io(self.path()))?;
        Ok(Self { file })
    }

    /// Sets the write/flush position after recovery, without touching the bytes.
    pub(super) fn set_positions(&self, pos: usize) {
        self.file
            .set_positions(u32::try_from(pos).unwrap_or(u32::MAX));
    }

    /// Bytes written but not yet flushed.
    pub fn dirty_bytes(&self) -> usize {
        self.file.dirty_bytes() as usize
    }

    /// Whether a sync of this file failed (every later flush fails).
    pub fn is_fenced(&self) -> bool {
        self.file.is_fenced()
    }

    /// msync of the dirty range (`MappedFile.flush`).
    pub fn flush(&self, fs: &dyn StoreFs) -> Result<(), CqError> {
        self.file
            .flush(fs)
            .map(drop)
            .map_err(CqError::io(self.path()))
    }

    /// Removes the file from disk; the mapping stays valid until the last `Arc` drops.
    pub fn delete(&self, fs: &dyn StoreFs) -> Result<(), CqError> {
        self.file.delete(fs).map_err(CqError::io(self.path()))
    }

    pub fn is_deleted(&self) -> bool {
        self.file.is_deleted()
    }
}
