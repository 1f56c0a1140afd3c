//! Fixed-size memory-mapped segment files (`MappedFile`) and the ordered queue of them
//! that forms one logical byte stream (`MappedFileQueue`), mirroring RocketMQ's
//! `MappedFile` / `MappedFileQueue` / `AllocateMappedFileService`.
//!
//! Concurrency model: one writer appends at the write position while any number of
//! readers read below it. The write position is published with `Release` after the bytes
//! are in place, readers load it with `Acquire`, so a reader never sees a byte that is
//! still being written and written bytes are never changed again (except by recovery
//! truncation, which runs before readers exist).

mod allocate;
mod file;
mod queue;

pub use file::{MappedFile, MappedSlice, WriteThrough};
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
