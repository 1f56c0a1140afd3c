//! The confirm offset: the end of the CommitLog prefix known to be on every in-sync
//! replica (on a master, the lowest acknowledged offset of its in-sync slaves). Kept in
//! memory and persisted as a decimal number in its own file, rewritten atomically when
//! [`ConfirmOffset::persist`] finds it changed.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

use protocol::message::PhysicalOffset;

use crate::config_files::{ConfigFile, ConfigFileError};

#[derive(Debug)]
pub struct ConfirmOffset {
    file: ConfigFile,
    value: AtomicI64,
    persisted: AtomicI64,
}

impl ConfirmOffset {
    /// Loads `path` (missing = 0).
    pub fn open(path: &Path) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::new(path);
        let value = file
            .load_with("confirm offset", |text| {
                text.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|v| *v >= 0)
                    .ok_or_else(|| format!("{:?} is not an offset", text.trim()))
            })?
            .unwrap_or(0);
        Ok(Self {
            file,
            value: AtomicI64::new(value),
            persisted: AtomicI64::new(value),
        })
    }

    pub fn get(&self) -> PhysicalOffset {
        PhysicalOffset(self.value.load(Ordering::Acquire))
    }

    pub fn set(&self, offset: PhysicalOffset) {
        self.value.store(offset.0.max(0), Ordering::Release);
    }

    /// Lowers the value to `offset` if it is above (the log was cut there).
    pub fn clamp_to(&self, offset: PhysicalOffset) {
        self.value.fetch_min(offset.0.max(0), Ordering::AcqRel);
    }

    /// Writes the value if it changed since the last successful write (a failed write
    /// is retried by the next call).
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        let value = self.value.load(Ordering::Acquire);
        if self.persisted.load(Ordering::Acquire) != value {
            self.file.persist_text(&value.to_string())?;
            self.persisted.store(value, Ordering::Release);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_reopen_and_clamps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("confirmOffset");
        let c = ConfirmOffset::open(&path).unwrap();
        assert_eq!(c.get(), PhysicalOffset(0));
        c.set(PhysicalOffset(4096));
        c.persist().unwrap();
        c.clamp_to(PhysicalOffset(100));
        assert_eq!(c.get(), PhysicalOffset(100));
        assert_eq!(
            ConfirmOffset::open(&path).unwrap().get(),
            PhysicalOffset(4096)
        );
        // A torn main file falls back to the previous copy.
        c.set(PhysicalOffset(8192));
        c.persist().unwrap();
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(
            ConfirmOffset::open(&path).unwrap().get(),
            PhysicalOffset(4096)
        );
    }

    /// A failed write must not count as persisted.
    #[test]
    fn a_failed_persist_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("confirmOffset");
        let c = ConfirmOffset::open(&path).unwrap();
        // A non-empty directory where the file goes: the rename into place fails.
        std::fs::create_dir_all(path.join("blocker")).unwrap();
        c.set(PhysicalOffset(777));
        assert!(c.persist().is_err());
        std::fs::remove_dir_all(&path).unwrap();
        c.persist().unwrap();
        assert_eq!(
            ConfirmOffset::open(&path).unwrap().get(),
            PhysicalOffset(777)
        );
    }
}
