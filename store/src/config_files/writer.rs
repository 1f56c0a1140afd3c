//! Group commit of one config file on a dedicated thread: the rewrites (three fsyncs
//! each, [`ConfigFile`]) never run on an async worker, and however many changes arrive
//! while one rewrite runs, the next rewrite carries them all.
//!
//! Changes reach the file two ways:
//! - **deferred** ([`ConfigWriter::mark_dirty`]): changes a request made in the live state
//!   without waiting for the disk (a heartbeat auto-creating a group, a send auto-creating
//!   a topic). The thread rewrites the file soon after; 4.9 instead rewrites the whole
//!   file inline per creation (`TopicConfigManager.createTopicInSendMessageMethod`).
//! - **committed** ([`ConfigWriter::commit`], [`ConfigWriter::sync`]): an admin request
//!   stages its change and awaits the returned [`Durable`]. The thread renders the live
//!   state with every staged change on top, writes it, and only after the write
//!   succeeded applies the changes to the live state (still holding the file's persist
//!   lock, so no other persist can write a state without them) and completes their
//!   waiters. Many requests in flight share one rewrite, and each answers only once its
//!   change is on disk.
//!
//! Failure policy: a failed rewrite fails every commit it carried with
//! [`WriteError::Failed`], and their changes are dropped, never applied: the live state
//! never holds an admin change the disk lacks, and the admin can retry. Deferred changes
//! are in force already (their request was answered); the thread retries them every
//! second until a rewrite succeeds, and a commit arriving meanwhile is tried at once.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

use super::{ConfigFile, ConfigFileError};

/// The state one config file holds, as its writer sees it.
pub trait ConfigState: Send + Sync + 'static {
    /// A change an admin request commits.
    type Change: Send + 'static;

    /// The file's content: the live state with `staged` applied on top, in order. The
    /// live state itself is left as it is.
    fn render(&self, staged: &[Self::Change]) -> Vec<u8>;

    /// Applies `written` to the live state, in order: they are on disk now.
    fn apply(&self, written: Vec<Self::Change>);
}

/// Why a committed change is not on disk.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    /// The rewrite carrying the change failed; the change was not applied.
    #[error("{0}")]
    Failed(Arc<ConfigFileError>),
    /// The writer shut down before writing the change; it was not applied.
    #[error("config file {}: the writer stopped before the change was written", .0.display())]
    Stopped(PathBuf),
}

/// Completes once a rewrite carrying the change has succeeded (or failed).
#[must_use = "the change is only known durable once this completes"]
pub struct Durable {
    answer: oneshot::Receiver<Result<(), WriteError>>,
    path: PathBuf,
}

impl Future for Durable {
    type Output = Result<(), WriteError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        Pin::new(&mut this.answer)
            .poll(cx)
            .map(|answer| answer.unwrap_or_else(|_| Err(WriteError::Stopped(this.path.clone()))))
    }
}

type Waiter = oneshot::Sender<Result<(), WriteError>>;

pub struct ConfigWriter<S: ConfigState> {
    shared: Arc<Shared<S::Change>>,
    path: PathBuf,
    thread: Option<JoinHandle<()>>,
}

struct Shared<C> {
    state: Mutex<Pending<C>>,
    changed: Condvar,
}

struct Pending<C> {
    /// Bumped by every `mark_dirty`.
    dirty: u64,
    /// The `dirty` value the last successful rewrite covered.
    persisted: u64,
    /// Committed changes for the next rewrite, in commit order.
    staged: Vec<C>,
    /// Their waiters (and those of `sync`), answered when that rewrite ends.
    waiters: Vec<Waiter>,
    /// After a failed rewrite: deferred changes are not retried before this.
    retry_at: Option<Instant>,
    stop: bool,
}

/// Deferred changes whose rewrite failed are retried this often.
const RETRY_AFTER: Duration = Duration::from_secs(1);

impl<S: ConfigState> ConfigWriter<S> {
    /// Starts the writer thread of `file`, which persists `state`.
    pub fn spawn(file: ConfigFile, state: Arc<S>) -> Result<Self, ConfigFileError> {
        let shared = Arc::new(Shared {
            state: Mutex::new(Pending {
                dirty: 0,
                persisted: 0,
                staged: Vec::new(),
                waiters: Vec::new(),
                retry_at: None,
                stop: false,
            }),
            changed: Condvar::new(),
        });
        let worker = Arc::clone(&shared);
        let name = file
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = file.path().to_path_buf();
        let thread = std::thread::Builder::new()
            .name(format!("persist-{name}"))
            .spawn(move || run(&worker, &file, state.as_ref()))
            .map_err(|source| ConfigFileError::Io {
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            shared,
            path,
            thread: Some(thread),
        })
    }

    /// Asks for a rewrite covering every change made in the live state before this call;
    /// nobody waits for it.
    pub fn mark_dirty(&self) {
        let mut s = self.shared.state.lock();
        s.dirty += 1;
        self.shared.changed.notify_all();
    }

    /// Stages `change` for the next rewrite; it is applied to the live state only once
    /// that rewrite succeeded, which the returned future reports.
    pub fn commit(&self, change: S::Change) -> Durable {
        self.enqueue(Some(change))
    }

    /// A rewrite of the live state as it is now (changes made in it without staging),
    /// reported by the returned future.
    pub fn sync(&self) -> Durable {
        self.enqueue(None)
    }

    fn enqueue(&self, change: Option<S::Change>) -> Durable {
        let (tx, answer) = oneshot::channel();
        let mut s = self.shared.state.lock();
        s.staged.extend(change);
        s.waiters.push(tx);
        self.shared.changed.notify_all();
        Durable {
            answer,
            path: self.path.clone(),
        }
    }

    /// Waits until every change marked dirty so far is on disk, or `within` elapsed;
    /// `true` when it is. Blocks: not for async workers.
    pub fn flush(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut s = self.shared.state.lock();
        let target = s.dirty;
        while s.persisted < target {
            if self.shared.changed.wait_until(&mut s, deadline).timed_out() {
                return s.persisted >= target;
            }
        }
        true
    }
}

impl<S: ConfigState> Drop for ConfigWriter<S> {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What one rewrite carries.
struct Batch<C> {
    dirty: u64,
    staged: Vec<C>,
    waiters: Vec<Waiter>,
}

/// The next batch, waiting for one; `None` once stopped with nothing left to write. On
/// stop, what is pending is written once more (a failure then is final).
fn next_batch<C>(shared: &Shared<C>) -> Option<Batch<C>> {
    let mut s = shared.state.lock();
    loop {
        let deferred = s.dirty != s.persisted;
        let retry_due = s.stop || s.retry_at.is_none_or(|at| Instant::now() >= at);
        if !s.waiters.is_empty() || (deferred && retry_due) {
            return Some(Batch {
                dirty: s.dirty,
                staged: std::mem::take(&mut s.staged),
                waiters: std::mem::take(&mut s.waiters),
            });
        }
        if s.stop {
            return None;
        }
        match s.retry_at {
            // Only a commit (or stop) cuts the retry wait short: a stream of deferred
            // changes on a failing disk does not turn into a stream of rewrites.
            Some(at) if deferred => {
                let _ = shared.changed.wait_until(&mut s, at);
            }
            _ => shared.changed.wait(&mut s),
        }
    }
}

fn run<S: ConfigState>(shared: &Shared<S::Change>, file: &ConfigFile, state: &S) {
    while let Some(batch) = next_batch(shared) {
        let committed = batch.staged.len();
        let result = {
            let _serialised = file.lock_persists();
            let bytes = state.render(&batch.staged);
            let written = file.write_locked(&bytes);
            if written.is_ok() {
                state.apply(batch.staged);
            }
            written
        };
        match result {
            Ok(()) => {
                {
                    let mut s = shared.state.lock();
                    s.persisted = s.persisted.max(batch.dirty);
                    s.retry_at = None;
                    shared.changed.notify_all();
                }
                for w in batch.waiters {
                    let _ = w.send(Ok(()));
                }
            }
            Err(e) => {
                tracing::error!(
                    error = %e,
                    refused = committed,
                    "config rewrite failed: its committed changes are refused and not applied; \
                     deferred changes are retried every second"
                );
                let e = Arc::new(e);
                for w in batch.waiters {
                    let _ = w.send(Err(WriteError::Failed(Arc::clone(&e))));
                }
                let mut s = shared.state.lock();
                if s.stop {
                    return;
                }
                s.retry_at = Some(Instant::now() + RETRY_AFTER);
            }
        }
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
