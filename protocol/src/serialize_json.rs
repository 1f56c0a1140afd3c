//! JSON header (serialize type 0), as fastjson writes and reads it
//! (`RemotingSerializable`).
//!
//! Reading is deliberately lenient because real clients differ: the C++ client sends
//! numbers and booleans as extField values, rocketmq-client-rust sends `null` remark and
//! extFields, fastjson ignores unknown properties and keeps the last of duplicate keys
//! (see [`reader`]). Writing is strict: every extField value a string, language as its
//! name, properties in alphabetical order like fastjson.

mod number;
mod plain_text;
mod reader;

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;

use bytes::{BufMut, Bytes, BytesMut};

use crate::command::RemotingCommand;
use crate::{ExtFields, LanguageCode, ProtocolError};

/// The header fields of a command; the body travels outside the header.
#[derive(Debug, PartialEq)]
pub(crate) struct Header {
    pub code: i32,
    pub language: LanguageCode,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
}

/// Decodes the header in `source`; its extFields keep `source` and point into it.
pub(crate) fn decode(source: &Bytes) -> Result<Header, ProtocolError> {
    reader::read(source)
}

/// Bytes of the header besides its strings, rounded up.
const FIXED_LEN: usize = 160;

pub(crate) fn encode(cmd: &RemotingCommand, out: &mut BytesMut) {
    let strings: usize = cmd
        .ext_fields
        .iter()
        .map(|(k, v)| k.len() + v.len() + 6)
        .sum::<usize>()
        + cmd.remark.as_ref().map_or(0, |r| r.len() + 12);
    out.reserve(FIXED_LEN + strings);
    out.put_slice(b"{\"code\":");
    put_int(out, cmd.code);
    if !cmd.ext_fields.is_empty() {
        out.put_slice(b",\"extFields\":{");
        for (i, (k, v)) in cmd.ext_fields.iter().enumerate() {
            if i > 0 {
                out.put_u8(b',');
            }
            put_str(out, k);
            out.put_u8(b':');
            put_str(out, v);
        }
        out.put_u8(b'}');
    }
    out.put_slice(b",\"flag\":");
    put_int(out, cmd.flag);
    out.put_slice(b",\"language\":\"");
    out.put_slice(cmd.language.name().as_bytes());
    out.put_slice(b"\",\"opaque\":");
    put_int(out, cmd.opaque);
    if let Some(remark) = &cmd.remark {
        out.put_slice(b",\"remark\":");
        put_str(out, remark);
    }
    out.put_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    put_int(out, cmd.version);
    out.put_u8(b'}');
}

fn put_int(out: &mut BytesMut, n: i32) {
    let mut buf = [0u8; 11];
    let mut at = buf.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    out.put_slice(&buf[at..]);
}

/// A JSON string escaped exactly as serde_json escapes it: `"` and `\` with a
/// backslash, the five C escapes by letter, other control characters as `\u00xx`
/// (lowercase hex), everything else (DEL and non-ASCII included) as is.
fn put_str(out: &mut BytesMut, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.put_u8(b'"');
    let mut unicode = *b"\\u0000";
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0C => b"\\f",
            0x00..=0x1F => {
                unicode[4] = HEX[usize::from(b >> 4)];
                unicode[5] = HEX[usize::from(b & 0xF)];
                &unicode
            }
            _ => continue,
        };
        out.put_slice(&bytes[start..i]);
        out.put_slice(escape);
        start = i + 1;
    }
    out.put_slice(&bytes[start..]);
    out.put_u8(b'"');
}
