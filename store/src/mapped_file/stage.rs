//! Staged appends: how SYNC_FLUSH appends reach a CommitLog file.
//!
//! Not through the mapping: a store into a clean mapped page takes a write fault that
//! dirties the inode, and on ext4 the next sync then commits the journal. Measured on this
//! project's machines: 33 KB appended through the mapping + msync took about 2 ms, the
//! same bytes by `pwrite(2)` + fdatasync 0.25–0.4 ms, and SYNC_FLUSH waits for every
//! such sync.
//!
//! Not one `pwrite` per record either: that system call, made under the put lock, was
//! most of the put path's cost. So a put encodes its record into the file's stage buffer
//! (a memory copy; the record gets its position at once) and the group commit hands
//! everything staged to the kernel with one `pwrite` right before its sync
//! ([`MappedFile::commit`]), the way RocketMQ's `transientStorePoolEnable` commits a
//! write buffer before flushing. Staged bytes are not readable yet: the write position,
//! below which readers read, only moves past them once they are in the page cache, so
//! dispatch and replication never see them earlier, and a record acknowledged as durable
//! was committed before its sync.
//!
//! Positions: the next append goes to `wrote + stage.len()`, where the stage counts the
//! bytes being written by a running commit (`in_flight`, at `wrote`) and those staged
//! after them. A commit moves the buffer out under `write_lock`, writes it without the
//! lock (appends go on into the other buffer), then advances `wrote` under the lock;
//! commits are serialised by `commit_lock`. Writing zeros ahead (`write_ahead.rs`) starts
//! past the page holding that next position, so it never overwrites a staged byte.

use std::io;
use std::sync::atomic::Ordering;

use super::MappedFile;
use crate::fs::StoreFs;

/// What `MappedFile::write_lock` guards: the bytes staged but not in the file yet.
#[derive(Debug, Default)]
pub(crate) struct Stage {
    /// Encoded records, in order; they belong at `wrote + in_flight`.
    bytes: Vec<u8>,
    /// Bytes a running commit is writing at `wrote`.
    in_flight: u32,
    /// STORETIMESTAMP of the last record in `bytes` (0 when none carried one).
    store_timestamp: i64,
}

impl Stage {
    /// Bytes between the write position and where the next append goes.
    pub(super) fn len(&self) -> u32 {
        self.in_flight + self.bytes.len() as u32
    }

    /// Appends `len` bytes filled by `fill`; they are dropped again if `fill` fails.
    pub(super) fn push<R, E>(
        &mut self,
        len: u32,
        store_timestamp: i64,
        fill: impl FnOnce(&mut [u8]) -> Result<R, E>,
    ) -> Result<R, E> {
        let start = self.bytes.len();
        self.bytes.resize(start + len as usize, 0);
        let out = fill(&mut self.bytes[start..]);
        match &out {
            Ok(_) if store_timestamp != 0 => self.store_timestamp = store_timestamp,
            Ok(_) => {}
            Err(_) => self.bytes.truncate(start),
        }
        out
    }

    /// Drops what is staged (truncation: those bytes lie past the new end).
    pub(super) fn discard(&mut self) {
        self.bytes.clear();
        self.store_timestamp = 0;
    }
}

impl MappedFile {
    /// Where the next append goes: the write position plus the staged bytes.
    pub fn append_position(&self) -> u32 {
        let stage = self.write_lock.lock();
        self.wrote.load(Ordering::Relaxed) + stage.len()
    }

    /// Bytes staged and not yet committed.
    pub fn staged_len(&self) -> u32 {
        self.write_lock.lock().len()
    }

    /// Hands the staged bytes to the kernel with one `pwrite` through `fs` and publishes
    /// them (write position, store timestamp). Returns the write position. A failed write
    /// fences the file like a failed sync (its bytes stay unpublished): what reached the
    /// page cache is unknown.
    pub fn commit(&self, fs: &dyn StoreFs) -> io::Result<u32> {
        let mut buffer = self.commit_lock.lock();
        let (start, store_timestamp) = {
            let mut stage = self.write_lock.lock();
            if stage.bytes.is_empty() {
                return Ok(self.wrote.load(Ordering::Relaxed));
            }
            if self.is_fenced() {
                return Err(self.fence_error());
            }
            buffer.clear();
            std::mem::swap(&mut stage.bytes, &mut *buffer);
            stage.in_flight = buffer.len() as u32;
            (
                self.wrote.load(Ordering::Relaxed),
                std::mem::take(&mut stage.store_timestamp),
            )
        };
        let written = fs.write_at(&self.path, &self.file, &buffer, u64::from(start));
        let mut stage = self.write_lock.lock();
        if let Err(e) = written {
            tracing::error!(path = %self.path.display(), pos = start, len = buffer.len(), error = %e, "writing staged bytes failed: the file refuses flushes until restart");
            self.sync_failed.store(true, Ordering::Release);
            return Err(e);
        }
        let end = start + stage.in_flight;
        stage.in_flight = 0;
        self.wrote.store(end, Ordering::Release);
        if store_timestamp != 0 {
            self.store_timestamp
                .store(store_timestamp, Ordering::Release);
        }
        Ok(end)
    }
}
