//! CommitLog recovery (`CommitLog.recoverNormally` / `recoverAbnormally`): find the end
//! of the valid prefix and cut everything after it.
//!
//! A record is valid when it decodes (magic, lengths consistent with TOTALSIZE, body CRC
//! when `checkCRCOnRecover`) and its PHYSICALOFFSET field names its own position; a BLANK
//! must reach exactly to the end of its file. The first invalid record ends the prefix,
//! so a torn or corrupt tail is dropped and nothing after a hole survives.

use std::sync::Arc;

use protocol::message::{
    MAX_HEAD_LEN, MESSAGE_MAGIC_CODE, PhysicalOffset, RecordError, decode, peek_head,
};

use super::CommitLog;
use crate::checkpoint::StoreCheckpoint;
use crate::error::StoreError;
use crate::mapped_file::MappedFile;

/// How many trailing files a normal recovery re-validates (RocketMQ uses 3).
const NORMAL_RECOVERY_FILES: usize = 3;

/// What recovery found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// End of the valid prefix; the CommitLog now ends here.
    pub end: PhysicalOffset,
    /// Abnormal recovery: every record from here on must be dispatched again (the
    /// ConsumeQueue / index may have lost or never received them).
    pub redispatch_from: Option<PhysicalOffset>,
    /// STORETIMESTAMP of the last valid record (0 if none).
    pub last_store_timestamp: i64,
}

impl CommitLog {
    /// Recovery after a clean shutdown: re-validate the last three files.
    pub fn recover_normally(&self, check_crc: bool) -> Result<Recovered, StoreError> {
        let files = self.queue.files();
        // Preallocated files that were never written do not count as one of the three.
        let written = files.len() - files.iter().rev().take_while(|f| never_written(f)).count();
        let start = written.saturating_sub(NORMAL_RECOVERY_FILES);
        self.recover_from(&files, start, check_crc, None)
    }

    /// Recovery after a crash: start at the newest file whose first record was stored
    /// before the checkpoint's bound (so everything before it is known to be dispatched
    /// and flushed), validate from there and ask for re-dispatch of all of it.
    pub fn recover_abnormally(
        &self,
        checkpoint: &StoreCheckpoint,
        use_index_timestamp: bool,
        check_crc: bool,
    ) -> Result<Recovered, StoreError> {
        let files = self.queue.files();
        let bound = if use_index_timestamp {
            checkpoint.min_timestamp_index()
        } else {
            checkpoint.min_timestamp()
        };
        let start = files
            .iter()
            .rposition(|f| first_record_stored_before(f, bound))
            .unwrap_or(0);
        let from = files
            .get(start)
            .map(|f| PhysicalOffset(f.from_offset() as i64));
        self.recover_from(&files, start, check_crc, from)
    }

    fn recover_from(
        &self,
        files: &[Arc<MappedFile>],
        start: usize,
        check_crc: bool,
        redispatch_from: Option<PhysicalOffset>,
    ) -> Result<Recovered, StoreError> {
        let mut end = files.get(start).map_or(0, |f| f.from_offset());
        let mut last_store_timestamp = 0;
        let mut last_file: Option<&Arc<MappedFile>> = None;
        'files: for file in &files[start.min(files.len())..] {
            end = file.from_offset();
            last_file = Some(file);
            let size = file.size();
            file.advise_sequential();
            let Some(data) = file.bytes(0, size) else {
                break;
            };
            let mut pos = 0usize;
            while pos < size as usize {
                match decode(&data[pos..], check_crc) {
                    Ok(view)
                        if view.physical_offset().0 == (file.from_offset() + pos as u64) as i64 =>
                    {
                        last_store_timestamp = view.store_timestamp();
                        pos += view.total_size();
                        end = file.from_offset() + pos as u64;
                    }
                    Err(RecordError::Blank { size: blank }) if pos + blank == size as usize => {
                        end = file.end_offset();
                        continue 'files;
                    }
                    _ => break 'files,
                }
            }
            end = file.end_offset();
        }
        if let Some(file) = last_file {
            file.set_store_timestamp(last_store_timestamp);
        }
        self.queue.truncate(end)?;
        let end = PhysicalOffset(end as i64);
        self.signal.reset(end);
        Ok(Recovered {
            end,
            redispatch_from: redispatch_from.map(|r| r.min(end)),
            last_store_timestamp,
        })
    }
}

fn never_written(file: &MappedFile) -> bool {
    file.bytes(0, 8)
        .is_some_and(|head| head.iter().all(|b| *b == 0))
}

/// `isMappedFileMatchedRecover`: the file's first record is a message with a non-zero
/// store timestamp not later than `bound`. The head is read through the record codec's
/// layout: STORETIMESTAMP moves 12 bytes with an IPv6 born host.
fn first_record_stored_before(file: &MappedFile, bound: i64) -> bool {
    let len = (MAX_HEAD_LEN as u32).min(file.size());
    let Some(head) = file.bytes(0, len).and_then(peek_head) else {
        return false;
    };
    head.magic == MESSAGE_MAGIC_CODE
        && head.physical_offset.0 == file.from_offset() as i64
        && head.store_timestamp != 0
        && head.store_timestamp <= bound
}
