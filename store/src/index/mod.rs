//! IndexFiles: a persistent hash index from `topic#key` to CommitLog offsets
//! (RocketMQ `store/index/`), stored under `index/` with files named by
//! their creation time `yyyyMMddHHmmssSSS` (local time, `UtilAll.timeMillisToHumanString`).

mod file;
mod hash;
mod service;

use std::path::{Path, PathBuf};

pub use file::{ENTRY_SIZE, HEADER_SIZE, IndexFile, SLOT_SIZE, index_file_size};
pub use hash::{index_key_hash, java_hash_continue, java_string_hash, topic_key_hash};
pub use service::{IndexConfig, IndexService, QueryOffsetResult};

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("index file {path} is {actual} bytes, expected {expected}")]
    FileSize {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("index configuration: {0}")]
    BadConfig(String),
}

impl IndexError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IndexError + '_ {
        move |source| IndexError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// `yyyyMMddHHmmssSSS` of `millis` in the process's local time zone.
pub fn local_time_file_name(millis: i64) -> String {
    let secs = millis.div_euclid(1000) as libc::time_t;
    let ms = millis.rem_euclid(1000);
    // SAFETY: `tm` is plain data; localtime_r only writes into it and returns null on error.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers come from live references for the duration of the call.
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if !ok {
        return format!("{millis:017}");
    }
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        ms
    )
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_corrupt;
