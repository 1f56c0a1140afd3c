//! The store's one memory-mapped file type ([`MappedFile`]) and the ordered queue of
//! CommitLog segments (`MappedFileQueue`), mirroring RocketMQ's `MappedFile` /
//! `MappedFileQueue` / `AllocateMappedFileService`.
//!
//! CommitLog segments, ConsumeQueue files and IndexFiles are all a `MappedFile`; what
//! differs between them (unit size, stream or fixed layout, naming) is a [`FileKind`]
//! value, so allocation, flushing, the sync fence and truncation exist once. ConsumeQueue
//! and index files are thin encodings over it (`consume_queue::CqFile`,
//! `index::IndexFile`).
//!
//! Concurrency model of stream kinds: one writer appends at the write position while any
//! number of readers read below it. The write position is published with `Release` after
//! the bytes are in place, readers load it with `Acquire`, so a reader never sees a byte
//! that is still being written and written bytes are never changed again (recovery
//! truncation runs before readers exist; live truncation replaces the file).

mod allocate;
mod file;
mod kind;
mod prefault;
mod queue;
mod stage;
mod truncate;
mod write_ahead;

pub use file::{AppendTo, MappedFile, MappedSlice};
pub use kind::{COMMIT_LOG, CONSUME_QUEUE, FileKind, INDEX, Layout, Naming, OpenError};
pub use queue::{FlushOutcome, MappedFileQueue, QueueOptions};

use std::path::Path;

/// `UtilAll.offset2FileName`: the 20-digit zero-padded start offset.
pub fn file_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// Parses a segment file name back into its start offset.
pub fn parse_file_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_kinds;
#[cfg(test)]
mod tests_stage;
