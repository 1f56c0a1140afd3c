//! The few file-system operations the store needs, behind a trait so tests can inject
//! faults (a disk that fills up, allocation failures) the way TiKV raft-engine's `env/`
//! does.
//!
//! Segment files are always created with their blocks *allocated*: a write through a
//! mapping into a sparse hole that the file system cannot back raises SIGBUS, so running
//! out of space must surface here, as an error from [`StoreFs::create_allocated`], never
//! later inside a memory copy.

mod fault;
mod quota;

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::MmapRaw;

pub use fault::{Fault, FaultFs, FaultOp};
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

    /// Makes `[offset, offset + len)` of the mapping of `path` durable (`msync`).
    fn sync_range(&self, path: &Path, map: &MmapRaw, offset: usize, len: usize) -> io::Result<()> {
        let _ = path;
        map.flush_range(offset, len)
    }

    /// Writes all of `buf` at `pos` of `file` (`pwrite`), for write-through appends.
    fn write_at(&self, path: &Path, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
        let _ = path;
        file.write_all_at(buf, pos)
    }

    /// Creates or truncates `path`, writes all of `bytes` and fsyncs it: one whole-file
    /// write of a config file rewrite (`config_files::ConfigFile`).
    fn write_file_synced(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write as _;
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    }

    /// Makes the entries of `dir` durable (a created or renamed file survives a crash).
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        sync_dir(dir)
    }
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

/// Creates `dir/name` holding `len` allocated zero bytes through `fs`, without ever
/// exposing a shorter file under the final name: the file is allocated under `name.tmp`
/// and then renamed, and the directory is synced. Allocated, not sparse: a store into a
/// hole the file system cannot back raises SIGBUS (on a full disk), while a failed
/// allocation is an error here. A crash between `open` and the allocation would
/// otherwise leave a short file that fails the size check at the next start. An existing
/// file of that name is replaced: callers create only names no live file uses. Loaders
/// remove leftover `*.tmp` files with [`remove_stale_tmp`].
pub(crate) fn create_allocated_named(
    fs: &dyn StoreFs,
    dir: &Path,
    name: &str,
    len: u64,
) -> io::Result<(PathBuf, File)> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let file = fs.create_allocated(&tmp, len)?;
    fs.rename(&tmp, &path)?;
    sync_dir(dir)?;
    Ok((path, file))
}

/// Whether `path` is a leftover of an interrupted [`create_sized`]; if so it is removed.
pub(crate) fn remove_stale_tmp(path: &Path) -> io::Result<bool> {
    if path.extension().is_some_and(|e| e == "tmp") {
        tracing::info!(path = %path.display(), "removing a file left by an interrupted creation");
        std::fs::remove_file(path)?;
        return Ok(true);
    }
    Ok(false)
}
