//! Frame codec (`NettyDecoder` / `NettyEncoder`):
//!
//! ```text
//! | length: i32 | serialize type: u8 | header length: u24 | header | body |
//!   length = 4 + header length + body length
//! ```
//!
//! The decoder checks `length` against the frame cap *before* reserving or allocating
//! anything, so a peer announcing a 2 GiB frame costs nothing but its connection.

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::command::{RemotingCommand, SerializeType};
use crate::{ProtocolError, serialize_binary, serialize_json};

/// RocketMQ's default `com.rocketmq.remoting.frameMaxLength`.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

/// The 24-bit header-length field's maximum.
const MAX_HEADER_LEN: usize = 0x00FF_FFFF;

#[derive(Debug, Clone, Copy)]
pub struct RemotingCodec {
    /// Largest frame accepted, counting the 4-byte length field itself (Netty compares
    /// `length + 4` against the limit).
    max_frame: usize,
}

impl Default for RemotingCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

impl RemotingCodec {
    pub fn new(max_frame: usize) -> Self {
        Self { max_frame }
    }

    pub fn max_frame(&self) -> usize {
        self.max_frame
    }
}

impl Decoder for RemotingCodec {
    type Item = RemotingCommand;
    type Error = ProtocolError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, ProtocolError> {
        if src.len() < 4 {
            return Ok(None);
        }
        let length = i32::from_be_bytes([src[0], src[1], src[2], src[3]]);
        if length < 4 {
            return Err(ProtocolError::FrameTooSmall(length));
        }
        let frame_len = length as usize + 4;
        if frame_len > self.max_frame {
            return Err(ProtocolError::FrameTooLarge {
                len: frame_len as u64,
                max: self.max_frame,
            });
        }
        if src.len() < frame_len {
            src.reserve(frame_len - src.len());
            return Ok(None);
        }
        let mut frame = src.split_to(frame_len).freeze();
        frame.advance(4);
        decode_frame_body(frame).map(Some)
    }
}

/// Decodes what follows the length field: header-length word, header, body. The body
/// is a zero-copy slice of the received buffer.
pub fn decode_frame_body(mut frame: bytes::Bytes) -> Result<RemotingCommand, ProtocolError> {
    if frame.len() < 4 {
        return Err(ProtocolError::FrameTooSmall(frame.len() as i32));
    }
    let word = frame.get_u32();
    let kind = (word >> 24) as u8;
    let header_len = (word & MAX_HEADER_LEN as u32) as usize;
    if header_len > frame.len() {
        return Err(ProtocolError::BadHeaderLength {
            header: header_len,
            available: frame.len(),
        });
    }
    let serialize_type =
        SerializeType::from_code(kind).ok_or(ProtocolError::UnknownSerializeType(kind))?;
    // The header's own slice of the frame (a reference count, no copy): the decoded
    // extFields point into it.
    let header_bytes = frame.slice(..header_len);
    let header = match serialize_type {
        SerializeType::Json => serialize_json::decode(&header_bytes)?,
        SerializeType::RocketMq => serialize_binary::decode(&header_bytes)?,
    };
    frame.advance(header_len);
    Ok(RemotingCommand {
        code: header.code,
        language: header.language,
        version: header.version,
        opaque: header.opaque,
        flag: header.flag,
        remark: header.remark,
        ext_fields: header.ext_fields,
        body: frame,
        serialize_type,
    })
}

impl Encoder<RemotingCommand> for RemotingCodec {
    type Error = ProtocolError;

    fn encode(&mut self, cmd: RemotingCommand, dst: &mut BytesMut) -> Result<(), ProtocolError> {
        self.encode(&cmd, dst)
    }
}

impl Encoder<&RemotingCommand> for RemotingCodec {
    type Error = ProtocolError;

    fn encode(&mut self, cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), ProtocolError> {
        let start = dst.len();
        // Placeholders for the length and header-length words, patched below once the
        // header's size is known; this avoids serializing the header twice.
        dst.reserve(8 + 256 + cmd.body.len());
        dst.put_u64(0);
        match cmd.serialize_type {
            SerializeType::Json => serialize_json::encode(cmd, dst),
            SerializeType::RocketMq => serialize_binary::encode(cmd, dst),
        }
        let header_len = dst.len() - start - 8;
        if header_len > MAX_HEADER_LEN {
            dst.truncate(start);
            return Err(ProtocolError::HeaderTooLarge(header_len));
        }
        dst.put_slice(&cmd.body);
        let length = dst.len() - start - 4;
        if length + 4 > self.max_frame {
            dst.truncate(start);
            return Err(ProtocolError::FrameTooLarge {
                len: (length + 4) as u64,
                max: self.max_frame,
            });
        }
        let word = ((cmd.serialize_type.code() as u32) << 24) | header_len as u32;
        dst[start..start + 4].copy_from_slice(&(length as i32).to_be_bytes());
        dst[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
        Ok(())
    }
}

/// Encodes one command into a fresh buffer (tests, fixtures, one-off clients).
pub fn encode_to_vec(cmd: &RemotingCommand) -> Result<Vec<u8>, ProtocolError> {
    let mut buf = BytesMut::new();
    RemotingCodec::new(usize::MAX).encode(cmd, &mut buf)?;
    Ok(buf.to_vec())
}

#[cfg(test)]
mod tests;
