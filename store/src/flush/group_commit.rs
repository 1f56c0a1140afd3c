//! SYNC_FLUSH group commit. The flush thread is the permanent leader of a
//! leader/follower barrier: followers (puts) only enqueue `(end offset, deadline,
//! completion)` and go on (their future resolves later); the leader takes the whole
//! queue, syncs everything written so far with one msync, and completes every waiter
//! at or below the durable offset. Waiters that arrive during the msync form the next
//! group.
//!
//! Gathering: RocketMQ's `GroupCommitService` starts the next flush as soon as the
//! last one ends. Under a steady load of N producers that each wait for their ack,
//! that splits them into two halves that alternate (one half is being flushed while
//! the other appends), so every sync acknowledges N/2 messages. After a flush that
//! completed k > 1 waiters, this leader waits until k waiters are queued again or a
//! quarter of the last flush's duration (at most [`MAX_GATHER`]) has passed: the
//! producers it just released are usually back within microseconds, and the next
//! sync then acknowledges all of them. A lone waiter never waits.

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
    done: oneshot::Sender<bool>,
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
    }
}

impl Shared {
    fn run(&self) {
        let mut group = Vec::new();
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
                std::mem::swap(&mut state.waiters, &mut group);
                state.stop
            };
            let started = Instant::now();
            let flushed = self.flush_all();
            last_flush = started.elapsed();
            released = group.iter().filter(|w| w.end <= flushed).count();
            if released > 0 {
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
