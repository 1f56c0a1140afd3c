//! SYNC_FLUSH group commit. The flush thread is the permanent leader of a
//! leader/follower barrier: followers (puts) only enqueue `(end offset, deadline,
//! completion)` and go on (their future resolves later); the leader takes the whole
//! queue, syncs everything written so far with one msync, and completes every waiter
//! at or below the durable offset. Waiters that arrive during the msync form the next
//! group.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use protocol::message::PhysicalOffset;
use tokio::sync::oneshot;

use crate::checkpoint::StoreCheckpoint;
use crate::commitlog::CommitLog;
use crate::config::MessageStoreConfig;
use crate::error::{IoContext, StoreError};

/// With no waiters the thread still flushes this often (puts that do not wait).
const IDLE_FLUSH: Duration = Duration::from_millis(10);

#[derive(Debug)]
struct Waiter {
    end: i64,
    deadline: Instant,
    done: oneshot::Sender<bool>,
}

#[derive(Debug, Default)]
struct State {
    waiters: Vec<Waiter>,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    log: Arc<CommitLog>,
    checkpoint: Arc<StoreCheckpoint>,
    timeout: Duration,
    state: Mutex<State>,
    wakeup: Condvar,
    /// Flushes that completed at least one waiter (a group commit), for statistics.
    groups: AtomicU64,
}

#[derive(Debug)]
pub struct GroupCommit {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Resolves to `true` once the awaited offset is durable, `false` on timeout (or when
/// the store stopped before it could be flushed).
#[derive(Debug)]
pub struct FlushWaiter(Inner);

#[derive(Debug)]
enum Inner {
    Done(bool),
    Pending(oneshot::Receiver<bool>),
}

impl Future for FlushWaiter {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        match &mut self.0 {
            Inner::Done(v) => Poll::Ready(*v),
            Inner::Pending(rx) => Pin::new(rx).poll(cx).map(|r| r.unwrap_or(false)),
        }
    }
}

impl GroupCommit {
    pub(super) fn start(
        config: &MessageStoreConfig,
        log: Arc<CommitLog>,
        checkpoint: Arc<StoreCheckpoint>,
    ) -> Result<Self, StoreError> {
        let shared = Arc::new(Shared {
            log,
            checkpoint,
            timeout: Duration::from_millis(config.sync_flush_timeout),
            state: Mutex::new(State::default()),
            wakeup: Condvar::new(),
            groups: AtomicU64::new(0),
        });
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("store-group-commit".into())
            .spawn(move || worker.run())
            .ctx(|| "start the group commit thread".to_owned())?;
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub(super) fn wake(&self) {
        self.shared.wakeup.notify_one();
    }

    pub(super) fn wait_for(&self, end: PhysicalOffset) -> FlushWaiter {
        if self.shared.log.flushed_offset() >= end {
            return FlushWaiter(Inner::Done(true));
        }
        let (done, rx) = oneshot::channel();
        let mut state = self.shared.state.lock();
        if state.stop {
            return FlushWaiter(Inner::Done(false));
        }
        state.waiters.push(Waiter {
            end: end.0,
            deadline: Instant::now() + self.shared.timeout,
            done,
        });
        if state.waiters.len() == 1 {
            self.shared.wakeup.notify_one();
        }
        FlushWaiter(Inner::Pending(rx))
    }

    /// Group commits so far (flushes that completed at least one waiter).
    pub(super) fn groups(&self) -> u64 {
        self.shared.groups.load(Ordering::Relaxed)
    }

    pub(super) fn shutdown(&self) {
        self.shared.state.lock().stop = true;
        self.shared.wakeup.notify_one();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        let mut group = Vec::new();
        loop {
            let stop = {
                let mut state = self.state.lock();
                if state.waiters.is_empty() && !state.stop {
                    self.wakeup.wait_for(&mut state, IDLE_FLUSH);
                }
                std::mem::swap(&mut state.waiters, &mut group);
                state.stop
            };
            let flushed = self.flush_all();
            if group.iter().any(|w| w.end <= flushed) {
                self.groups.fetch_add(1, Ordering::Relaxed);
            }
            let now = Instant::now();
            let mut pending = Vec::new();
            for waiter in group.drain(..) {
                if waiter.end <= flushed {
                    let _ = waiter.done.send(true);
                } else if now >= waiter.deadline || stop {
                    let _ = waiter.done.send(false);
                } else {
                    pending.push(waiter);
                }
            }
            if !pending.is_empty() {
                let mut state = self.state.lock();
                pending.append(&mut state.waiters);
                state.waiters = pending;
            }
            if stop {
                for waiter in self.state.lock().waiters.drain(..) {
                    let _ = waiter.done.send(waiter.end <= self.log.flushed_offset().0);
                }
                return;
            }
        }
    }

    /// One group flush; on an I/O error the waiters stay queued until their deadline.
    fn flush_all(&self) -> i64 {
        match self.log.flush(0) {
            Ok(outcome) => {
                if outcome.store_timestamp > 0 {
                    self.checkpoint
                        .set_physic_msg_timestamp(outcome.store_timestamp);
                }
                outcome.flushed as i64
            }
            Err(e) => {
                tracing::error!(error = %e, "CommitLog group flush failed");
                self.log.flushed_offset().0
            }
        }
    }
}
