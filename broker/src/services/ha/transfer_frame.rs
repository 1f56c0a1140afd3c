//! The master-to-slave transfer frame (`HAConnection.WriteSocketService` in 4.9): a
//! 12-byte header (physical offset i64, body size i32, big-endian) then `size` CommitLog
//! bytes; size 0 is a heartbeat. Cut from the read buffer by a pure function so the
//! fuzz target covers exactly what the slave runs.

use bytes::{Buf, BytesMut};
use protocol::message::PhysicalOffset;

/// A frame body larger than this is refused before allocating (the master sends at most
/// `haTransferBatchSize`, itself capped at 4 MiB).
pub const MAX_FRAME: usize = 8 << 20;

const HEADER: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes")]
    Size(i64),
    /// A negative offset, or one whose end does not fit an i64 (4.9 would wrap).
    #[error("frame at offset {offset} of {size} bytes")]
    Offset { offset: i64, size: usize },
}

#[derive(Debug, PartialEq, Eq)]
pub struct TransferFrame {
    pub offset: PhysicalOffset,
    pub body: BytesMut,
}

impl TransferFrame {
    /// The offset just past this frame's bytes (checked when the frame was cut).
    pub fn end(&self) -> PhysicalOffset {
        PhysicalOffset(self.offset.0 + self.body.len() as i64)
    }
}

/// Cuts the next whole frame off `buf`: `Ok(None)` when more bytes are needed (room
/// for the announced body is reserved), an error for a frame no master sends.
pub fn next_frame(buf: &mut BytesMut) -> Result<Option<TransferFrame>, FrameError> {
    if buf.len() < HEADER {
        return Ok(None);
    }
    let mut head = &buf[..HEADER];
    let offset = head.get_i64();
    let size = head.get_i32();
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_FRAME)
        .ok_or(FrameError::Size(size.into()))?;
    if offset < 0 || offset.checked_add(size as i64).is_none() {
        return Err(FrameError::Offset { offset, size });
    }
    if buf.len() < HEADER + size {
        buf.reserve(HEADER + size - buf.len());
        return Ok(None);
    }
    buf.advance(HEADER);
    Ok(Some(TransferFrame {
        offset: PhysicalOffset(offset),
        body: buf.split_to(size),
    }))
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;

    use super::*;

    fn frame(offset: i64, size: i32, body: &[u8]) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_i64(offset);
        b.put_i32(size);
        b.put_slice(body);
        b
    }

    #[test]
    fn cuts_whole_frames_and_waits_for_partial_ones() {
        let mut buf = frame(100, 3, b"abc");
        buf.extend_from_slice(&frame(103, 0, b"")[..]);
        buf.extend_from_slice(&frame(103, 4, b"de")[..]);
        let f = next_frame(&mut buf).unwrap().unwrap();
        assert_eq!(
            (f.offset, &f.body[..], f.end()),
            (PhysicalOffset(100), &b"abc"[..], PhysicalOffset(103))
        );
        let heartbeat = next_frame(&mut buf).unwrap().unwrap();
        assert!(heartbeat.body.is_empty());
        assert_eq!(next_frame(&mut buf), Ok(None));
        assert_eq!(buf.len(), 14);
    }

    #[test]
    fn refuses_sizes_and_offsets_no_master_sends() {
        assert_eq!(
            next_frame(&mut frame(0, -1, b"")),
            Err(FrameError::Size(-1))
        );
        assert_eq!(
            next_frame(&mut frame(0, (MAX_FRAME + 1) as i32, b"")),
            Err(FrameError::Size(MAX_FRAME as i64 + 1))
        );
        assert!(next_frame(&mut frame(-8, 0, b"")).is_err());
        // `offset + size` would wrap past i64::MAX.
        assert_eq!(
            next_frame(&mut frame(i64::MAX - 1, 4, b"abcd")),
            Err(FrameError::Offset {
                offset: i64::MAX - 1,
                size: 4
            })
        );
    }
}
