//! Truncation of a stream file, in the two situations the store has.
//!
//! - Recovery ([`MappedFile::truncate_to`]): nobody reads yet, so the stale tail is zeroed
//!   in place and synced. Zeroed, not just cut off by moving the write position: after a
//!   later crash, recovery scans past the last write and must never find an old record or
//!   unit there that looks valid.
//! - Live ([`MappedFile::replace_with_prefix`]): readers may hold views (a former master
//!   rejoining as slave truncates while serving), and their bytes must not change under
//!   them. A new file holding only the kept prefix replaces this one by rename; readers
//!   keep the unlinked inode mapped. Costs one copy of the prefix per truncation, a rare
//!   event.
//!
//! Both are durable before they return: the zeroed range or the new file is synced, and
//! the rename is synced to the directory.

use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;

use memmap2::MmapOptions;

use super::MappedFile;
use super::kind::Layout;
use crate::config::OS_PAGE_SIZE;
use crate::fs::{StoreFs, sync_dir};

impl MappedFile {
    /// Recovery: declares `[0, pos)` (rounded down to a unit) the valid content, zeroes
    /// the stale bytes after it and makes that durable. Must only run while no reader
    /// holds a view of the file.
    pub(crate) fn truncate_to(&self, fs: &dyn StoreFs, pos: u32) -> io::Result<()> {
        let Layout::Stream {
            unit,
            zero_unit_ends_data,
        } = self.kind.layout
        else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a fixed-layout file is truncated by deleting it",
            ));
        };
        let mut stage = self.write_lock.lock();
        // Staged bytes lie past the write position, so past the new end too.
        stage.discard();
        // A concurrent flush must not publish a flushed position above the new end.
        let _flushing = self.flush_lock.lock();
        let unit = unit.max(1);
        let pos = pos.min(self.size) / unit * unit;
        let end = if zero_unit_ends_data {
            self.first_zero_unit(pos, unit)
        } else {
            self.size
        };
        if end > pos {
            // SAFETY: [pos, end) is inside the mapping; the caller guarantees no views exist.
            let slice = unsafe {
                std::slice::from_raw_parts_mut(
                    self.map.as_mut_ptr().add(pos as usize),
                    (end - pos) as usize,
                )
            };
            // Pages already zero are left alone, so recovering a mostly empty file does
            // not dirty the whole of it.
            for chunk in slice.chunks_mut(OS_PAGE_SIZE as usize) {
                if chunk.iter().any(|b| *b != 0) {
                    chunk.fill(0);
                }
            }
            self.sync(fs, pos, end - pos)?;
        }
        self.wrote.store(pos, Ordering::Release);
        self.flushed.fetch_min(pos, Ordering::AcqRel);
        Ok(())
    }

    /// Start of the first all-zero unit at or after `pos` (`size` when there is none).
    fn first_zero_unit(&self, pos: u32, unit: u32) -> u32 {
        let mut at = pos;
        while at + unit <= self.size {
            // SAFETY: [at, at + unit) is inside the mapping; nobody writes meanwhile.
            let bytes = unsafe {
                std::slice::from_raw_parts(self.map.as_ptr().add(at as usize), unit as usize)
            };
            if bytes.iter().all(|b| *b == 0) {
                return at;
            }
            at += unit;
        }
        self.size
    }

    /// Recovery: sets the write and flushed positions without touching the bytes (a file
    /// before the last one, known to be whole).
    pub(crate) fn set_positions(&self, pos: u32) {
        let pos = pos.min(self.size);
        self.wrote.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
    }

    /// Live truncation: a new file under the same name holding only `[0, pos)` (rounded
    /// down to a unit, at most the write position), which replaces this one on disk. This
    /// file's bytes never change, so views readers still hold stay valid.
    pub(crate) fn replace_with_prefix(&self, fs: &dyn StoreFs, pos: u32) -> io::Result<Self> {
        let unit = self.kind.unit();
        let pos = pos.min(self.wrote_position()) / unit * unit;
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        let name = self
            .path
            .file_name()
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let tmp = dir.join(format!("{}.tmp", name.to_string_lossy()));
        let file = fs.create_allocated(&tmp, u64::from(self.size))?;
        let prefix = self.bytes(0, pos).unwrap_or(&[]);
        fs.write_at(&tmp, &file, prefix, 0)?;
        let map = MmapOptions::new().len(self.size as usize).map_raw(&file)?;
        fs.sync_range(&tmp, &map, 0, pos as usize)?;
        fs.rename(&tmp, &self.path)?;
        sync_dir(dir)?;
        let replaced = Self::new(
            self.kind,
            self.path.clone(),
            self.from,
            self.size,
            map,
            file,
            pos,
        );
        replaced
            .store_timestamp
            .store(self.store_timestamp(), Ordering::Release);
        Ok(replaced)
    }

    /// Recovery: remembers the store time of the last valid record.
    pub(crate) fn set_store_timestamp(&self, ts: i64) {
        self.store_timestamp.store(ts, Ordering::Release);
    }
}
