//! A file system that fails on request, for the fault-injection tests: EIO or ENOSPC on
//! allocation, EIO on `msync`, `pwrite` or a config file's rewrite, or any of them
//! stalled, each limited to the files under one path (so the CommitLog volume and the
//! root volume can fail separately, or one config file alone). Everything else goes to
//! the real file system.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use memmap2::MmapRaw;
use parking_lot::Mutex;

use super::{OsFs, StoreFs};

/// Which operation a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// `create_allocated` / `extend_allocated`.
    Allocate,
    /// `sync_range` (msync).
    Sync,
    /// `write_at` (pwrite).
    Write,
    /// `write_file_synced`: the temp file (and `.bak` copy) of a config file rewrite.
    WriteFile,
}

/// What happens instead of the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `EIO`.
    Io,
    /// `ENOSPC`; for [`FaultOp::Allocate`] the volume also reports itself 100 % used.
    NoSpace,
    /// The operation blocks this long, then succeeds (a stalled disk).
    Stall(Duration),
}

#[derive(Debug, Clone)]
struct Rule {
    id: u64,
    op: FaultOp,
    under: PathBuf,
    fault: Fault,
    /// How many more times the rule fires (`None`: until healed).
    times: Option<u32>,
}

#[derive(Debug, Default)]
pub struct FaultFs {
    rules: Mutex<Vec<Rule>>,
    next_id: std::sync::atomic::AtomicU64,
    fired: std::sync::atomic::AtomicU64,
}

impl FaultFs {
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on `op` on any file under `under` fails with `fault`.
    pub fn inject(&self, op: FaultOp, under: impl Into<PathBuf>, fault: Fault) {
        self.add(op, under.into(), fault, None);
    }

    /// Like [`Self::inject`], for the next `times` matching calls only (a transient error:
    /// the call after it succeeds, as a second `msync` does after a failed one).
    pub fn inject_times(&self, op: FaultOp, under: impl Into<PathBuf>, fault: Fault, times: u32) {
        self.add(op, under.into(), fault, Some(times));
    }

    fn add(&self, op: FaultOp, under: PathBuf, fault: Fault, times: Option<u32>) {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.rules.lock().push(Rule {
            id,
            op,
            under,
            fault,
            times,
        });
    }

    /// How many calls a rule has hit so far (a stalled call counts when it starts).
    pub fn fired(&self) -> u64 {
        self.fired.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Removes every rule: the disk is healthy again.
    pub fn heal(&self) {
        self.rules.lock().clear();
    }

    fn check(&self, op: FaultOp, path: &Path) -> io::Result<()> {
        let fired = {
            let mut rules = self.rules.lock();
            let hit = rules
                .iter_mut()
                .find(|r| r.op == op && path.starts_with(&r.under));
            hit.map(|r| {
                if let Some(n) = r.times.as_mut() {
                    *n = n.saturating_sub(1);
                }
                (r.id, r.fault)
            })
        };
        self.rules.lock().retain(|r| r.times != Some(0));
        if fired.is_some() {
            self.fired.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        match fired {
            None => Ok(()),
            Some((_, Fault::Io)) => Err(io::Error::from_raw_os_error(libc::EIO)),
            Some((_, Fault::NoSpace)) => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            Some((id, Fault::Stall(d))) => {
                // Ends early when the rule is healed, so a test never waits out a stall.
                let until = std::time::Instant::now() + d;
                while std::time::Instant::now() < until
                    && self.rules.lock().iter().any(|r| r.id == id)
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(())
            }
        }
    }
}

impl StoreFs for FaultFs {
    fn create_allocated(&self, path: &Path, len: u64) -> io::Result<File> {
        self.check(FaultOp::Allocate, path)?;
        OsFs.create_allocated(path, len)
    }

    fn extend_allocated(&self, file: &File, len: u64) -> io::Result<()> {
        // No path here: a rule for the root ("/") covers it.
        self.check(FaultOp::Allocate, Path::new("/"))?;
        OsFs.extend_allocated(file, len)
    }

    fn open_rw(&self, path: &Path) -> io::Result<File> {
        OsFs.open_rw(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        OsFs.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFs.rename(from, to)
    }

    fn used_ratio(&self, path: &Path) -> io::Result<f64> {
        let full = self.rules.lock().iter().any(|r| {
            r.op == FaultOp::Allocate && r.fault == Fault::NoSpace && path.starts_with(&r.under)
        });
        if full { Ok(1.0) } else { OsFs.used_ratio(path) }
    }

    fn sync_range(&self, path: &Path, map: &MmapRaw, offset: usize, len: usize) -> io::Result<()> {
        self.check(FaultOp::Sync, path)?;
        OsFs.sync_range(path, map, offset, len)
    }

    fn write_at(&self, path: &Path, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
        self.check(FaultOp::Write, path)?;
        OsFs.write_at(path, file, buf, pos)
    }

    fn write_file_synced(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.check(FaultOp::WriteFile, path)?;
        OsFs.write_file_synced(path, bytes)
    }
}
