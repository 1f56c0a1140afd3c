//! `DataVersion` (`common/DataVersion.java`): the version of a broker's topic table; the
//! nameserver re-reads queue data only when it changes.

use serde::{Deserialize, Serialize};

use super::lenient;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DataVersion {
    /// Milliseconds since the epoch of the last change.
    #[serde(default, deserialize_with = "lenient::i64_or_string")]
    pub timestamp: i64,
    /// Number of changes (a Java `AtomicLong`, written as a plain number).
    #[serde(default, deserialize_with = "lenient::i64_or_string")]
    pub counter: i64,
}

impl DataVersion {
    /// A first version stamped `now_ms`, as `new DataVersion()` does.
    pub fn new(now_ms: i64) -> Self {
        Self {
            timestamp: now_ms,
            counter: 0,
        }
    }

    /// `nextVersion()`: stamp `now_ms` and bump the counter.
    pub fn next(self, now_ms: i64) -> Self {
        Self {
            timestamp: now_ms,
            counter: self.counter.wrapping_add(1),
        }
    }
}
