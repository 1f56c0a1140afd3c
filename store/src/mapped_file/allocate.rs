//! Background creation of the next segment file (`AllocateMappedFileService`): when the
//! queue starts using file N it asks for N+1, so the append that rolls over finds it
//! ready and never waits for allocation (or for pre-faulting when warm-up is on). The
//! same thread keeps the pages just ahead of the write position pre-faulted
//! ([`PREFAULT_WINDOW`]), so appends do not take the page faults themselves, or, for
//! write-through appends, the blocks ahead written ([`WRITE_AHEAD_WINDOW`]).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::{COMMIT_LOG, MappedFile};
use crate::fs::StoreFs;

#[derive(Debug)]
pub(super) struct Allocator {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    size: u32,
    warm: bool,
    /// Write zeros ahead instead of pre-faulting (write-through appends).
    write_ahead: bool,
    fs: Arc<dyn StoreFs>,
    state: Mutex<State>,
    changed: Condvar,
}

/// Bytes past the write position kept pre-faulted; a new round is asked for when less
/// than half of it is left.
pub(super) const PREFAULT_WINDOW: u32 = 16 * 1024 * 1024;

/// Bytes past the write position kept written with zeros under write-through
/// (`write_ahead.rs`); smaller than [`PREFAULT_WINDOW`] because each round is disk
/// writes that group commits' syncs queue behind.
pub(super) const WRITE_AHEAD_WINDOW: u32 = 4 * 1024 * 1024;

#[derive(Debug, Default)]
struct State {
    requested: Option<u64>,
    prefault: Option<Arc<MappedFile>>,
    in_progress: Option<u64>,
    ready: Option<(u64, io::Result<MappedFile>)>,
    stop: bool,
}

impl Allocator {
    pub(super) fn start(
        dir: PathBuf,
        size: u32,
        warm: bool,
        write_ahead: bool,
        fs: Arc<dyn StoreFs>,
    ) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            dir,
            size,
            warm,
            write_ahead,
            fs,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("store-allocate".into())
            .spawn(move || worker.run())?;
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Asks for the file starting at `from` to be made in the background.
    pub(super) fn request(&self, from: u64) {
        let mut state = self.shared.state.lock();
        if state.stop
            || state.in_progress == Some(from)
            || state
                .ready
                .as_ref()
                .is_some_and(|(offset, _)| *offset == from)
        {
            return;
        }
        state.requested = Some(from);
        self.shared.changed.notify_all();
    }

    /// Asks for the pages ahead of `file`'s write position to be pre-faulted.
    pub(super) fn request_prefault(&self, file: &Arc<MappedFile>) {
        let mut state = self.shared.state.lock();
        if state.stop || state.prefault.is_some() {
            return;
        }
        state.prefault = Some(Arc::clone(file));
        self.shared.changed.notify_all();
    }

    /// The preallocated file for `from`, waiting if it is being made right now; `None`
    /// when nothing was prepared for that offset (the caller creates it itself).
    pub(super) fn take(&self, from: u64) -> Option<io::Result<MappedFile>> {
        let mut state = self.shared.state.lock();
        loop {
            match state.ready.take() {
                Some((offset, result)) if offset == from => return Some(result),
                Some((_, Ok(stale))) => {
                    let _ = self.shared.fs.remove_file(stale.path());
                }
                Some((_, Err(_))) => {}
                None => {}
            }
            let pending = state.in_progress == Some(from) || state.requested == Some(from);
            if !pending || state.stop {
                return None;
            }
            self.shared.changed.wait(&mut state);
        }
    }

    /// Forgets any request and deletes the prepared file, waiting for one being made
    /// right now: a file that appeared after the truncation would leave a gap on disk
    /// that fails the next start. The removal is synced to the directory.
    pub(super) fn discard(&self) -> io::Result<()> {
        let mut state = self.shared.state.lock();
        state.requested = None;
        while state.in_progress.is_some() {
            self.shared.changed.wait(&mut state);
        }
        let ready = state.ready.take();
        drop(state);
        if let Some((_, Ok(stale))) = ready {
            self.shared.fs.remove_file(stale.path())?;
            crate::fs::sync_dir(&self.shared.dir)?;
        }
        Ok(())
    }

    /// Stops the worker. A prepared but unused file stays on disk: it is all zeros past
    /// the end of the data, which recovery treats as end of data and removes.
    pub(super) fn shutdown(&self) {
        self.shared.state.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Allocator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    fn run(&self) {
        let mut state = self.state.lock();
        loop {
            if state.stop {
                return;
            }
            let Some(from) = state.requested.take() else {
                if let Some(file) = state.prefault.clone() {
                    drop(state);
                    if self.write_ahead {
                        file.write_zeros_ahead(WRITE_AHEAD_WINDOW);
                    } else {
                        file.prefault_ahead(PREFAULT_WINDOW);
                    }
                    state = self.state.lock();
                    // Cleared only now, so appends do not ask again while it runs.
                    state.prefault = None;
                    continue;
                }
                self.changed.wait(&mut state);
                continue;
            };
            state.in_progress = Some(from);
            drop(state);
            let result =
                MappedFile::create_at(self.fs.as_ref(), COMMIT_LOG, &self.dir, from, self.size);
            if let (true, Ok(file)) = (self.warm, &result) {
                file.warm();
            }
            if let Err(e) = &result {
                tracing::warn!(from, error = %e, "preallocating the next segment file failed");
            }
            state = self.state.lock();
            state.in_progress = None;
            if let Some((_, Ok(stale))) = state.ready.replace((from, result)) {
                let _ = self.fs.remove_file(stale.path());
            }
            self.changed.notify_all();
        }
    }
}
