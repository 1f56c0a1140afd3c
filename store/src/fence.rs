//! The write fence: once a CommitLog write or flush has failed, the store can no longer
//! tell which acknowledged bytes are on disk, so it stops taking writes until an
//! operator restarts it (recovery then decides from what is really on disk).
//!
//! Why a failed sync cannot simply be retried: Linux clears the dirty state of pages
//! whose write-back failed and reports the error once, so the next `msync`/`fdatasync`
//! succeeds without the data having reached the disk (PostgreSQL's "fsyncgate", 2018).
//! A store that retried and then acknowledged would lie. So the first error trips the
//! fence for good: waiters are answered FLUSH_DISK_TIMEOUT, new puts
//! SERVICE_NOT_AVAILABLE, and the broker reports itself not ready.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

#[derive(Debug, Default)]
pub struct WriteFence {
    tripped: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl WriteFence {
    /// Trips the fence (the first reason is kept).
    pub fn trip(&self, reason: impl Into<String>) {
        let mut slot = self.reason.lock();
        if slot.is_none() {
            let reason = reason.into();
            tracing::error!(%reason, "store fenced: refusing writes until restart");
            *slot = Some(reason);
        }
        self.tripped.store(true, Ordering::Release);
    }

    pub fn is_tripped(&self) -> bool {
        self.tripped.load(Ordering::Acquire)
    }

    /// What tripped the fence, if it is tripped.
    pub fn reason(&self) -> Option<String> {
        if !self.is_tripped() {
            return None;
        }
        self.reason.lock().clone()
    }

    /// The error every later flush answers with.
    pub fn error(&self) -> std::io::Error {
        std::io::Error::other(format!(
            "writes are fenced after an earlier failure ({}); restart the broker",
            self.reason().unwrap_or_default()
        ))
    }
}
