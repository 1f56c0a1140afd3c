//! A slave's proof that its CommitLog is a prefix of its master's.
//! RocketMQ 4.9 takes a reconnecting slave's first 8-byte report at face value; a master
//! that lost unflushed bytes and wrote new ones at the same offsets would then count the
//! slave's different bytes as replicated. Before its reports count as acks a slave shows
//! the master its end offset, the epoch entry that wrote the bytes just below it, and
//! those bytes themselves (up to [`TAIL_LEN`], within the end's file). The master accepts
//! only when it has the same epoch entry covering that end, the same bytes, and the end
//! is a record boundary of its own log.

use bytes::Bytes;
use protocol::message::PhysicalOffset;
use protocol::message::record::BLANK_MAGIC_CODE;

use super::EpochEntry;
use super::epoch_file::with_implicit_epoch0;
use crate::message_store::MessageStore;

/// Bytes below the end a slave shows (at most; fewer at the start of a file).
pub const TAIL_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryProof {
    /// The slave's CommitLog end: where it wants the stream to continue.
    pub end: PhysicalOffset,
    /// The epoch entry that wrote the bytes just below `end` (epoch 0 at 0 before any).
    pub epoch: EpochEntry,
    /// The slave's bytes `[end - tail.len(), end)`.
    pub tail: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("the slave's end {end} is beyond this log's end {max}")]
    Beyond {
        end: PhysicalOffset,
        max: PhysicalOffset,
    },
    #[error("the slave's end {end} is below this log's first offset {min}")]
    TooOld {
        end: PhysicalOffset,
        min: PhysicalOffset,
    },
    #[error(
        "the slave's bytes up to {end} were written in epoch {epoch} from {start}, which this \
         log does not have there"
    )]
    EpochMismatch {
        end: PhysicalOffset,
        epoch: i32,
        start: PhysicalOffset,
    },
    #[error("the slave's bytes below {end} differ from this log's")]
    BytesDiffer { end: PhysicalOffset },
    #[error("the slave's end {end} is not a record boundary of this log")]
    NotBoundary { end: PhysicalOffset },
    #[error("a tail of {0} bytes is longer than allowed")]
    TailTooLong(usize),
}

/// The entry that wrote the bytes just below `end`: the last one starting before it.
fn covering(entries: &[EpochEntry], end: PhysicalOffset) -> EpochEntry {
    let all = with_implicit_epoch0(entries);
    all.iter()
        .rev()
        .find(|e| e.start_offset < end)
        .or(all.first())
        .copied()
        .unwrap_or(EpochEntry {
            epoch: 0,
            start_offset: PhysicalOffset(0),
        })
}

impl MessageStore {
    /// This store's proof for the end of its CommitLog.
    pub fn history_proof(&self) -> HistoryProof {
        let log = self.commit_log();
        let end = log.max_offset();
        let epoch = covering(&self.epochs().entries(), end);
        if end.0 == 0 {
            return HistoryProof {
                end,
                epoch,
                tail: Bytes::new(),
            };
        }
        // Within the end's file and within one epoch, so the master can check both.
        let file_size = log.file_size().max(1) as i64;
        let file_start = (end.0 - 1) - (end.0 - 1) % file_size;
        let from = file_start
            .max(end.0 - TAIL_LEN as i64)
            .max(log.min_offset().0)
            .max(epoch.start_offset.0)
            .min(end.0);
        let tail = log
            .read(PhysicalOffset(from), (end.0 - from) as usize)
            .unwrap_or_default();
        HistoryProof { end, epoch, tail }
    }

    /// Whether `proof` shows a prefix of this store's CommitLog (see the module docs).
    pub fn check_history_proof(&self, proof: &HistoryProof) -> Result<(), ProofError> {
        let log = self.commit_log();
        let (end, max) = (proof.end, log.max_offset());
        if proof.tail.len() > TAIL_LEN {
            return Err(ProofError::TailTooLong(proof.tail.len()));
        }
        if end > max || end.0 < 0 {
            return Err(ProofError::Beyond { end, max });
        }
        if end.0 == 0 {
            return Ok(());
        }
        let from = PhysicalOffset(end.0 - proof.tail.len() as i64);
        if from < log.min_offset() {
            return Err(ProofError::TooOld {
                end,
                min: log.min_offset(),
            });
        }
        let entries = with_implicit_epoch0(&self.epochs().entries());
        let known = entries
            .iter()
            .position(|e| *e == proof.epoch)
            .is_some_and(|i| {
                let epoch_end = entries.get(i + 1).map_or(max, |n| n.start_offset);
                proof.epoch.start_offset <= from && end <= epoch_end
            });
        if !known {
            return Err(ProofError::EpochMismatch {
                end,
                epoch: proof.epoch.epoch,
                start: proof.epoch.start_offset,
            });
        }
        let mine = log.read(from, proof.tail.len());
        if mine.as_deref() != Some(&proof.tail[..]) {
            return Err(ProofError::BytesDiffer { end });
        }
        let file_size = log.file_size().max(1) as i64;
        let boundary = end == max
            || end.0 % file_size == 0
            || log.read_record(end).is_some()
            || log
                .read(PhysicalOffset(end.0 + 4), 4)
                .is_some_and(|m| m[..] == BLANK_MAGIC_CODE.to_be_bytes());
        if !boundary {
            return Err(ProofError::NotBoundary { end });
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "history_proof_tests.rs"]
mod tests;
