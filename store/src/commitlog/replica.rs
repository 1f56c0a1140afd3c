//! The CommitLog half of replication: placing bytes a master sent at the master's own
//! physical offsets (the slave side of `CommitLog.appendData`), and cutting the log back
//! to an offset while the store runs (`CommitLog.truncateDirtyFiles` of RocketMQ 5.x).
//! Both take the put lock, so they never interleave with a normal append.

use protocol::message::PhysicalOffset;

use super::CommitLog;
use crate::error::{IoContext, StoreError};

/// Why replicated bytes could not be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    #[error("replicated bytes for {got} but the CommitLog ends at {end}")]
    NotAtEnd {
        end: PhysicalOffset,
        got: PhysicalOffset,
    },
    #[error("replicated bytes at {at} do not fit the segment file")]
    NoRoom { at: PhysicalOffset },
    #[error("cannot create a CommitLog file for {at}")]
    CreateFile { at: PhysicalOffset },
    #[error("writing replicated bytes at {at} failed")]
    Write { at: PhysicalOffset },
}

impl CommitLog {
    /// Appends `len` bytes produced by `fill` at `at`, which must be the current end of the
    /// log (or, for an empty log, the start of a file). The bytes must lie inside one file.
    pub(crate) fn place_replicated(
        &self,
        at: PhysicalOffset,
        len: u32,
        store_timestamp: i64,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), PlaceError> {
        let start = u64::try_from(at.0).map_err(|_| PlaceError::NoRoom { at })?;
        let mut state = self.put.lock();
        state.file = None;
        let file = self
            .queue
            .last_or_create(start)
            .map_err(|_| PlaceError::CreateFile { at })?;
        let end = file.from_offset() + u64::from(file.append_position());
        if end != start {
            return Err(PlaceError::NotAtEnd {
                end: PhysicalOffset(end as i64),
                got: at,
            });
        }
        if len > file.remaining() {
            return Err(PlaceError::NoRoom { at });
        }
        // Room was checked, so `None` is a failed write.
        file.append_with(len, store_timestamp, self.append_to(), |dst| {
            fill(dst);
            Ok::<(), ()>(())
        })
        .ok_or(PlaceError::Write { at })
        .inspect_err(|_| {
            self.fence()
                .trip(format!("writing replicated bytes at {at} failed"));
        })?
        .map_err(|()| PlaceError::Write { at })?;
        // A replicated frame is already a batch: staged bytes are committed at once
        // (one `pwrite` per frame), so the replica's end is readable and reportable.
        if self.write_through {
            self.commit_file(&file)
                .map_err(|_| PlaceError::Write { at })?;
        }
        drop(state);
        self.signal.publish(PhysicalOffset(at.0 + i64::from(len)));
        Ok(())
    }

    /// Makes `offset` the end of the log while the store runs: later files are deleted,
    /// the file holding it is replaced by a copy of what stays (views readers hold keep
    /// the old bytes, unchanged). The caller stops writers and dispatch first.
    pub(crate) fn truncate_live(&self, offset: PhysicalOffset) -> Result<(), StoreError> {
        let at = u64::try_from(offset.0).unwrap_or(0);
        let mut state = self.put.lock();
        state.file = None;
        // Staged records count as written: the cut below then treats them like any
        // other bytes past `offset`.
        if let Some(last) = self.queue.last() {
            last.commit(self.queue.fs())
                .ctx(|| format!("commit {}", last.path().display()))?;
        }
        self.queue.truncate_live(at)?;
        self.queue.discard_prepared()?;
        self.signal
            .reset(PhysicalOffset(self.queue.max_offset() as i64));
        drop(state);
        Ok(())
    }
}
