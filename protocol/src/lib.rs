//! RocketMQ 4.x "classic remoting" protocol, as spoken by Apache RocketMQ 4.9.x.
//!
//! Pure data and codecs, no networking: a [`frame::RemotingCodec`] turns bytes into
//! [`command::RemotingCommand`]s (and back), [`header`] gives typed views over a
//! command's `extFields`, [`code`] names every request/response code, and
//! `message` encodes/decodes stored message records. Every decoder caps lengths
//! before allocating and never panics on arbitrary input.
//!
//! Each wire fact names the RocketMQ 4.9 class it mirrors (`RemotingCommand`,
//! `NettyDecoder`, the `*RequestHeader` classes), so it can be checked against the source.

pub mod body;
pub mod code;
pub mod command;
pub mod error;
pub mod ext_fields;
pub mod frame;
#[doc(hidden)]
pub mod fuzz;
pub mod header;
pub mod language;
pub mod message;
mod serialize_binary;
mod serialize_json;
pub mod shared_str;

pub use command::{RemotingCommand, SerializeType};
pub use error::ProtocolError;
pub use ext_fields::ExtFields;
pub use frame::RemotingCodec;
pub use header::{CommandHeader, HeaderError};
pub use language::LanguageCode;
pub use shared_str::SharedStr;

/// `MQVersion.CURRENT_VERSION` of RocketMQ 4.9.8 (ordinal of `V4_9_8`). Sent in every
/// command this project creates; clients compare a broker's version against 232 before
/// allowing SQL92 pulls, so it must not be lower.
pub const CURRENT_VERSION: i32 = 409;
