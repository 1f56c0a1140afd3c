//! `RemotingCommand`: one request or response (`remoting/.../protocol/RemotingCommand.java`).

use bytes::Bytes;

use crate::code::response;
use crate::header::{CommandHeader, HeaderError};
use crate::{CURRENT_VERSION, ExtFields, LanguageCode};

/// Flag bit 0: the command is a response.
const FLAG_RESPONSE: i32 = 1;
/// Flag bit 1: a oneway request; no response is sent.
const FLAG_ONEWAY: i32 = 1 << 1;

/// How the header of a frame is serialized (top byte of the header-length word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SerializeType {
    /// fastjson text; the Java default.
    #[default]
    Json,
    /// RocketMQ's compact binary header (`RocketMQSerializable`).
    RocketMq,
}

impl SerializeType {
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RemotingCommand {
    /// Request code, or response code when [`Self::is_response`].
    pub code: i32,
    pub language: LanguageCode,
    pub version: i32,
    /// Request id; a response carries its request's value.
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    pub body: Bytes,
    /// Serialization of the header on the wire. Decoding records what the peer used;
    /// responses built with [`Self::response_to`] mirror their request's.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A request carrying `header`. The opaque is left 0 for the sender to assign.
    pub fn request<H: CommandHeader>(code: i32, header: &H) -> Self {
        let mut ext_fields = ExtFields::new();
        header.write(&mut ext_fields);
        Self {
            code,
            version: CURRENT_VERSION,
            ext_fields,
            ..Self::default()
        }
    }

    /// A request with no header fields.
    pub fn bare_request(code: i32) -> Self {
        Self {
            code,
            version: CURRENT_VERSION,
            ..Self::default()
        }
    }

    /// A response to `request` with the given code, mirroring its opaque and serialize
    /// type as `NettyRemotingAbstract.processRequestCommand` does.
    pub fn response_to(request: &RemotingCommand, code: i32) -> Self {
        Self {
            code,
            language: LanguageCode::Java,
            version: CURRENT_VERSION,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            serialize_type: request.serialize_type,
            ..Self::default()
        }
    }

    /// An error response with a remark, the way Java processors report failures.
    pub fn error_response(request: &RemotingCommand, code: i32, remark: impl Into<String>) -> Self {
        Self::response_to(request, code).with_remark(remark)
    }

    /// The `SYSTEM_ERROR` answer for a header that failed to decode; the remark names the
    /// field, as Java's `RemotingCommandException` does.
    pub fn header_error_response(request: &RemotingCommand, err: &HeaderError) -> Self {
        Self::error_response(request, response::SYSTEM_ERROR, err.to_string())
    }

    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    pub fn with_header<H: CommandHeader>(mut self, header: &H) -> Self {
        header.write(&mut self.ext_fields);
        self
    }

    pub fn with_serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// Decodes the typed header of this command from its extFields.
    pub fn header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        H::read(&self.ext_fields)
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    pub fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }
}
