//! ROCKETMQ binary header (serialize type 1)
//! (`RocketMQSerializable.rocketMQProtocolEncode` / `rocketMQProtocolDecode`).
//!
//! Layout: code i16, language u8, version i16, opaque i32, flag i32, remark (i32 length +
//! UTF-8), extFields (i32 total length + entries of i16 key length, key, i32 value
//! length, value). All big-endian. Every length is checked against the bytes actually
//! present before anything is allocated.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::command::RemotingCommand;
use crate::ext_fields::{DecodedEntries, Value, decoded_key};
use crate::serialize_json::Header;
use crate::{LanguageCode, ProtocolError};

const FIXED_LEN: usize = 2 + 1 + 2 + 4 + 4 + 4 + 4;

pub(crate) fn encode(cmd: &RemotingCommand, out: &mut BytesMut) {
    let remark = cmd.remark.as_deref().unwrap_or("");
    // Java skips null keys/values; an empty string decodes back as null, so it is
    // skipped here too rather than written as a zero-length value.
    let entries = || {
        cmd.ext_fields
            .iter()
            .filter(|(k, v)| !k.is_empty() && !v.is_empty() && k.len() <= i16::MAX as usize)
    };
    let ext_len: usize = entries().map(|(k, v)| 2 + k.len() + 4 + v.len()).sum();
    out.reserve(FIXED_LEN + remark.len() + ext_len);
    out.put_i16(cmd.code as i16);
    out.put_u8(cmd.language.code());
    out.put_i16(cmd.version as i16);
    out.put_i32(cmd.opaque);
    out.put_i32(cmd.flag);
    out.put_i32(remark.len() as i32);
    out.put_slice(remark.as_bytes());
    out.put_i32(ext_len as i32);
    for (k, v) in entries() {
        out.put_i16(k.len() as i16);
        out.put_slice(k.as_bytes());
        out.put_i32(v.len() as i32);
        out.put_slice(v.as_bytes());
    }
}

/// Decodes the header in `source`; its extFields keep `source` and point into it.
pub(crate) fn decode(source: &Bytes) -> Result<Header, ProtocolError> {
    let mut buf = &source[..];
    if buf.len() < FIXED_LEN - 8 {
        return Err(ProtocolError::Binary("header shorter than its fixed part"));
    }
    let code = buf.get_i16() as i32;
    let language = LanguageCode::from_code(buf.get_u8());
    let version = buf.get_i16() as i32;
    let opaque = buf.get_i32();
    let flag = buf.get_i32();
    let remark = take_str(&mut buf, 4, "remark")?.map(str::to_owned);
    let ext_len = take_len(&mut buf, 4, "extFields length")?;
    if ext_len > buf.len() {
        return Err(ProtocolError::Binary("extFields length exceeds header"));
    }
    let mut ext = &buf[..ext_len];
    // Each entry takes at least 6 bytes, which bounds the pre-allocation; a send
    // request's entries average well over 6 bytes, and 16 covers its 14 keys.
    let mut entries = DecodedEntries::with_capacity((ext_len / 6).min(16));
    while !ext.is_empty() {
        let key = take_str(&mut ext, 2, "extFields key")?;
        let value = take_str(&mut ext, 4, "extFields value")?;
        // Java turns zero-length strings into null and a null value reads as absent.
        if let (Some(k), Some(v)) = (key, value) {
            entries.push(decoded_key(k), Value::span(v, source));
        }
    }
    let ext_fields = entries.finish(source.clone());
    Ok(Header {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
    })
}

#[inline(always)]
fn take_len(buf: &mut &[u8], width: usize, what: &'static str) -> Result<usize, ProtocolError> {
    let len = if width == 2 {
        let (len, rest) = buf
            .split_first_chunk::<2>()
            .ok_or(ProtocolError::Binary(what))?;
        *buf = rest;
        i64::from(i16::from_be_bytes(*len))
    } else {
        let (len, rest) = buf
            .split_first_chunk::<4>()
            .ok_or(ProtocolError::Binary(what))?;
        *buf = rest;
        i64::from(i32::from_be_bytes(*len))
    };
    usize::try_from(len).map_err(|_| ProtocolError::Binary(what))
}

#[inline(always)]
fn take_str<'a>(
    buf: &mut &'a [u8],
    width: usize,
    what: &'static str,
) -> Result<Option<&'a str>, ProtocolError> {
    let len = take_len(buf, width, what)?;
    let (s, rest) = buf
        .split_at_checked(len)
        .ok_or(ProtocolError::Binary(what))?;
    *buf = rest;
    if len == 0 {
        return Ok(None);
    }
    if s.is_ascii() {
        // SAFETY: ASCII is valid UTF-8. Header strings are almost always ASCII, and
        // this check inlines where `from_utf8` is a call per key and per value.
        return Ok(Some(unsafe { std::str::from_utf8_unchecked(s) }));
    }
    std::str::from_utf8(s)
        .map(Some)
        .map_err(|_| ProtocolError::Binary("string is not UTF-8"))
}
