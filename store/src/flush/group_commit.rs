//! SYNC_FLUSH group commit. The flush thread is the permanent leader of a
//! leader/follower barrier: followers (puts) stage their record (`mapped_file/stage.rs`),
//! enqueue `(end offset, deadline, completion)` and go on (their future resolves later);
//! the leader takes the whole queue, writes everything staged so far with one `pwrite`,
//! syncs it with one msync, and completes every waiter at or below the durable offset.
//! Waiters that arrive during the write and the msync form the next group.
//!
//! Gathering: RocketMQ's `GroupCommitService` starts the next flush as soon as the
//! last one ends. Under a steady load of N producers that each wait for their ack,
//! that splits them into two halves that alternate (one half is being flushed while
//! the other appends), so every sync acknowledges N/2 messages. After a flush that
//! completed k > 1 waiters, this leader waits until k waiters are queued again or a
//! quarter of the last flush's duration (at most [`MAX_GATHER`]) has passed: the
//! producers it just released are usually back within microseconds, and the next
//! sync then acknowledges all of them. A lone waiter never waits.
//!
//! Waiters stay in the shared queue while a sync runs, so a watchdog thread (Java's
//! `FlushDiskWatcher`) can answer those past `syncFlushTimeout` with FLUSH_DISK_TIMEOUT
//! even while the sync is stalled on a slow disk. A failed sync trips the write fence
//! (`crate::fence`): every waiter is answered with a timeout at once and later waits
//! resolve the same way, never as durable.

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

/// Longest wait for a group to gather (see the module comment).
const MAX_GATHER: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct Waiter {
    end: i64,
    deadline: Instant,
    /// Taken when the waiter is answered.
    done: Option<oneshot::Sender<bool>>,
}

#[derive(Debug, Default)]
struct State {
    waiters: Vec<Waiter>,
    stop: bool,
    /// While the leader gathers a group: the queue length that ends the wait (0 when
    /// not gathering). A put that brings the queue to it wakes the leader.
    gather_target: usize,
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
    watchdog: Mutex<Option<JoinHandle<()>>>,
}

/// How often the watchdog looks for waiters past their deadline, at most.
const WATCHDOG_TICK: Duration = Duration::from_millis(20);

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
        let watcher = Arc::clone(&shared);
        let watchdog = std::thread::Builder::new()
            .name("store-flush-watchdog".into())
            .spawn(move || watcher.watch())
            .ctx(|| "start the flush watchdog thread".to_owned())?;
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
            watchdog: Mutex::new(Some(watchdog)),
        })
    }

    pub(super) fn wake(&self) {
        self.shared.wakeup.notify_one();
    }

    pub(super) fn wait_for(&self, end: PhysicalOffset) -> FlushWaiter {
        if self.shared.log.fence().is_tripped() {
            return FlushWaiter(Inner::Done(false));
        }
        if self.shared.log.flushed_offset() >= end {
            return FlushWaiter(Inner::Done(true));
        }
        let (done, rx) = oneshot::channel();
        let mut state = self.shared.state.lock();
        if state.stop || self.shared.log.fence().is_tripped() {
            return FlushWaiter(Inner::Done(false));
        }
        state.waiters.push(Waiter {
            end: end.0,
            deadline: Instant::now() + self.shared.timeout,
            done: Some(done),
        });
        if state.waiters.len() == 1 || state.waiters.len() == state.gather_target {
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
        if let Some(thread) = self.watchdog.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        // Waiters the previous flush completed, and how long it took.
        let (mut released, mut last_flush) = (0usize, Duration::ZERO);
        loop {
            let stop = {
                let mut state = self.state.lock();
                if state.waiters.is_empty() && !state.stop {
                    self.wakeup.wait_for(&mut state, IDLE_FLUSH);
                }
                if released > 1 && !state.stop && state.waiters.len() < released {
                    let until = Instant::now() + (last_flush / 4).min(MAX_GATHER);
                    state.gather_target = released;
                    while state.waiters.len() < released && !state.stop {
                        if self.wakeup.wait_until(&mut state, until).timed_out() {
                            break;
                        }
                    }
                    state.gather_target = 0;
                }
                state.stop
            };
            let started = Instant::now();
            // `None`: the flush failed and the fence is tripped.
            let flushed = self.flush_all();
            last_flush = started.elapsed();
            let now = Instant::now();
            let mut state = self.state.lock();
            let before = state.waiters.len();
            state.waiters.retain_mut(|waiter| {
                let answer = match flushed {
                    Some(flushed) if waiter.end <= flushed => true,
                    Some(_) if now < waiter.deadline && !stop => return true,
                    _ => false,
                };
                send(waiter, answer);
                false
            });
            released = before - state.waiters.len();
            if released > 0 && flushed.is_some() {
                self.groups.fetch_add(1, Ordering::Relaxed);
            }
            if stop {
                let flushed = self.log.flushed_offset().0;
                let fenced = self.log.fence().is_tripped();
                for waiter in &mut state.waiters {
                    send(waiter, !fenced && waiter.end <= flushed);
                }
                state.waiters.clear();
                return;
            }
        }
    }

    /// `FlushDiskWatcher`: answers waiters past their deadline while a sync blocks.
    fn watch(&self) {
        let tick = (self.timeout / 4).clamp(Duration::from_millis(1), WATCHDOG_TICK);
        loop {
            let mut state = self.state.lock();
            if state.stop {
                return;
            }
            let now = Instant::now();
            state.waiters.retain_mut(|waiter| {
                if now < waiter.deadline {
                    return true;
                }
                send(waiter, false);
                false
            });
            drop(state);
            std::thread::sleep(tick);
        }
    }

    /// One group flush: the durable end, or `None` when the flush failed (the write
    /// fence is then tripped and nothing may be acknowledged any more).
    fn flush_all(&self) -> Option<i64> {
        if self.log.fence().is_tripped() {
            return None;
        }
        match self.log.flush(0) {
            Ok(outcome) => {
                if outcome.store_timestamp > 0 {
                    self.checkpoint
                        .set_physic_msg_timestamp(outcome.store_timestamp);
                }
                Some(outcome.flushed as i64)
            }
            Err(e) => {
                tracing::error!(error = %e, "CommitLog group flush failed; answering every waiter FLUSH_DISK_TIMEOUT");
                None
            }
        }
    }
}

/// Answers a waiter (once).
fn send(waiter: &mut Waiter, durable: bool) {
    if let Some(done) = waiter.done.take() {
        let _ = done.send(durable);
    }
}
