//! `StoreCheckpoint`: three store timestamps persisted in `<root>/checkpoint`, a 4 KiB
//! file (RocketMQ maps one OS page) of which the first 24 bytes are used:
//! physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp, each a big-endian i64.
//!
//! Values are kept in memory and persisted by [`StoreCheckpoint::flush`] with one
//! positioned write and an fdatasync; a torn checkpoint can only make abnormal recovery
//! start earlier (more re-dispatch), never lose data, because the recovery start is a
//! lower bound.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

use crate::config::OS_PAGE_SIZE;
use crate::error::{IoContext, StoreError};

#[derive(Debug)]
pub struct StoreCheckpoint {
    path: PathBuf,
    file: File,
    physic_msg_timestamp: AtomicI64,
    logics_msg_timestamp: AtomicI64,
    index_msg_timestamp: AtomicI64,
}

/// RocketMQ subtracts this from the smaller of the first two timestamps to get the
/// abnormal-recovery bound (`getMinTimestamp`).
const MIN_TIMESTAMP_SLACK_MS: i64 = 3000;

impl StoreCheckpoint {
    /// Opens (creating as a zero-filled 4 KiB file if missing) the checkpoint at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ctx(|| format!("open {}", path.display()))?;
        let len = file
            .metadata()
            .ctx(|| format!("stat {}", path.display()))?
            .len();
        if len < u64::from(OS_PAGE_SIZE) {
            file.set_len(u64::from(OS_PAGE_SIZE))
                .ctx(|| format!("extend {}", path.display()))?;
        }
        let mut head = [0u8; 24];
        file.read_exact_at(&mut head, 0)
            .ctx(|| format!("read {}", path.display()))?;
        let field = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[i * 8..i * 8 + 8]);
            AtomicI64::new(i64::from_be_bytes(b))
        };
        Ok(Self {
            path: path.to_owned(),
            physic_msg_timestamp: field(0),
            logics_msg_timestamp: field(1),
            index_msg_timestamp: field(2),
            file,
        })
    }

    pub fn physic_msg_timestamp(&self) -> i64 {
        self.physic_msg_timestamp.load(Ordering::Acquire)
    }

    pub fn set_physic_msg_timestamp(&self, ts: i64) {
        self.physic_msg_timestamp.store(ts, Ordering::Release);
    }

    pub fn logics_msg_timestamp(&self) -> i64 {
        self.logics_msg_timestamp.load(Ordering::Acquire)
    }

    pub fn set_logics_msg_timestamp(&self, ts: i64) {
        self.logics_msg_timestamp.store(ts, Ordering::Release);
    }

    pub fn index_msg_timestamp(&self) -> i64 {
        self.index_msg_timestamp.load(Ordering::Acquire)
    }

    pub fn set_index_msg_timestamp(&self, ts: i64) {
        self.index_msg_timestamp.store(ts, Ordering::Release);
    }

    /// `getMinTimestamp`: min(physic, logics) - 3 s, floored at 0.
    pub fn min_timestamp(&self) -> i64 {
        let min = self.physic_msg_timestamp().min(self.logics_msg_timestamp());
        (min - MIN_TIMESTAMP_SLACK_MS).max(0)
    }

    /// `getMinTimestampIndex`: also bounded by the index timestamp.
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp())
    }

    pub fn flush(&self) -> Result<(), StoreError> {
        let mut head = [0u8; 24];
        head[..8].copy_from_slice(&self.physic_msg_timestamp().to_be_bytes());
        head[8..16].copy_from_slice(&self.logics_msg_timestamp().to_be_bytes());
        head[16..].copy_from_slice(&self.index_msg_timestamp().to_be_bytes());
        self.file
            .write_all_at(&head, 0)
            .ctx(|| format!("write {}", self.path.display()))?;
        self.file
            .sync_data()
            .ctx(|| format!("sync {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let cp = StoreCheckpoint::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
        assert_eq!(cp.min_timestamp(), 0);
        cp.set_physic_msg_timestamp(10_000);
        cp.set_logics_msg_timestamp(0x0102_0304_0506_0708);
        cp.set_index_msg_timestamp(5_000);
        cp.flush().unwrap();
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(raw.len(), 4096);
        assert_eq!(&raw[..8], &10_000i64.to_be_bytes());
        assert_eq!(&raw[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&raw[16..24], &5_000i64.to_be_bytes());
        let again = StoreCheckpoint::open(&path).unwrap();
        assert_eq!(again.physic_msg_timestamp(), 10_000);
        assert_eq!(again.min_timestamp(), 7_000);
        assert_eq!(again.min_timestamp_index(), 5_000);
    }
}
