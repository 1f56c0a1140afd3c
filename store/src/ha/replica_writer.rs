//! The slave's writer for the master's CommitLog stream. The master sends raw bytes in
//! batches that may end anywhere, even mid-record; this writer appends only whole records
//! that pass the same checks as recovery (TOTALSIZE/MAGIC, lengths, body CRC when asked,
//! PHYSICALOFFSET naming its own position, no record straddling a file, a BLANK reaching
//! exactly to its file's end) and keeps an incomplete tail until the rest arrives. So the
//! slave's CommitLog is always a valid prefix of the master's, at identical offsets, and
//! the offset it reports back is a record boundary.

use std::sync::Arc;

use protocol::message::record::END_FILE_MIN_BLANK_LENGTH;
use protocol::message::{BLANK_MAGIC_CODE, PhysicalOffset, decode};

use crate::commitlog::{CommitLog, PlaceError};

/// Bytes a record may exceed the body limit by (as the append path allows).
const RECORD_OVERHEAD: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    #[error("the master sent data for {got}, the replica expects {expected}")]
    OffsetMismatch {
        expected: PhysicalOffset,
        got: PhysicalOffset,
    },
    #[error("the first data for an empty replica must start a file, not {0}")]
    UnalignedStart(PhysicalOffset),
    #[error("invalid record at {offset}: {reason}")]
    BadRecord {
        offset: PhysicalOffset,
        reason: String,
    },
    #[error(transparent)]
    Place(#[from] PlaceError),
}

#[derive(Debug)]
pub struct ReplicaWriter {
    log: Arc<CommitLog>,
    check_crc: bool,
    max_record: usize,
    /// Bytes received past the log end that do not yet form a whole record.
    carry: Vec<u8>,
    /// Zero bytes of a BLANK filler still to come; the filler itself is already placed.
    skip: u64,
    /// Offset of the first batch taken while the log was empty.
    start: Option<PhysicalOffset>,
}

impl ReplicaWriter {
    pub fn new(log: Arc<CommitLog>, check_crc: bool, max_message_size: u32) -> Self {
        Self {
            log,
            check_crc,
            max_record: max_message_size as usize + RECORD_OVERHEAD,
            carry: Vec::new(),
            skip: 0,
            start: None,
        }
    }

    /// End of the records placed in the CommitLog (what the slave reports to its master).
    pub fn written_offset(&self) -> PhysicalOffset {
        self.log.max_offset()
    }

    fn log_is_empty(&self) -> bool {
        self.log.mapped_files().file_count() == 0
    }

    /// Where `carry` starts.
    fn carry_base(&self) -> PhysicalOffset {
        match self.start {
            Some(start) if self.log_is_empty() => start,
            _ => self.log.max_offset(),
        }
    }

    /// Where the next batch from the master must start. While filler zeros are being
    /// skipped the BLANK is already placed, so the log end is past them.
    pub fn expected_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.carry_base().0 + self.carry.len() as i64 - self.skip as i64)
    }

    /// Forgets a partial record (the connection that was sending it is gone).
    pub fn reset(&mut self) {
        self.carry.clear();
        self.skip = 0;
        self.start = None;
    }

    /// Takes one batch the master says starts at `offset`. Returns the bytes newly placed.
    /// On error the log keeps every whole valid record before the offending one; the
    /// caller drops the connection, calls [`Self::reset`] and starts over from
    /// [`Self::written_offset`].
    pub fn accept(&mut self, offset: PhysicalOffset, mut data: &[u8]) -> Result<u64, ReplicaError> {
        if self.log_is_empty() && self.start.is_none() {
            if offset.0 < 0 || offset.0 % self.log.file_size() as i64 != 0 {
                return Err(ReplicaError::UnalignedStart(offset));
            }
            self.start = Some(offset);
        } else if offset != self.expected_offset() {
            return Err(ReplicaError::OffsetMismatch {
                expected: self.expected_offset(),
                got: offset,
            });
        }
        let skipped = (self.skip as usize).min(data.len());
        self.skip -= skipped as u64;
        data = &data[skipped..];
        self.carry.extend_from_slice(data);
        let mut placed = 0u64;
        while self.skip == 0 && self.carry.len() >= END_FILE_MIN_BLANK_LENGTH {
            let (n, blank_rest) = self.place_complete(self.carry_base())?;
            self.carry.drain(..n);
            placed += n as u64;
            let Some(rest) = blank_rest else { break };
            // The zeros after a BLANK header are not data: drop those already here and
            // the ones still to come.
            let here = (rest as usize).min(self.carry.len());
            self.carry.drain(..here);
            self.skip = rest - here as u64;
            placed += rest;
        }
        Ok(placed)
    }

    /// Places every whole record at the front of `carry` (which starts at `base`).
    /// Returns the bytes consumed and, when a BLANK ended the run, how many filler bytes
    /// follow its 8-byte header (already placed as zeros, to be skipped in the stream).
    fn place_complete(&self, base: PhysicalOffset) -> Result<(usize, Option<u64>), ReplicaError> {
        let file_size = self.log.file_size();
        let mut pos = 0usize;
        let mut run_start = 0usize;
        let mut run_ts = 0i64;
        let flush = |from: usize, to: usize, ts: i64, carry: &[u8]| -> Result<(), ReplicaError> {
            if to > from {
                let at = PhysicalOffset(base.0 + from as i64);
                let bytes = &carry[from..to];
                self.log
                    .place_replicated(at, bytes.len() as u32, ts, |dst| {
                        dst.copy_from_slice(bytes)
                    })?;
            }
            Ok(())
        };
        while self.carry.len() - pos >= END_FILE_MIN_BLANK_LENGTH {
            let at = PhysicalOffset(base.0 + pos as i64);
            let room = (file_size - (at.0 as u64 % file_size)) as usize;
            let head = &self.carry[pos..];
            let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            let magic = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
            let bad = |reason: String| ReplicaError::BadRecord { offset: at, reason };
            if size <= 0 || size as usize > room {
                flush(run_start, pos, run_ts, &self.carry)?;
                return Err(bad(format!(
                    "size {size} with {room} bytes left in the file"
                )));
            }
            let size = size as usize;
            if magic == BLANK_MAGIC_CODE {
                flush(run_start, pos, run_ts, &self.carry)?;
                if size != room {
                    return Err(bad(format!(
                        "BLANK of {size} bytes but {room} left in the file"
                    )));
                }
                self.log.place_replicated(at, size as u32, 0, |dst| {
                    dst.fill(0);
                    dst[..4].copy_from_slice(&(size as i32).to_be_bytes());
                    dst[4..8].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
                })?;
                return Ok((
                    pos + END_FILE_MIN_BLANK_LENGTH,
                    Some((size - END_FILE_MIN_BLANK_LENGTH) as u64),
                ));
            }
            if size > self.max_record {
                flush(run_start, pos, run_ts, &self.carry)?;
                return Err(bad(format!("size {size} above the record limit")));
            }
            if self.carry.len() - pos < size {
                break;
            }
            match decode(&self.carry[pos..pos + size], self.check_crc) {
                Ok(view) if view.total_size() == size && view.physical_offset() == at => {
                    run_ts = view.store_timestamp();
                    pos += size;
                }
                Ok(view) => {
                    flush(run_start, pos, run_ts, &self.carry)?;
                    return Err(bad(format!(
                        "record names offset {} and size {}",
                        view.physical_offset(),
                        view.total_size()
                    )));
                }
                Err(e) => {
                    flush(run_start, pos, run_ts, &self.carry)?;
                    return Err(bad(e.to_string()));
                }
            }
            if room == size {
                // The record ends its file exactly: the next one starts a new file.
                flush(run_start, pos, run_ts, &self.carry)?;
                run_start = pos;
            }
        }
        flush(run_start, pos, run_ts, &self.carry)?;
        Ok((pos, None))
    }
}

#[cfg(test)]
#[path = "replica_writer_tests.rs"]
mod tests;
