//! ASYNC_FLUSH: periodic flush with a dirty-page threshold and a "thorough" full flush.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::checkpoint::StoreCheckpoint;
use crate::commitlog::CommitLog;
use crate::config::MessageStoreConfig;
use crate::error::{IoContext, StoreError};

/// Full flushes attempted at shutdown (RocketMQ's `RETRY_TIMES_OVER`).
const SHUTDOWN_RETRIES: usize = 10;

#[derive(Debug)]
struct Shared {
    log: Arc<CommitLog>,
    checkpoint: Arc<StoreCheckpoint>,
    interval: Duration,
    timed: bool,
    least_pages: u32,
    thorough: Duration,
    stop: Mutex<bool>,
    wakeup: Condvar,
}

#[derive(Debug)]
pub struct AsyncFlush {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl AsyncFlush {
    pub(super) fn start(
        config: &MessageStoreConfig,
        log: Arc<CommitLog>,
        checkpoint: Arc<StoreCheckpoint>,
    ) -> Result<Self, StoreError> {
        let shared = Arc::new(Shared {
            log,
            checkpoint,
            interval: Duration::from_millis(config.flush_interval_commit_log.max(1)),
            timed: config.flush_commit_log_timed,
            least_pages: config.flush_commit_log_least_pages,
            thorough: Duration::from_millis(config.flush_commit_log_thorough_interval),
            stop: Mutex::new(false),
            wakeup: Condvar::new(),
        });
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("store-flush".into())
            .spawn(move || worker.run())
            .ctx(|| "start the flush thread".to_owned())?;
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// With `flushCommitLogTimed = false` every put wakes the flusher early.
    pub(super) fn wake(&self) {
        if !self.shared.timed {
            self.shared.wakeup.notify_one();
        }
    }

    pub(super) fn shutdown(&self) {
        *self.shared.stop.lock() = true;
        self.shared.wakeup.notify_one();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        let mut last_thorough = Instant::now();
        loop {
            {
                let mut stop = self.stop.lock();
                if !*stop {
                    self.wakeup.wait_for(&mut stop, self.interval);
                }
                if *stop {
                    break;
                }
            }
            let least = if last_thorough.elapsed() >= self.thorough {
                last_thorough = Instant::now();
                0
            } else {
                self.least_pages
            };
            self.flush(least);
        }
        for _ in 0..SHUTDOWN_RETRIES {
            if self.flush(0) {
                break;
            }
        }
    }

    fn flush(&self, least_pages: u32) -> bool {
        if self.log.fence().is_tripped() {
            // Already reported when it tripped; nothing can be made durable any more.
            return false;
        }
        match self.log.flush(least_pages) {
            Ok(outcome) => {
                if outcome.store_timestamp > 0 {
                    self.checkpoint
                        .set_physic_msg_timestamp(outcome.store_timestamp);
                }
                outcome.flushed >= self.log.max_offset().0 as u64
            }
            Err(e) => {
                tracing::error!(error = %e, "CommitLog flush failed");
                false
            }
        }
    }
}
