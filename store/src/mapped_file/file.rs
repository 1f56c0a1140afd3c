//! One memory-mapped segment file.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

use bytes::Bytes;
use memmap2::{Advice, MmapOptions, MmapRaw};
use parking_lot::Mutex;

use super::file_name;
use crate::config::OS_PAGE_SIZE;
use crate::error::{IoContext, StoreError};
use crate::fs::{StoreFs, sync_dir};

#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    from: u64,
    size: u32,
    map: MmapRaw,
    /// Serialises writers; readers never take it.
    write_lock: Mutex<()>,
    /// Bytes `[0, wrote)` are written and immutable.
    wrote: AtomicU32,
    flushed: AtomicU32,
    flush_lock: Mutex<()>,
    /// STORETIMESTAMP of the last record appended (for the checkpoint), published after `wrote`.
    store_timestamp: AtomicI64,
    /// Pages below this were pre-faulted for writing ahead of the appends.
    prefaulted: AtomicU32,
    file: File,
}

impl MappedFile {
    /// Creates a zero-filled, fully allocated file named after `from` in `dir`. The file
    /// is allocated under a temporary name and renamed into place, so a crash never
    /// leaves a short segment file behind (which would fail the size check at load).
    pub fn create(fs: &dyn StoreFs, dir: &Path, from: u64, size: u32) -> io::Result<Self> {
        let path = dir.join(file_name(from));
        let tmp = dir.join(format!("{}.tmp", file_name(from)));
        let file = fs.create_allocated(&tmp, u64::from(size))?;
        fs.rename(&tmp, &path)?;
        sync_dir(dir)?;
        let map = MmapOptions::new().len(size as usize).map_raw(&file)?;
        Ok(Self::new(path, from, size, map, file, 0))
    }

    /// Opens an existing segment. It must be exactly `size` bytes long, except that a
    /// short file is extended with zeros when `repair_short` (the newest file, cut by
    /// something outside the store: the missing tail reads as unwritten space). Positions
    /// start at "full" until recovery sets them.
    pub fn open(
        fs: &dyn StoreFs,
        path: &Path,
        from: u64,
        size: u32,
        repair_short: bool,
    ) -> Result<Self, StoreError> {
        let file = fs
            .open_rw(path)
            .ctx(|| format!("open {}", path.display()))?;
        let mut actual = file
            .metadata()
            .ctx(|| format!("stat {}", path.display()))?
            .len();
        if repair_short && actual < u64::from(size) {
            tracing::warn!(path = %path.display(), actual, size, "extending a short last segment file with zeros");
            fs.extend_allocated(&file, u64::from(size))
                .ctx(|| format!("extend {}", path.display()))?;
            actual = u64::from(size);
        }
        if actual != u64::from(size) {
            return Err(StoreError::FileSize {
                path: path.to_owned(),
                expected: u64::from(size),
                actual,
            });
        }
        let map = MmapOptions::new()
            .len(size as usize)
            .map_raw(&file)
            .ctx(|| format!("mmap {}", path.display()))?;
        Ok(Self::new(path.to_owned(), from, size, map, file, size))
    }

    fn new(path: PathBuf, from: u64, size: u32, map: MmapRaw, file: File, position: u32) -> Self {
        Self {
            path,
            from,
            size,
            map,
            write_lock: Mutex::new(()),
            wrote: AtomicU32::new(position),
            flushed: AtomicU32::new(position),
            flush_lock: Mutex::new(()),
            store_timestamp: AtomicI64::new(0),
            prefaulted: AtomicU32::new(0),
            file,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Offset of the file's first byte in the logical stream (its name).
    pub fn from_offset(&self) -> u64 {
        self.from
    }

    pub fn end_offset(&self) -> u64 {
        self.from + u64::from(self.size)
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn wrote_position(&self) -> u32 {
        self.wrote.load(Ordering::Acquire)
    }

    pub fn flushed_position(&self) -> u32 {
        self.flushed.load(Ordering::Acquire)
    }

    pub fn is_full(&self) -> bool {
        self.wrote_position() >= self.size
    }

    pub fn remaining(&self) -> u32 {
        self.size - self.wrote_position()
    }

    pub fn store_timestamp(&self) -> i64 {
        self.store_timestamp.load(Ordering::Acquire)
    }

    /// Appends `len` bytes produced by `fill`, which must overwrite the whole slice it
    /// gets. Returns `None` without calling `fill` when fewer than `len` bytes are left;
    /// when `fill` fails nothing is published (the bytes stay beyond the write position).
    ///
    /// With `through: Some(buffer)` the bytes are filled into `buffer` (its allocation is
    /// reused across calls) and handed to the kernel with one `pwrite(2)` instead of being
    /// stored through the mapping; readers still read through the mapping (the page
    /// cache is shared). A failed write is logged and also answers `None`, publishing
    /// nothing (the next append overwrites whatever reached the file).
    ///
    /// Why: a store into a clean mapped page takes a write fault that dirties the inode,
    /// and on ext4 the next sync then commits the journal. Measured on this project's
    /// machines: 33 KB appended through the mapping + msync takes about 2 ms, the same
    /// bytes by pwrite + fdatasync 0.25–0.4 ms. SYNC_FLUSH waits for every such sync.
    pub fn append_with<R, E>(
        &self,
        len: u32,
        store_timestamp: i64,
        through: Option<WriteThrough<'_>>,
        fill: impl FnOnce(&mut [u8]) -> Result<R, E>,
    ) -> Option<Result<R, E>> {
        let _writer = self.write_lock.lock();
        let pos = self.wrote.load(Ordering::Relaxed);
        if len > self.size - pos {
            return None;
        }
        let out = match through {
            None => {
                // SAFETY: the mapping is `size` bytes and pos + len <= size. Only the
                // holder of `write_lock` touches bytes at or past `wrote`, and readers
                // only read below `wrote`, so this slice aliases nothing.
                let slice = unsafe {
                    std::slice::from_raw_parts_mut(
                        self.map.as_mut_ptr().add(pos as usize),
                        len as usize,
                    )
                };
                fill(slice)
            }
            Some(WriteThrough { buffer, fs }) => {
                buffer.clear();
                buffer.resize(len as usize, 0);
                let out = fill(buffer);
                if out.is_ok()
                    && let Err(e) = fs.write_at(&self.path, &self.file, buffer, u64::from(pos))
                {
                    tracing::error!(path = %self.path.display(), pos, error = %e, "writing appended bytes failed");
                    return None;
                }
                out
            }
        };
        if out.is_ok() {
            self.wrote.store(pos + len, Ordering::Release);
            if store_timestamp != 0 {
                self.store_timestamp
                    .store(store_timestamp, Ordering::Release);
            }
        }
        Some(out)
    }

    pub fn append(&self, data: &[u8]) -> bool {
        let Ok(len) = u32::try_from(data.len()) else {
            return false;
        };
        self.append_with(len, 0, None, |dst| {
            dst.copy_from_slice(data);
            Ok::<(), ()>(())
        })
        .is_some()
    }

    /// Borrowed view of written bytes `[pos, pos + len)`; `None` past the write position.
    pub fn bytes(&self, pos: u32, len: u32) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.wrote_position() {
            return None;
        }
        // SAFETY: [pos, end) is below the published write position, so it is initialised
        // and no writer touches it again.
        Some(unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(pos as usize), len as usize)
        })
    }

    /// Zero-copy view of written bytes `[pos, pos + len)` that keeps this file mapped
    /// while the `Bytes` (or any clone of it) is alive, even after the file is deleted.
    pub fn read(self: &Arc<Self>, pos: u32, len: u32) -> Option<Bytes> {
        self.bytes(pos, len)?;
        Some(Bytes::from_owner(MappedSlice {
            file: Arc::clone(self),
            pos,
            len,
        }))
    }

    /// View of `[pos, write position)`.
    pub fn read_to_end(self: &Arc<Self>, pos: u32) -> Option<Bytes> {
        let wrote = self.wrote_position();
        if pos > wrote {
            return None;
        }
        self.read(pos, wrote - pos)
    }

    /// Whole 4 KiB pages written but not flushed (RocketMQ's `isAbleToFlush` count).
    /// Saturating: both positions are loaded separately, and a truncation may lower them.
    pub fn dirty_pages(&self) -> u32 {
        (self.wrote_position() / OS_PAGE_SIZE)
            .saturating_sub(self.flushed_position() / OS_PAGE_SIZE)
    }

    /// Makes everything written so far durable (`msync(MS_SYNC)` of the dirty range,
    /// through `fs`). Returns the new flushed position. On an error the flushed position
    /// stays where it was; the caller must not retry and trust a later success (see
    /// `crate::fence`).
    pub fn flush(&self, fs: &dyn StoreFs) -> io::Result<u32> {
        let _flushing = self.flush_lock.lock();
        let wrote = self.wrote_position();
        let flushed = self.flushed.load(Ordering::Acquire);
        if wrote > flushed {
            fs.sync_range(
                &self.path,
                &self.map,
                flushed as usize,
                (wrote - flushed) as usize,
            )?;
            self.flushed.store(wrote, Ordering::Release);
        }
        Ok(wrote)
    }

    /// Recovery: declares `[0, pos)` the valid content, zeroes the rest so stale bytes
    /// can never be mistaken for records after a later crash, and makes it durable.
    /// Must only run while no reader or writer uses the file.
    pub(crate) fn truncate_to(&self, fs: &dyn StoreFs, pos: u32) -> io::Result<()> {
        let _writer = self.write_lock.lock();
        // A concurrent flush must not publish a flushed position above the new end.
        let _flushing = self.flush_lock.lock();
        let pos = pos.min(self.size);
        let tail = (self.size - pos) as usize;
        if tail > 0 {
            // SAFETY: [pos, size) is inside the mapping; the caller guarantees no views exist.
            let slice = unsafe {
                std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(pos as usize), tail)
            };
            // Skip pages that are already zero so recovering a mostly empty file does not
            // dirty the whole of it.
            for chunk in slice.chunks_mut(OS_PAGE_SIZE as usize) {
                if chunk.iter().any(|b| *b != 0) {
                    chunk.fill(0);
                }
            }
            fs.sync_range(&self.path, &self.map, pos as usize, tail)?;
        }
        self.wrote.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
        Ok(())
    }

    /// Live truncation: a new file under the same name holding only `[0, pos)`, which
    /// replaces this one on disk (rename). This file's bytes never change, so views
    /// readers still hold stay valid (they keep the unlinked inode mapped); zeroing in
    /// place would change bytes under them. Costs one copy of the kept prefix, once per
    /// truncation (a rare event: a former master rejoining as slave).
    pub(crate) fn replace_with_prefix(&self, fs: &dyn StoreFs, pos: u32) -> io::Result<Self> {
        let pos = pos.min(self.wrote_position());
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        let tmp = dir.join(format!("{}.tmp", file_name(self.from)));
        let file = fs.create_allocated(&tmp, u64::from(self.size))?;
        let prefix = self.bytes(0, pos).unwrap_or(&[]);
        fs.write_at(&tmp, &file, prefix, 0)?;
        let map = MmapOptions::new().len(self.size as usize).map_raw(&file)?;
        fs.sync_range(&tmp, &map, 0, pos as usize)?;
        fs.rename(&tmp, &self.path)?;
        sync_dir(dir)?;
        let replaced = Self::new(self.path.clone(), self.from, self.size, map, file, pos);
        replaced.set_store_timestamp(self.store_timestamp());
        Ok(replaced)
    }

    /// Recovery: remembers the store time of the last valid record.
    pub(crate) fn set_store_timestamp(&self, ts: i64) {
        self.store_timestamp.store(ts, Ordering::Release);
    }

    /// Hints that the file will be read front to back once (recovery scans).
    pub(crate) fn advise_sequential(&self) {
        let _ = self.map.advise(Advice::Sequential);
        let _ = self.map.advise(Advice::WillNeed);
    }

    /// Whether fewer than `window / 2` bytes past the write position are pre-faulted,
    /// in a file that is not full yet.
    pub(crate) fn prefault_due(&self, window: u32) -> bool {
        let wrote = self.wrote_position();
        let want = wrote.saturating_add(window / 2).min(self.size);
        wrote < self.size && want > self.prefaulted.load(Ordering::Relaxed)
    }

    /// Pre-faults the pages of `[write position, + window)` for writing, so appends into
    /// them take no page fault: a first touch of an unwritten page of the file costs a
    /// fault that zero-fills it, about a tenth of a busy broker's CPU when taken inside
    /// the put lock. Run by the allocator thread while a writer appends; populating
    /// changes no byte (the pages read as zeros either way), it only maps them.
    pub(crate) fn prefault_ahead(&self, window: u32) {
        let page = OS_PAGE_SIZE;
        let from = self
            .prefaulted
            .load(Ordering::Relaxed)
            .max(self.wrote_position() / page * page);
        let to = self
            .wrote_position()
            .saturating_add(window)
            .min(self.size)
            .div_ceil(page)
            .saturating_mul(page)
            .min(self.size);
        if to <= from {
            return;
        }
        // Best effort: without MADV_POPULATE_WRITE (Linux < 5.14) appends fault as before.
        match self
            .map
            .advise_range(Advice::PopulateWrite, from as usize, (to - from) as usize)
        {
            Ok(()) => {
                self.prefaulted.fetch_max(to, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::debug!(path = %self.path.display(), error = %e, "pre-faulting is not available");
                self.prefaulted.store(self.size, Ordering::Relaxed);
            }
        }
    }

    /// Pre-faults every page for writing (`warmMapedFileEnable`) and writes the zeros
    /// through to disk, as `MappedFile.warmMappedFile` does: the first appends then stall
    /// neither on page faults nor, under SYNC_FLUSH, on the file system converting
    /// allocated-but-unwritten extents inside each sync. Only for a fresh file nobody
    /// writes yet (run by the allocator thread).
    ///
    /// Written back [`WARM_CHUNK`] at a time, as RocketMQ forces every 4096 pages while
    /// warming: one sync of the whole file queues a gigabyte of writes in front of
    /// every SYNC_FLUSH put for as long as it takes (seen: 0.4 s stalls with 128 MiB
    /// files); chunks let those syncs slip in between.
    pub(crate) fn warm(&self) {
        let size = self.size as usize;
        for start in (0..size).step_by(WARM_CHUNK) {
            let len = WARM_CHUNK.min(size - start);
            if self
                .map
                .advise_range(Advice::PopulateWrite, start, len)
                .is_err()
            {
                let base = self.map.as_mut_ptr();
                for page in (start..start + len).step_by(OS_PAGE_SIZE as usize) {
                    // SAFETY: inside the mapping; a fresh file is all zeros, so writing a
                    // zero changes nothing but faults the page in.
                    unsafe { base.add(page).write_volatile(0) };
                }
            }
            if let Err(e) = self.map.flush_range(start, len) {
                tracing::warn!(path = %self.path.display(), error = %e, "flushing a warmed file failed");
                return;
            }
        }
        self.prefaulted.store(self.size, Ordering::Relaxed);
    }
}

/// How a write-through append reaches the file: the reused buffer it is encoded into and
/// the file system that `pwrite`s it (see [`MappedFile::append_with`]).
#[derive(Debug)]
pub struct WriteThrough<'a> {
    pub buffer: &'a mut Vec<u8>,
    pub fs: &'a dyn StoreFs,
}

/// Bytes of a warmed file written back per sync (see [`MappedFile::warm`]).
const WARM_CHUNK: usize = 4 * 1024 * 1024;

/// Owner of a zero-copy view: the bytes stay mapped as long as this lives.
#[derive(Debug)]
pub struct MappedSlice {
    file: Arc<MappedFile>,
    pos: u32,
    len: u32,
}

impl AsRef<[u8]> for MappedSlice {
    fn as_ref(&self) -> &[u8] {
        // The range was checked against the write position when the view was made, and
        // written bytes never move or change.
        self.file.bytes(self.pos, self.len).unwrap_or(&[])
    }
}
