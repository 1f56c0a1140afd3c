use thiserror::Error;

/// Why bytes could not be turned into a [`crate::RemotingCommand`]. Any of these
/// closes the one connection that sent them (RocketMQ's `NettyDecoder` does the same).
#[derive(Debug, Error)]
pub enum ProtocolError {
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge { len: u64, max: usize },
    #[error("frame length {0} is too small to hold a header length word")]
    FrameTooSmall(i32),
    #[error("header length {header} exceeds the frame's {available} remaining bytes")]
    BadHeaderLength { header: usize, available: usize },
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    #[error("malformed JSON header: {0}")]
    Json(String),
    #[error("malformed ROCKETMQ binary header: {0}")]
    Binary(&'static str),
    #[error("header encodes to {0} bytes, more than the 24-bit header length allows")]
    HeaderTooLarge(usize),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
