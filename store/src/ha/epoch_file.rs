//! The epoch file (`EpochFileCache` of RocketMQ 5.x): which leadership epoch wrote which
//! part of the CommitLog. Entry `(epoch, start)` says that bytes from `start` up to the
//! next entry's start (or the log end) were written by the master of `epoch`. Epochs and
//! start offsets only grow. The file is rewritten whole and atomically on every change
//! (`.tmp` + rename, see `config_files::atomic_file`), one `epoch,startOffset` per line.

use std::path::Path;

use parking_lot::Mutex;
use protocol::message::PhysicalOffset;

use crate::config_files::{ConfigFile, ConfigFileError};

/// Entries beyond this are refused when loading (a corrupt or hostile file).
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EpochEntry {
    pub epoch: i32,
    #[serde(rename = "startOffset")]
    pub start_offset: PhysicalOffset,
}

#[derive(Debug, thiserror::Error)]
pub enum EpochError {
    #[error("epoch {new} is not above the current epoch {current}")]
    Stale { current: i32, new: i32 },
    #[error("epoch {epoch} cannot start at {start} before the previous start {previous}")]
    OffsetBackwards {
        epoch: i32,
        start: PhysicalOffset,
        previous: PhysicalOffset,
    },
    #[error(transparent)]
    File(#[from] ConfigFileError),
}

#[derive(Debug)]
pub struct EpochFile {
    file: ConfigFile,
    entries: Mutex<Vec<EpochEntry>>,
}

impl EpochFile {
    /// Loads `path` (missing = no entries). Malformed lines make the load fail.
    pub fn open(path: &Path) -> Result<Self, EpochError> {
        let file = ConfigFile::new(path);
        let entries = file.load_with("epoch file", parse)?.unwrap_or_default();
        Ok(Self {
            file,
            entries: Mutex::new(entries),
        })
    }

    pub fn entries(&self) -> Vec<EpochEntry> {
        self.entries.lock().clone()
    }

    pub fn last(&self) -> Option<EpochEntry> {
        self.entries.lock().last().copied()
    }

    /// The current epoch (0 before any role change was recorded).
    pub fn current_epoch(&self) -> i32 {
        self.last().map_or(0, |e| e.epoch)
    }

    /// Records that `epoch` writes from `start` on. Re-recording the current last entry
    /// is a no-op; a lower epoch is refused. Entries starting beyond `start` (data this
    /// broker never had) are dropped first.
    pub fn begin(&self, epoch: i32, start: PhysicalOffset) -> Result<(), EpochError> {
        let mut entries = self.entries.lock();
        if let Some(last) = entries.last() {
            if last.epoch == epoch && last.start_offset <= start {
                return Ok(());
            }
            if epoch <= last.epoch {
                return Err(EpochError::Stale {
                    current: last.epoch,
                    new: epoch,
                });
            }
        }
        let mut next = entries.clone();
        next.retain(|e| e.start_offset < start);
        if let Some(prev) = next.last()
            && prev.start_offset > start
        {
            return Err(EpochError::OffsetBackwards {
                epoch,
                start,
                previous: prev.start_offset,
            });
        }
        next.push(EpochEntry {
            epoch,
            start_offset: start,
        });
        self.file.persist_text(&render(&next))?;
        *entries = next;
        Ok(())
    }

    /// Replaces every entry (a slave adopting its master's history after truncation).
    pub fn replace(&self, new: Vec<EpochEntry>) -> Result<(), EpochError> {
        let mut entries = self.entries.lock();
        self.file.persist_text(&render(&new))?;
        *entries = new;
        Ok(())
    }

    /// Drops entries that start beyond `offset` (the log was cut there).
    pub fn truncate_beyond(&self, offset: PhysicalOffset) -> Result<(), EpochError> {
        let mut entries = self.entries.lock();
        if entries.iter().all(|e| e.start_offset <= offset) {
            return Ok(());
        }
        let next: Vec<EpochEntry> = entries
            .iter()
            .copied()
            .filter(|e| e.start_offset <= offset)
            .collect();
        self.file.persist_text(&render(&next))?;
        *entries = next;
        Ok(())
    }
}

fn render(entries: &[EpochEntry]) -> String {
    entries
        .iter()
        .map(|e| format!("{},{}\n", e.epoch, e.start_offset.0))
        .collect()
}

fn parse(text: &str) -> Result<Vec<EpochEntry>, String> {
    let mut out: Vec<EpochEntry> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if out.len() >= MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} entries"));
        }
        let (epoch, start) = line
            .split_once(',')
            .ok_or_else(|| format!("line {line:?} is not `epoch,startOffset`"))?;
        let epoch: i32 = epoch
            .trim()
            .parse()
            .map_err(|_| format!("bad epoch in {line:?}"))?;
        let start: i64 = start
            .trim()
            .parse()
            .map_err(|_| format!("bad start offset in {line:?}"))?;
        if start < 0 {
            return Err(format!("negative start offset in {line:?}"));
        }
        if let Some(prev) = out.last()
            && (prev.epoch >= epoch || prev.start_offset.0 > start)
        {
            return Err(format!("entry {line:?} does not follow the previous one"));
        }
        out.push(EpochEntry {
            epoch,
            start_offset: PhysicalOffset(start),
        });
    }
    Ok(out)
}

/// `entries` with the implicit epoch 0 from offset 0 that bytes written before a log's
/// first recorded epoch belong to (a broker that started as master before any role
/// change).
pub(crate) fn with_implicit_epoch0(entries: &[EpochEntry]) -> Vec<EpochEntry> {
    let implicit = EpochEntry {
        epoch: 0,
        start_offset: PhysicalOffset(0),
    };
    let mut out = Vec::with_capacity(entries.len() + 1);
    if entries
        .first()
        .is_none_or(|f| f.start_offset > PhysicalOffset(0) && f.epoch > 0)
    {
        out.push(implicit);
    }
    out.extend_from_slice(entries);
    out
}

/// `findLastConsistentPoint`: the highest offset up to which a local log and a remote log
/// were written by the same epochs. Each side is its entries plus its log end. Walking
/// the local entries from the newest, the first one the remote also has (same epoch and
/// start) gives the answer: the lower of the two ends of that epoch. Bytes written before
/// a log's first recorded epoch (a broker that started as master before any role change)
/// count as an epoch 0 starting at 0. `None`: nothing in common.
pub fn last_consistent_point(
    local: &[EpochEntry],
    local_end: PhysicalOffset,
    remote: &[EpochEntry],
    remote_end: PhysicalOffset,
) -> Option<PhysicalOffset> {
    let (local, remote) = (with_implicit_epoch0(local), with_implicit_epoch0(remote));
    let end_of = |entries: &[EpochEntry], i: usize, log_end: PhysicalOffset| {
        entries.get(i + 1).map_or(log_end, |n| n.start_offset)
    };
    for (i, entry) in local.iter().enumerate().rev() {
        if let Some(j) = remote.iter().position(|r| r == entry) {
            let point = end_of(&local, i, local_end).min(end_of(&remote, j, remote_end));
            return Some(point.max(entry.start_offset));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, start: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset: PhysicalOffset(start),
        }
    }

    #[test]
    fn begin_persists_and_refuses_stale_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("epochFile");
        let f = EpochFile::open(&path).unwrap();
        assert_eq!(f.current_epoch(), 0);
        f.begin(1, PhysicalOffset(0)).unwrap();
        f.begin(1, PhysicalOffset(100)).unwrap();
        f.begin(3, PhysicalOffset(500)).unwrap();
        assert!(matches!(
            f.begin(2, PhysicalOffset(600)),
            Err(EpochError::Stale { current: 3, new: 2 })
        ));
        let again = EpochFile::open(&path).unwrap();
        assert_eq!(again.entries(), vec![e(1, 0), e(3, 500)]);
        // A new epoch starting inside an older one drops what it supersedes.
        again.begin(4, PhysicalOffset(300)).unwrap();
        assert_eq!(again.entries(), vec![e(1, 0), e(4, 300)]);
        again.truncate_beyond(PhysicalOffset(200)).unwrap();
        assert_eq!(EpochFile::open(&path).unwrap().entries(), vec![e(1, 0)]);
    }

    #[test]
    fn malformed_files_are_refused() {
        for text in ["1", "x,1", "1,-5", "2,10\n1,20", "1,20\n2,10"] {
            assert!(parse(text).is_err(), "{text:?}");
        }
        assert_eq!(parse("1,0\n\n2,10\n").unwrap(), vec![e(1, 0), e(2, 10)]);
    }

    #[test]
    fn consistent_point_of_a_divergent_former_master() {
        // Old master wrote epoch 1 up to 900; the new master took over at 700 in epoch 2.
        let old = [e(0, 0), e(1, 400)];
        let new = [e(0, 0), e(1, 400), e(2, 700)];
        assert_eq!(
            last_consistent_point(&old, PhysicalOffset(900), &new, PhysicalOffset(1200)),
            Some(PhysicalOffset(700))
        );
        // A slave that is merely behind keeps everything it has.
        assert_eq!(
            last_consistent_point(&old, PhysicalOffset(500), &new, PhysicalOffset(1200)),
            Some(PhysicalOffset(500))
        );
        // No epochs on either side: one implicit epoch; the shorter log wins.
        assert_eq!(
            last_consistent_point(&[], PhysicalOffset(50), &[], PhysicalOffset(80)),
            Some(PhysicalOffset(50))
        );
        // A broker that started as master wrote its first bytes before any epoch was
        // recorded: they are epoch 0 on both sides, not a divergence.
        assert_eq!(
            last_consistent_point(
                &[],
                PhysicalOffset(20_000),
                &[e(1, 18_499)],
                PhysicalOffset(26_881)
            ),
            Some(PhysicalOffset(18_499))
        );
        assert_eq!(
            last_consistent_point(
                &[e(1, 18_499)],
                PhysicalOffset(26_881),
                &[],
                PhysicalOffset(18_499)
            ),
            Some(PhysicalOffset(18_499))
        );
        assert_eq!(
            last_consistent_point(
                &[e(5, 0)],
                PhysicalOffset(50),
                &[e(6, 0)],
                PhysicalOffset(80)
            ),
            None
        );
    }
}
