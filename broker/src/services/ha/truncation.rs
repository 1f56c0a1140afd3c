//! The operator's say over unsafe cuts. A slave cuts its log to the last point it shares
//! with its master; a cut below the confirm offset (bytes a replica acknowledged while
//! this broker was master, so possibly acknowledged to producers) or to zero drops data
//! that may exist nowhere else, and a master's history alone is not enough to justify it.
//! Such a cut is refused until an operator writes the exact offset to keep into the file
//! [`ALLOW_FILE`] in `storePathRootDir`; the file is consumed by the cut it allows. See
//! `docs/runbooks/ha-truncation.md`.

use std::path::PathBuf;

use protocol::message::PhysicalOffset;
use store::ReplicaStore;

/// File name, in `storePathRootDir`, of the operator's one-shot permission.
pub const ALLOW_FILE: &str = "allowHaTruncation";

/// A cut that was refused: keep `[0, keep)` of a log ending at `end` with `confirm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub keep: PhysicalOffset,
    pub end: PhysicalOffset,
    pub confirm: PhysicalOffset,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cutting the log from {} back to {} (confirm offset {}) needs an operator: \
             write {} into {ALLOW_FILE} in storePathRootDir",
            self.end, self.keep, self.confirm, self.keep
        )
    }
}

pub fn allow_path(store: &dyn ReplicaStore) -> PathBuf {
    store.root_dir().join(ALLOW_FILE)
}

/// Whether the operator allowed exactly this cut; the permission is used up.
pub fn operator_allows(store: &dyn ReplicaStore, refusal: &Refusal) -> bool {
    let path = allow_path(store);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return false;
    };
    if text.trim().parse::<i64>().ok() != Some(refusal.keep.0) {
        tracing::error!(
            file = %path.display(), wanted = %refusal.keep,
            "the operator's truncation permission names another offset; not cutting"
        );
        return false;
    }
    if let Err(e) = std::fs::remove_file(&path) {
        tracing::error!(file = %path.display(), error = %e, "cannot consume the truncation permission; not cutting");
        return false;
    }
    true
}
