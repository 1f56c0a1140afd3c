//! What tells the store's three mapped file types apart, as data: everything else
//! (allocation through `StoreFs`, the mapping, positions and their locking, flushing and
//! its fence, truncation) is the one [`super::MappedFile`].

use std::path::PathBuf;

/// The per-type facts the shared code branches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKind {
    /// For logs and error messages.
    pub name: &'static str,
    pub layout: Layout,
    pub naming: Naming,
}

/// How content is laid out, which decides what "written", "flushed" and "truncated" mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// An append-only stream of `unit`-byte units below a write position: bytes below it
    /// never change again, so readers need no lock and a flush covers only the range
    /// written since the last one. Truncation points are rounded down to a unit.
    Stream {
        unit: u32,
        /// A unit is never all zeros once written, so the first all-zero unit after the
        /// valid prefix is the end of everything the file ever held and truncation can
        /// stop zeroing there. False where written data may contain zero runs of any
        /// length (CommitLog bodies): the whole tail is then scanned.
        zero_unit_ends_data: bool,
    },
    /// Fixed positions rewritten in place (a header and hash slots): there is no write
    /// position (the whole file counts as written from creation on), every flush covers
    /// the whole mapping, and the file is only ever truncated by deleting it.
    Fixed,
}

/// How a file's name relates to its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// `UtilAll.offset2FileName`: the 20-digit start offset in the logical stream.
    Offset,
    /// Chosen by the owner (IndexFiles: creation time); the file has no stream offset.
    Given,
}

/// CommitLog segments: records of any length, named by offset.
pub const COMMIT_LOG: FileKind = FileKind {
    name: "CommitLog segment",
    layout: Layout::Stream {
        unit: 1,
        zero_unit_ends_data: false,
    },
    naming: Naming::Offset,
};

/// ConsumeQueue files: 20-byte units (`CQ_STORE_UNIT_SIZE`), named by logical byte offset.
/// A written unit has `size > 0`, so it is never all zeros.
pub const CONSUME_QUEUE: FileKind = FileKind {
    name: "ConsumeQueue file",
    layout: Layout::Stream {
        unit: crate::consume_queue::UNIT_SIZE as u32,
        zero_unit_ends_data: true,
    },
    naming: Naming::Offset,
};

/// IndexFiles: header, hash slots and entries at fixed places, named by creation time.
pub const INDEX: FileKind = FileKind {
    name: "IndexFile",
    layout: Layout::Fixed,
    naming: Naming::Given,
};

impl FileKind {
    /// Granularity of write and truncation positions.
    pub fn unit(&self) -> u32 {
        match self.layout {
            Layout::Stream { unit, .. } => unit.max(1),
            Layout::Fixed => 1,
        }
    }

    pub fn is_fixed(&self) -> bool {
        self.layout == Layout::Fixed
    }
}

/// Why an existing file could not be mapped.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: file is {actual} bytes, expected {expected}")]
    FileSize {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("{0}: not a 20-digit offset file name")]
    BadName(PathBuf),
}

impl From<OpenError> for crate::error::StoreError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Io { path, source } => Self::io(format!("open {}", path.display()), source),
            OpenError::FileSize {
                path,
                expected,
                actual,
            } => Self::FileSize {
                path,
                expected,
                actual,
            },
            OpenError::BadName(path) => Self::FileName(path),
        }
    }
}
