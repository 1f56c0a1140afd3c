//! What a connection writes: a command plus, for pulls and lookups, body parts that are
//! views of the store's mapped files. The parts are written after the encoded header
//! without being copied into the frame buffer.

use bytes::{Bytes, BytesMut};
use protocol::{ProtocolError, RemotingCodec, RemotingCommand};
use tokio_util::codec::Encoder;

#[derive(Debug)]
pub struct Outbound {
    pub command: RemotingCommand,
    /// Appended to `command.body` on the wire, in order.
    pub body_parts: Vec<Bytes>,
}

impl From<RemotingCommand> for Outbound {
    fn from(command: RemotingCommand) -> Self {
        Self {
            command,
            body_parts: Vec::new(),
        }
    }
}

impl Outbound {
    pub fn with_parts(command: RemotingCommand, body_parts: Vec<Bytes>) -> Self {
        Self {
            command,
            body_parts,
        }
    }

    pub fn parts_len(&self) -> usize {
        self.body_parts.iter().map(Bytes::len).sum()
    }

    /// Encodes the frame head (length word covering the parts too, header, inline body)
    /// into `dst`; the caller writes `body_parts` right after it.
    pub fn encode_head(
        &self,
        codec: &mut RemotingCodec,
        dst: &mut BytesMut,
    ) -> Result<(), ProtocolError> {
        let start = dst.len();
        codec.encode(&self.command, dst)?;
        let extra = self.parts_len();
        if extra > 0 {
            let len =
                i32::from_be_bytes([dst[start], dst[start + 1], dst[start + 2], dst[start + 3]]);
            let total = (len as usize).saturating_add(extra);
            if total + 4 > codec.max_frame() {
                dst.truncate(start);
                return Err(ProtocolError::FrameTooLarge {
                    len: total as u64 + 4,
                    max: codec.max_frame(),
                });
            }
            dst[start..start + 4].copy_from_slice(&(total as i32).to_be_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::codec::Decoder;

    #[test]
    fn head_plus_parts_decodes_as_one_frame() {
        let cmd = RemotingCommand::bare_request(11).with_body(Bytes::from_static(b"ab"));
        let out = Outbound::with_parts(
            cmd,
            vec![Bytes::from_static(b"cd"), Bytes::from_static(b"e")],
        );
        let mut codec = RemotingCodec::default();
        let mut buf = BytesMut::new();
        out.encode_head(&mut codec, &mut buf).unwrap();
        for p in &out.body_parts {
            buf.extend_from_slice(p);
        }
        let decoded = codec.decode(&mut buf).unwrap().unwrap();
        assert_eq!(&decoded.body[..], b"abcde");
        assert!(buf.is_empty());

        let big = Outbound::with_parts(
            RemotingCommand::bare_request(11),
            vec![Bytes::from(vec![0u8; 64])],
        );
        let mut small = RemotingCodec::new(64);
        assert!(big.encode_head(&mut small, &mut BytesMut::new()).is_err());
    }
}
