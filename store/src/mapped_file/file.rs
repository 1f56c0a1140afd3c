//! One memory-mapped store file, of any [`FileKind`].
//!
//! Invariants every kind relies on:
//! - The file is fully allocated before it is mapped (never sparse): a store into a hole
//!   the file system cannot back raises SIGBUS, while a failed allocation is an error at
//!   creation. It appears under its final name only once allocated.
//! - Stream kinds: bytes below the write position are written and never change again
//!   (truncation either runs with no reader, or replaces the file, see `truncate.rs`), so
//!   readers take no lock; `write_lock` serialises writers.
//! - The first failed sync fences the file for good: every later flush fails too. Linux
//!   drops the dirty state of pages whose write-back failed and reports the error once, so
//!   a retried msync "succeeds" without the data being on disk (see `crate::fence`).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, Ordering};

use bytes::Bytes;
use memmap2::{MmapOptions, MmapRaw};
use parking_lot::Mutex;

use super::kind::{FileKind, Naming, OpenError};
use super::stage::Stage;
use super::{file_name, parse_file_name};
use crate::config::OS_PAGE_SIZE;
use crate::fs::StoreFs;

#[derive(Debug)]
pub struct MappedFile {
    pub(super) kind: FileKind,
    pub(super) path: PathBuf,
    pub(super) from: u64,
    pub(super) size: u32,
    pub(super) map: MmapRaw,
    /// Serialises writers and holds the staged appends (see `stage.rs`); readers never
    /// take it.
    pub(super) write_lock: Mutex<Stage>,
    /// Serialises commits of staged bytes and keeps the spare stage buffer.
    pub(super) commit_lock: Mutex<Vec<u8>>,
    /// Bytes `[0, wrote)` are written and immutable (stream kinds; `size` for fixed ones).
    pub(super) wrote: AtomicU32,
    pub(super) flushed: AtomicU32,
    pub(super) flush_lock: Mutex<()>,
    /// Set by the first failed sync; see the module docs.
    pub(super) sync_failed: AtomicBool,
    /// STORETIMESTAMP of the last record appended (for the checkpoint), published after `wrote`.
    pub(super) store_timestamp: AtomicI64,
    /// Pages below this were pre-faulted for writing ahead of the appends.
    pub(super) prefaulted: AtomicU32,
    pub(super) deleted: AtomicBool,
    pub(super) file: File,
}

impl MappedFile {
    /// Creates the zero-filled, fully allocated file `dir/name` through `fs`. `from` is
    /// its start in the logical stream (0 for kinds not named by offset).
    pub fn create(
        fs: &dyn StoreFs,
        kind: FileKind,
        dir: &Path,
        name: &str,
        from: u64,
        size: u32,
    ) -> io::Result<Self> {
        let (path, file) = crate::fs::create_allocated_named(fs, dir, name, u64::from(size))?;
        let map = MmapOptions::new().len(size as usize).map_raw(&file)?;
        let wrote = if kind.is_fixed() { size } else { 0 };
        Ok(Self::new(kind, path, from, size, map, file, wrote))
    }

    /// [`Self::create`] for kinds named by their start offset.
    pub fn create_at(
        fs: &dyn StoreFs,
        kind: FileKind,
        dir: &Path,
        from: u64,
        size: u32,
    ) -> io::Result<Self> {
        Self::create(fs, kind, dir, &file_name(from), from, size)
    }

    /// Opens an existing file. It must be exactly `size` bytes long, except that a short
    /// file is extended with allocated zeros when `repair_short` (the newest file, cut by
    /// something outside the store: the missing tail reads as never written). Positions
    /// start at "full" until recovery sets them.
    pub fn open(
        fs: &dyn StoreFs,
        kind: FileKind,
        path: &Path,
        size: u32,
        repair_short: bool,
    ) -> Result<Self, OpenError> {
        let from = match kind.naming {
            Naming::Offset => {
                parse_file_name(path).ok_or_else(|| OpenError::BadName(path.to_owned()))?
            }
            Naming::Given => 0,
        };
        let io = |source| OpenError::Io {
            path: path.to_owned(),
            source,
        };
        let file = fs.open_rw(path).map_err(io)?;
        let mut actual = file.metadata().map_err(io)?.len();
        if repair_short && actual < u64::from(size) {
            tracing::warn!(path = %path.display(), kind = kind.name, actual, size, "extending a short newest file with zeros");
            fs.extend_allocated(&file, u64::from(size)).map_err(io)?;
            actual = u64::from(size);
        }
        if actual != u64::from(size) {
            return Err(OpenError::FileSize {
                path: path.to_owned(),
                expected: u64::from(size),
                actual,
            });
        }
        let map = MmapOptions::new()
            .len(size as usize)
            .map_raw(&file)
            .map_err(io)?;
        Ok(Self::new(
            kind,
            path.to_owned(),
            from,
            size,
            map,
            file,
            size,
        ))
    }

    pub(super) fn new(
        kind: FileKind,
        path: PathBuf,
        from: u64,
        size: u32,
        map: MmapRaw,
        file: File,
        position: u32,
    ) -> Self {
        Self {
            kind,
            path,
            from,
            size,
            map,
            write_lock: Mutex::new(Stage::default()),
            commit_lock: Mutex::new(Vec::new()),
            wrote: AtomicU32::new(position),
            flushed: AtomicU32::new(position),
            flush_lock: Mutex::new(()),
            sync_failed: AtomicBool::new(false),
            store_timestamp: AtomicI64::new(0),
            prefaulted: AtomicU32::new(0),
            deleted: AtomicBool::new(false),
            file,
        }
    }

    pub fn kind(&self) -> FileKind {
        self.kind
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

    /// Room left for appends (staged bytes take theirs already).
    pub fn remaining(&self) -> u32 {
        self.size - self.append_position()
    }

    pub fn store_timestamp(&self) -> i64 {
        self.store_timestamp.load(Ordering::Acquire)
    }

    /// Whether a sync of this file failed (it then refuses every later flush).
    pub fn is_fenced(&self) -> bool {
        self.sync_failed.load(Ordering::Acquire)
    }

    /// Appends `len` bytes produced by `fill`, which must overwrite the whole slice it
    /// gets. Returns `None` without calling `fill` when fewer than `len` bytes are left
    /// (or, for [`AppendTo::Mapping`], when staged bytes are pending: the two ways never
    /// mix in one file); when `fill` fails nothing is published or kept.
    ///
    /// [`AppendTo::Mapping`] stores through the mapping and publishes the bytes at once.
    /// [`AppendTo::Stage`] encodes them into the file's stage buffer: they get their
    /// position now but reach the file, and readers, at the next [`Self::commit`] (see
    /// `stage.rs` for why SYNC_FLUSH appends that way).
    pub fn append_with<R, E>(
        &self,
        len: u32,
        store_timestamp: i64,
        to: AppendTo,
        fill: impl FnOnce(&mut [u8]) -> Result<R, E>,
    ) -> Option<Result<R, E>> {
        let mut stage = self.write_lock.lock();
        let pos = self.wrote.load(Ordering::Relaxed) + stage.len();
        if len > self.size - pos {
            return None;
        }
        match to {
            AppendTo::Mapping => {
                if stage.len() != 0 {
                    tracing::error!(path = %self.path.display(), "an append through the mapping while staged bytes are pending");
                    return None;
                }
                // SAFETY: the mapping is `size` bytes and pos + len <= size. Only the
                // holder of `write_lock` touches bytes at or past `wrote`, and readers
                // only read below `wrote`, so this slice aliases nothing.
                let slice = unsafe {
                    std::slice::from_raw_parts_mut(
                        self.map.as_mut_ptr().add(pos as usize),
                        len as usize,
                    )
                };
                let out = fill(slice);
                if out.is_ok() {
                    self.wrote.store(pos + len, Ordering::Release);
                    if store_timestamp != 0 {
                        self.store_timestamp
                            .store(store_timestamp, Ordering::Release);
                    }
                }
                Some(out)
            }
            AppendTo::Stage => Some(stage.push(len, store_timestamp, fill)),
        }
    }

    pub fn append(&self, data: &[u8]) -> bool {
        let Ok(len) = u32::try_from(data.len()) else {
            return false;
        };
        self.append_with(len, 0, AppendTo::Mapping, |dst| {
            dst.copy_from_slice(data);
            Ok::<(), ()>(())
        })
        .is_some()
    }

    /// Borrowed view of written bytes `[pos, pos + len)`; `None` past the write position.
    /// Stream kinds only: bytes of a fixed layout change in place.
    pub fn bytes(&self, pos: u32, len: u32) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if self.kind.is_fixed() || end > self.wrote_position() {
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

    /// Copy of `N` bytes at `pos` whatever the write position (recovery scans files whose
    /// position is not known yet; fixed layouts read published entries); zeros past the
    /// end of the file. The caller's format must make sure no writer changes those bytes
    /// meanwhile (stream kinds: they are below the write position or nobody writes yet).
    pub(crate) fn read_array<const N: usize>(&self, pos: u32) -> [u8; N] {
        let mut out = [0u8; N];
        if (pos as usize).saturating_add(N) <= self.size as usize {
            // SAFETY: in bounds (checked above); the mapping lives as long as `self`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.map.as_ptr().add(pos as usize),
                    out.as_mut_ptr(),
                    N,
                );
            }
        }
        out
    }

    /// Fixed layouts: writes `bytes` in place at `pos`. The caller is the file's single
    /// writer and its format keeps readers off those bytes until they are published (an
    /// entry before its slot points at it; the header is only read at load).
    pub(crate) fn write_fixed(&self, pos: u32, bytes: &[u8]) {
        assert!(self.kind.is_fixed(), "in-place write to a stream file");
        assert!(
            (pos as usize).saturating_add(bytes.len()) <= self.size as usize,
            "write out of bounds"
        );
        // SAFETY: bounds checked above; no reader reads these bytes concurrently (see the
        // contract above), and stream files, whose readers hold slices, are excluded.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(pos as usize),
                bytes.len(),
            );
        }
    }

    /// Fixed layouts: the 4 bytes at `pos` (a multiple of 4) as an atomic, for values that
    /// readers and the writer share (hash slots).
    pub(crate) fn atomic_i32_at(&self, pos: u32) -> &AtomicI32 {
        assert!(self.kind.is_fixed(), "atomic view into a stream file");
        assert!(
            pos.is_multiple_of(4) && pos as usize + 4 <= self.size as usize,
            "misplaced atomic"
        );
        // SAFETY: in bounds; the mapping is page-aligned, so a multiple of 4 is aligned
        // for an AtomicI32, and it lives as long as `self`. Every access to such a range
        // goes through this atomic.
        unsafe { &*(self.map.as_ptr().add(pos as usize) as *const AtomicI32) }
    }

    /// Whole 4 KiB pages written but not flushed (RocketMQ's `isAbleToFlush` count).
    /// Saturating: both positions are loaded separately, and a truncation may lower them.
    pub fn dirty_pages(&self) -> u32 {
        (self.wrote_position() / OS_PAGE_SIZE)
            .saturating_sub(self.flushed_position() / OS_PAGE_SIZE)
    }

    /// Bytes written but not yet flushed.
    pub fn dirty_bytes(&self) -> u32 {
        self.wrote_position()
            .saturating_sub(self.flushed_position())
    }

    /// Makes everything appended so far durable (staged bytes are committed first, then
    /// `msync(MS_SYNC)` through `fs` of the range
    /// written since the last flush; the whole mapping for fixed layouts). Returns the new
    /// flushed position. The first failure fences the file: the flushed position stays,
    /// and this and every later call fail.
    pub fn flush(&self, fs: &dyn StoreFs) -> io::Result<u32> {
        // Staged bytes first (taking `write_lock`, so before `flush_lock`: truncation
        // takes the two in that order).
        if !self.kind.is_fixed() {
            self.commit(fs)?;
        }
        let _flushing = self.flush_lock.lock();
        let wrote = self.wrote_position();
        let flushed = if self.kind.is_fixed() {
            0
        } else {
            self.flushed.load(Ordering::Acquire)
        };
        if self.is_fenced() {
            return Err(self.fence_error());
        }
        if wrote > flushed {
            self.sync(fs, flushed, wrote - flushed)?;
            self.flushed.store(wrote, Ordering::Release);
        }
        Ok(wrote)
    }

    /// msync of `[offset, offset + len)` through `fs`; a failure fences the file.
    pub(super) fn sync(&self, fs: &dyn StoreFs, offset: u32, len: u32) -> io::Result<()> {
        if self.is_fenced() {
            return Err(self.fence_error());
        }
        fs.sync_range(&self.path, &self.map, offset as usize, len as usize)
            .inspect_err(|e| {
                tracing::error!(path = %self.path.display(), kind = self.kind.name, error = %e, "sync failed: the file refuses flushes until restart");
                self.sync_failed.store(true, Ordering::Release);
            })
    }

    pub(super) fn fence_error(&self) -> io::Error {
        io::Error::other(format!(
            "an earlier sync of {} failed; its durable state is unknown until restart",
            self.path.display()
        ))
    }

    /// Removes the file through `fs` (once; a missing file counts as removed). Views
    /// keep the mapping alive until they drop.
    pub fn delete(&self, fs: &dyn StoreFs) -> io::Result<()> {
        if self.deleted.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        match fs.remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => {
                self.deleted.store(false, Ordering::Release);
                Err(e)
            }
        }
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Last-modified time in ms since the epoch, 0 when unknown (`File.lastModified`).
    pub fn modified_millis(&self) -> i64 {
        self.file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// Where [`MappedFile::append_with`] puts the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendTo {
    /// Stored through the mapping, readable at once (ASYNC_FLUSH, every other kind).
    Mapping,
    /// Encoded into the file's stage buffer; one `pwrite(2)` per commit hands them to
    /// the kernel (SYNC_FLUSH, see `stage.rs`).
    Stage,
}

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
