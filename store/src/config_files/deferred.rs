//! Coalesced persists on a dedicated thread, for changes made on request paths (a
//! heartbeat auto-creating groups, a send auto-creating a topic): the request only marks
//! the file dirty, and the thread rewrites the file once for however many changes
//! arrived meanwhile. The three fsyncs of a persist never run on an async worker, and a
//! burst of N creations costs a few rewrites instead of N (4.9 rewrites the whole file
//! inline per creation, `TopicConfigManager.createTopicInSendMessageMethod`).
//!
//! A change marked dirty is on disk within one persist time unless the disk fails; a
//! failed persist is retried every second (the in-memory state stays authoritative, and
//! the next successful persist writes all of it).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::{ConfigFile, ConfigFileError};

/// Renders the current document (called under the file's persist lock).
pub type Snapshot = Box<dyn Fn() -> Vec<u8> + Send + Sync>;

pub struct DeferredPersist {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Bumped by every `mark_dirty`.
    requested: u64,
    /// The `requested` value the last successful persist covered.
    persisted: u64,
    stop: bool,
}

const RETRY_AFTER: Duration = Duration::from_secs(1);

impl DeferredPersist {
    /// Starts the persist thread of `file`.
    pub fn spawn(file: ConfigFile, snapshot: Snapshot) -> Result<Self, ConfigFileError> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
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
            .spawn(move || run(&worker, &file, &snapshot))
            .map_err(|source| ConfigFileError::Io { path, source })?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Asks for a persist covering every change made before this call.
    pub fn mark_dirty(&self) {
        let mut s = self.shared.state.lock();
        s.requested += 1;
        self.shared.changed.notify_all();
    }

    /// Waits until every change marked so far is on disk, or `within` elapsed; `true` when
    /// it is.
    pub fn flush(&self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let mut s = self.shared.state.lock();
        let target = s.requested;
        while s.persisted < target {
            if self.shared.changed.wait_until(&mut s, deadline).timed_out() {
                return s.persisted >= target;
            }
        }
        true
    }
}

impl Drop for DeferredPersist {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(shared: &Shared, file: &ConfigFile, snapshot: &Snapshot) {
    loop {
        let target = {
            let mut s = shared.state.lock();
            while s.requested == s.persisted && !s.stop {
                shared.changed.wait(&mut s);
            }
            if s.requested == s.persisted {
                return;
            }
            s.requested
        };
        match persist(file, snapshot) {
            Ok(()) => {
                let mut s = shared.state.lock();
                s.persisted = s.persisted.max(target);
                shared.changed.notify_all();
            }
            Err(e) => {
                tracing::error!(error = %e, "config persist failed; retrying");
                let mut s = shared.state.lock();
                if s.stop {
                    return;
                }
                let _ = shared.changed.wait_for(&mut s, RETRY_AFTER);
            }
        }
    }
}

fn persist(file: &ConfigFile, snapshot: &Snapshot) -> Result<(), ConfigFileError> {
    file.persist_with(snapshot)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[test]
    fn coalesces_and_flushes_the_latest_state() {
        let dir = tempfile::tempdir().unwrap();
        let file = ConfigFile::new(dir.path().join("x.json"));
        let value = Arc::new(AtomicU64::new(0));
        let v = Arc::clone(&value);
        let deferred = DeferredPersist::spawn(
            file.clone(),
            Box::new(move || v.load(Ordering::SeqCst).to_string().into_bytes()),
        )
        .unwrap();
        for i in 1..=500 {
            value.store(i, Ordering::SeqCst);
            deferred.mark_dirty();
        }
        assert!(deferred.flush(Duration::from_secs(10)));
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "500");
        drop(deferred);
    }
}
