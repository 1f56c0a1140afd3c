//! Errors of the store engine. Put outcomes are not errors: they are reported as a
//! RocketMQ [`crate::PutMessageStatus`].

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}: file is {actual} bytes, the configured file size is {expected}")]
    FileSize {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("{0}: not a store file name (expected a 20-digit offset)")]
    FileName(PathBuf),
    #[error("Lock failed, MQ already started ({0})")]
    LockFailed(PathBuf),
    #[error("store data is corrupt: {0}")]
    Corrupt(String),
    #[error("bad store configuration: {0}")]
    Config(String),
    #[error("the store is shut down")]
    ShutDown,
    #[error(transparent)]
    ConsumeQueue(#[from] crate::consume_queue::CqError),
    #[error(transparent)]
    Index(#[from] crate::index::IndexError),
    #[error(transparent)]
    ConfigFile(#[from] crate::config_files::ConfigFileError),
}

impl StoreError {
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// Adds context to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, StoreError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Io {
            context: context(),
            source,
        })
    }
}
