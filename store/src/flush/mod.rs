//! CommitLog flush services (`CommitLog.FlushRealTimeService` / `GroupCommitService`).
//!
//! * ASYNC_FLUSH: a thread flushes every `flushIntervalCommitLog` ms once at least
//!   `flushCommitLogLeastPages` pages are dirty, or everything after
//!   `flushCommitLogThoroughInterval`. Puts never wait for it.
//! * SYNC_FLUSH: group commit. A put that waits registers (end offset, deadline) and gets
//!   a future; one flush thread repeatedly syncs everything written so far and completes
//!   every waiter whose offset is now durable, so all puts that arrive during one
//!   msync share the next one. No thread is parked per request; a waiter past
//!   `syncFlushTimeout` completes with a timeout.
//!
//! Both update the checkpoint's physicMsgTimestamp with the store time of the last
//! flushed record.

mod async_flush;
mod group_commit;

use std::sync::Arc;

pub use group_commit::FlushWaiter;

use crate::checkpoint::StoreCheckpoint;
use crate::commitlog::CommitLog;
use crate::config::{FlushDiskType, MessageStoreConfig};
use crate::error::StoreError;
use async_flush::AsyncFlush;
use group_commit::GroupCommit;
use protocol::message::PhysicalOffset;

#[derive(Debug)]
pub enum FlushService {
    Async(AsyncFlush),
    Sync(GroupCommit),
}

impl FlushService {
    pub fn start(
        config: &MessageStoreConfig,
        log: Arc<CommitLog>,
        checkpoint: Arc<StoreCheckpoint>,
    ) -> Result<Self, StoreError> {
        Ok(match config.flush_disk_type {
            FlushDiskType::AsyncFlush => Self::Async(AsyncFlush::start(config, log, checkpoint)?),
            FlushDiskType::SyncFlush => Self::Sync(GroupCommit::start(config, log, checkpoint)?),
        })
    }

    /// A put that does not wait: let the service know there is new data.
    pub fn wake(&self) {
        match self {
            Self::Async(a) => a.wake(),
            Self::Sync(g) => g.wake(),
        }
    }

    /// SYNC_FLUSH: a future completing once `end` is durable (true) or the timeout hit
    /// (false). `None` under ASYNC_FLUSH.
    pub fn wait_durable(&self, end: PhysicalOffset) -> Option<FlushWaiter> {
        match self {
            Self::Async(_) => None,
            Self::Sync(g) => Some(g.wait_for(end)),
        }
    }

    /// SYNC_FLUSH: group commits so far, each one msync shared by every waiter it
    /// completed (0 under ASYNC_FLUSH).
    pub fn group_commits(&self) -> u64 {
        match self {
            Self::Async(_) => 0,
            Self::Sync(g) => g.groups(),
        }
    }

    /// Stops the thread after a final full flush; pending waiters are completed.
    pub fn shutdown(&self) {
        match self {
            Self::Async(a) => a.shutdown(),
            Self::Sync(g) => g.shutdown(),
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_faults;
#[cfg(test)]
mod tests_mid_log;
