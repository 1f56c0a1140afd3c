//! Page-fault avoidance for CommitLog segments: appends run inside the put lock, and a
//! first touch of an unwritten page costs a fault that zero-fills it. These only map pages
//! (or write zeros over zeros), so they never change what readers see.

use std::sync::atomic::Ordering;

use memmap2::Advice;

use super::MappedFile;
use crate::config::OS_PAGE_SIZE;

/// Bytes of a warmed file written back per sync (see [`MappedFile::warm`]).
const WARM_CHUNK: usize = 4 * 1024 * 1024;

/// Bytes pre-faulted per `madvise` call (see [`MappedFile::prefault_ahead`]).
const PREFAULT_CHUNK: u32 = 1024 * 1024;

impl MappedFile {
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
        // In PREFAULT_CHUNKs, each its own system call: one call for the whole window
        // stays in the kernel until every page is faulted, holding the process's mmap lock
        // for reading all along. Measured on a 2-vCPU VM (`perf sched`): a 16 MiB call ran
        // 110 ms without being preempted while the broker's request threads waited to run,
        // and sends stalled as long; an mmap or munmap elsewhere in the broker would also
        // wait for it, and every page fault behind that. Returning to user space every
        // chunk lets the scheduler and the lock's waiters in.
        let mut at = from;
        while at < to {
            let len = PREFAULT_CHUNK.min(to - at);
            if let Err(e) = self
                .map
                .advise_range(Advice::PopulateWrite, at as usize, len as usize)
            {
                tracing::debug!(path = %self.path.display(), error = %e, "pre-faulting is not available");
                self.prefaulted.store(self.size, Ordering::Relaxed);
                return;
            }
            at += len;
            self.prefaulted.fetch_max(at, Ordering::Relaxed);
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
