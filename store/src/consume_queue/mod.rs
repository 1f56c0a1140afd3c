//! ConsumeQueues: per `topic`/`queueId` indexes of 20-byte units pointing into the
//! CommitLog (RocketMQ `ConsumeQueue.java`), stored under
//! `consumequeue/<topic>/<queueId>/<20-digit start offset>`.

mod file;
mod queue;
mod table;
mod unit;

use std::path::{Path, PathBuf};

use protocol::message::QueueOffset;

pub use file::{CqFile, file_name};
pub use queue::{ConsumeQueue, PutOutcome, UnitWindow};
pub use table::ConsumeQueueTable;
pub use unit::{CqUnit, UNIT_SIZE, UNIT_SIZE_I64};

#[derive(Debug, thiserror::Error)]
pub enum CqError {
    #[error("consume queue file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("consume queue file {path} is {actual} bytes, expected {expected}")]
    FileSize {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("consume queue file name {0} is not a 20-digit offset")]
    BadFileName(PathBuf),
    #[error("consume queue offset {0} out of range")]
    BadOffset(QueueOffset),
    #[error("consume queue configuration: {0}")]
    BadConfig(String),
    #[error("consume queue invariant broken: {0}")]
    Internal(String),
}

impl CqError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CqError + '_ {
        move |source| CqError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

#[cfg(test)]
mod tests;
