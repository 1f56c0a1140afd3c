//! Written-ahead blocks for write-through appends (SYNC_FLUSH). Segment files are
//! allocated with `fallocate`, which leaves *unwritten* extents: the first write-back of
//! a block converts its extent, a metadata change that the next `fdatasync` must write
//! too (on ext4 the inode and extent blocks, besides the data). Under SYNC_FLUSH every
//! group commit is such a sync, so each one paid for the conversion of the blocks it
//! covered: measured on this project's machines, 32 KiB appended + fdatasync took a median
//! of about 0.25 ms into fallocated blocks and 0.13 ms into blocks already written.
//!
//! The allocator thread therefore keeps the blocks just past the write position written:
//! zeros, `pwrite` in [`CHUNK`]s, each written back at once (`sync_file_range`), and one
//! `fdatasync` per round so their metadata is durable off the put path. RocketMQ's
//! `warmMapedFileEnable` does the same for the whole file at creation, at the cost of
//! writing a gigabyte up front; this does it a few MiB at a time.
//!
//! Safety of racing the appender: zeros are only written under the file's write lock, and
//! only to whole pages at or past the page-rounded position of the next append (the write
//! position plus the staged bytes, see `stage.rs`); bytes there are still zeros (a fresh or truncated-and-zeroed tail), so the write changes nothing a reader
//! could see, and an append that lands there afterwards simply overwrites the zeros.

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;

use super::MappedFile;
use crate::config::OS_PAGE_SIZE;

/// Bytes of zeros written (and written back) per hold of the write lock.
const CHUNK: u32 = 256 * 1024;

impl MappedFile {
    /// Writes zeros over `[page-rounded write position, + window)` (what is not written
    /// ahead yet) and writes them back; see the module comment. Best effort: a failure
    /// is logged and stops writing ahead in this file (appends then work as without it).
    pub(crate) fn write_zeros_ahead(&self, window: u32) {
        let page = OS_PAGE_SIZE;
        let target = self.wrote_position().saturating_add(window).min(self.size);
        let zeros = vec![0u8; CHUNK as usize];
        let mut written = false;
        loop {
            let chunk = {
                let stage = self.write_lock.lock();
                // Where the next append goes: staged bytes are not in the file yet,
                // and their commit must find nothing but them in their range.
                let wrote = self.wrote.load(Ordering::Relaxed) + stage.len();
                let start = self
                    .prefaulted
                    .load(Ordering::Relaxed)
                    .max(wrote.div_ceil(page).saturating_mul(page));
                if start >= target {
                    break;
                }
                let len = CHUNK.min(self.size - start);
                // Not through `StoreFs`: these bytes carry no data, so neither a failure
                // here nor an injected one may count as a failed append or sync.
                if let Err(e) = self
                    .file
                    .write_all_at(&zeros[..len as usize], u64::from(start))
                {
                    self.give_up_writing_ahead("writing zeros ahead", &e);
                    return;
                }
                (start, len)
            };
            if let Err(e) = write_back(&self.file, chunk.0, chunk.1) {
                self.give_up_writing_ahead("writing back zeros ahead", &e);
                return;
            }
            written = true;
            self.prefaulted
                .fetch_max(chunk.0 + chunk.1, Ordering::Relaxed);
        }
        // Their extents are converted now; make that metadata durable here rather than
        // inside the next group commit's sync.
        if written && let Err(e) = self.file.sync_data() {
            self.give_up_writing_ahead("syncing zeros ahead", &e);
        }
    }

    fn give_up_writing_ahead(&self, what: &str, e: &std::io::Error) {
        tracing::warn!(path = %self.path.display(), error = %e, "{what} failed; appends to this file go to unwritten blocks");
        self.prefaulted.store(self.size, Ordering::Relaxed);
    }
}

/// `sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)`: starts write-back of the range and
/// waits for it, without the file-wide metadata sync of `fdatasync`.
fn write_back(file: &std::fs::File, offset: u32, len: u32) -> std::io::Result<()> {
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: a plain syscall on an open descriptor; no memory is passed.
    let rc = unsafe {
        libc::sync_file_range(file.as_raw_fd(), i64::from(offset), i64::from(len), flags)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
