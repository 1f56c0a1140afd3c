//! The few file-system operations the store needs, behind a trait so tests can inject
//! faults (a disk that fills up, allocation failures) the way TiKV raft-engine's `env/`
//! does.
//!
//! Segment files are always created with their blocks *allocated*: a write through a
//! mapping into a sparse hole that the file system cannot back raises SIGBUS, so running
//! out of space must surface here, as an error from [`StoreFs::create_allocated`], never
//! later inside a memory copy.

mod quota;

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

pub use quota::QuotaFs;

pub trait StoreFs: Send + Sync + fmt::Debug {
    /// Creates (or truncates) `path` and allocates `len` bytes of zeros for it.
    fn create_allocated(&self, path: &Path, len: u64) -> io::Result<File>;

    /// Allocates zeros so that `file` is at least `len` bytes (used to repair a short
    /// last segment).
    fn extend_allocated(&self, file: &File, len: u64) -> io::Result<()>;

    /// Opens an existing file read-write.
    fn open_rw(&self, path: &Path) -> io::Result<File>;

    fn remove_file(&self, path: &Path) -> io::Result<()>;

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Fraction (0.0..=1.0) of the file system holding `path` that is in use.
    fn used_ratio(&self, path: &Path) -> io::Result<f64>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

impl StoreFs for OsFs {
    fn create_allocated(&self, path: &Path, len: u64) -> io::Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        if let Err(err) = self.extend_allocated(&file, len) {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(err);
        }
        Ok(file)
    }

    fn extend_allocated(&self, file: &File, len: u64) -> io::Result<()> {
        let len =
            libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: plain syscall on an fd we own; posix_fallocate returns the error number
        // instead of setting errno, and falls back to writing zeros where the file system
        // has no fallocate.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    fn open_rw(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).open(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn used_ratio(&self, path: &Path) -> io::Result<f64> {
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: statvfs only writes into the zeroed struct we pass.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: c_path is a valid NUL-terminated string, st a valid out pointer.
        if unsafe { libc::statvfs(c_path.as_ptr(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let total = st.f_blocks as f64;
        if total <= 0.0 {
            return Ok(0.0);
        }
        // Same formula as UtilAll.getDiskPartitionSpaceUsedPercent: (total - free) / total.
        Ok((total - st.f_bfree as f64) / total)
    }
}

/// Syncs a directory so a created, renamed or removed entry survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
