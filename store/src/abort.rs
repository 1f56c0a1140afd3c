//! The `abort` marker: created when the store starts, removed by a clean shutdown, so
//! its presence at startup means the previous run ended abnormally
//! (`DefaultMessageStore.createTempFile` / `isTempFileExist`).

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, StoreError};
use crate::fs::sync_dir;

#[derive(Debug)]
pub struct AbortMarker {
    path: PathBuf,
}

impl AbortMarker {
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
        }
    }

    /// True when the previous run did not shut down cleanly.
    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    pub fn create(&self) -> Result<(), StoreError> {
        File::create(&self.path).ctx(|| format!("create {}", self.path.display()))?;
        self.sync_parent()
    }

    pub fn remove(&self) -> Result<(), StoreError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => self.sync_parent(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(format!("remove {}", self.path.display()), e)),
        }
    }

    fn sync_parent(&self) -> Result<(), StoreError> {
        match self.path.parent() {
            Some(dir) => sync_dir(dir).ctx(|| format!("sync {}", dir.display())),
            None => Ok(()),
        }
    }
}
