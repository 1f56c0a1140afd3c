//! What dispatch and the read path need from the CommitLog (implemented by
//! `commitlog::CommitLog`, and by in-memory fakes in tests).

use std::time::Duration;

use bytes::Bytes;
use protocol::message::PhysicalOffset;

/// Read access to the CommitLog. Views are zero-copy: a returned [`Bytes`] keeps its
/// mapped file alive (`Bytes::from_owner`) until dropped, even if retention deletes it.
pub trait CommitLogReader: Send + Sync + 'static {
    /// First byte still stored (start of the oldest file).
    fn min_offset(&self) -> PhysicalOffset;
    /// End of readable data; nothing at or past it is dispatched or served.
    fn max_offset(&self) -> PhysicalOffset;
    /// Size of one CommitLog file; a BLANK record means "continue at the next multiple".
    fn file_size(&self) -> u64;
    /// `[offset, offset + len)`; `None` if not stored, past the max offset, or crossing a
    /// file boundary.
    fn read(&self, offset: PhysicalOffset, len: usize) -> Option<Bytes>;
    /// From `offset` to the readable end of the file containing it.
    fn read_to_file_end(&self, offset: PhysicalOffset) -> Option<Bytes>;
    /// Blocks until the max offset is past `offset` or `timeout` elapses; returns whether
    /// it is. The default polls, implementations with an append signal wake immediately.
    fn wait_beyond(&self, offset: PhysicalOffset, timeout: Duration) -> bool {
        if self.max_offset() > offset {
            return true;
        }
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
        self.max_offset() > offset
    }

    /// Whether appends become readable a group at a time, each group announced by one
    /// wake-up of [`wait_beyond`](Self::wait_beyond) (SYNC_FLUSH's staged appends, made
    /// readable by the group commit). A tailing reader may then wait right after reading
    /// everything, instead of polling for appends that are still arriving one by one.
    fn readable_in_groups(&self) -> bool {
        false
    }
}

/// First offset of the file after the one containing `offset` (`rollNextFile`).
pub fn roll_next_file(offset: PhysicalOffset, file_size: u64) -> PhysicalOffset {
    let size = file_size.max(1) as i64;
    PhysicalOffset(offset.0 - offset.0.rem_euclid(size) + size)
}
