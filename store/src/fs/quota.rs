//! A file system with a byte quota over one directory tree, for disk-full tests:
//! allocations that would take the tree past the quota fail with `StorageFull` exactly
//! like a full disk, and the reported usage is relative to the quota.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{OsFs, StoreFs};

#[derive(Debug)]
pub struct QuotaFs {
    root: PathBuf,
    quota: AtomicU64,
    fail_allocations: AtomicBool,
}

impl QuotaFs {
    /// Limits the bytes of all files under `root` to `quota_bytes`.
    pub fn new(root: impl Into<PathBuf>, quota_bytes: u64) -> Self {
        Self {
            root: root.into(),
            quota: AtomicU64::new(quota_bytes),
            fail_allocations: AtomicBool::new(false),
        }
    }

    pub fn set_quota(&self, quota_bytes: u64) {
        self.quota.store(quota_bytes, Ordering::SeqCst);
    }

    /// Makes every allocation fail (a preallocation failure) until reset.
    pub fn fail_allocations(&self, fail: bool) {
        self.fail_allocations.store(fail, Ordering::SeqCst);
    }

    /// Bytes currently held by files under the root.
    pub fn used(&self) -> io::Result<u64> {
        fn walk(dir: &Path) -> io::Result<u64> {
            let mut total = 0;
            let entries = match std::fs::read_dir(dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(e),
            };
            for entry in entries {
                let entry = entry?;
                // A file deleted (or renamed) since the listing holds nothing now.
                let meta = match entry.metadata() {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                total += if meta.is_dir() {
                    walk(&entry.path())?
                } else {
                    meta.len()
                };
            }
            Ok(total)
        }
        walk(&self.root)
    }

    fn full() -> io::Error {
        io::Error::new(
            io::ErrorKind::StorageFull,
            "quota exhausted (No space left on device)",
        )
    }
}

impl StoreFs for QuotaFs {
    fn create_allocated(&self, path: &Path, len: u64) -> io::Result<File> {
        if self.fail_allocations.load(Ordering::SeqCst) {
            return Err(Self::full());
        }
        let existing = std::fs::metadata(path).map_or(0, |m| m.len());
        let after = self.used()?.saturating_sub(existing).saturating_add(len);
        if after > self.quota.load(Ordering::SeqCst) {
            return Err(Self::full());
        }
        OsFs.create_allocated(path, len)
    }

    fn extend_allocated(&self, file: &File, len: u64) -> io::Result<()> {
        let current = file.metadata()?.len();
        if len > current
            && self.used()?.saturating_add(len - current) > self.quota.load(Ordering::SeqCst)
        {
            return Err(Self::full());
        }
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

    fn used_ratio(&self, _path: &Path) -> io::Result<f64> {
        let quota = self.quota.load(Ordering::SeqCst).max(1);
        Ok(self.used()? as f64 / quota as f64)
    }
}
