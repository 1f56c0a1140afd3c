//! The `lock` file: one process per store directory (`DefaultMessageStore.start` takes
//! an exclusive lock on byte 0 of `<root>/lock` and writes the 4 bytes `lock`). Here the
//! lock is a non-blocking `flock`, held for as long as the [`StoreLock`] lives; the
//! kernel drops it when the process dies, so a crash never leaves a stale lock.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{IoContext, StoreError};

#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

impl StoreLock {
    pub fn acquire(path: &Path) -> Result<Self, StoreError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ctx(|| format!("open {}", path.display()))?;
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            return if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                Err(StoreError::LockFailed(path.to_owned()))
            } else {
                Err(StoreError::io(format!("lock {}", path.display()), err))
            };
        }
        file.write_all(b"lock")
            .ctx(|| format!("write {}", path.display()))?;
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = StoreLock::acquire(&path).unwrap();
        assert!(matches!(
            StoreLock::acquire(&path),
            Err(StoreError::LockFailed(_))
        ));
        drop(first);
        StoreLock::acquire(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"lock");
    }
}
