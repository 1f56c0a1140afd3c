//! Reading and writing JSON the way fastjson 1.2.69 does.
//!
//! fastjson writes map keys that are not `String`s without quotes
//! (`{0:"10.0.0.1:10911"}`), writes object-typed keys as bare JSON objects
//! (`{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}`), and its parser also accepts
//! single-quoted strings and unquoted identifier keys. [`from_slice`] accepts all of that
//! by rewriting the text into standard JSON before handing it to serde; object keys
//! become JSON strings holding the key object's (normalized) JSON text.

use std::fmt::Write as _;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::BodyError;

/// Deepest nesting accepted, counting object keys that are themselves objects; serde's
/// own recursion limit (128) stays the binding one for ordinary documents.
const MAX_DEPTH: usize = 128;
/// How deep object keys may nest inside object keys.
const MAX_KEY_DEPTH: usize = 4;

/// Parses standard JSON or fastjson's non-standard dialect into `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(first) if first.is_syntax() || first.is_eof() => {
            let text = normalize(bytes)?;
            serde_json::from_str(&text).map_err(|e| BodyError::Json(e.to_string()))
        }
        Err(e) => Err(BodyError::Json(e.to_string())),
    }
}

/// Rewrites fastjson text into standard JSON. Invalid input either fails here or is
/// passed through for serde to reject.
pub fn normalize(bytes: &[u8]) -> Result<String, BodyError> {
    let text = std::str::from_utf8(bytes).map_err(|e| BodyError::Json(e.to_string()))?;
    let mut out = String::with_capacity(text.len() + 16);
    normalize_into(text, &mut out, 0)?;
    Ok(out)
}

#[derive(Clone, Copy)]
enum Frame {
    Object { expect_key: bool },
    Array,
}

fn normalize_into(text: &str, out: &mut String, key_depth: usize) -> Result<(), BodyError> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let key_position = matches!(stack.last(), Some(Frame::Object { expect_key: true }));
        match c {
            b' ' | b'\t' | b'\r' | b'\n' => {
                out.push(c as char);
                i += 1;
            }
            b'"' | b'\'' => {
                i = copy_string(text, i, out)?;
                mark_key_read(&mut stack, key_position);
            }
            b'{' | b'[' if key_position => {
                if key_depth >= MAX_KEY_DEPTH {
                    return Err(BodyError::TooDeep(MAX_KEY_DEPTH));
                }
                let end = matching_close(bytes, i)?;
                let mut inner = String::new();
                normalize_into(&text[i..end], &mut inner, key_depth + 1)?;
                // Round-trip through serde to canonicalize whitespace in the key text.
                let canonical = serde_json::from_str::<Value>(&inner)
                    .map(|v| v.to_string())
                    .map_err(|e| BodyError::Json(e.to_string()))?;
                push_json_string(out, &canonical);
                mark_key_read(&mut stack, true);
                i = end;
            }
            b'{' => {
                if stack.len() >= MAX_DEPTH {
                    return Err(BodyError::TooDeep(MAX_DEPTH));
                }
                stack.push(Frame::Object { expect_key: true });
                out.push('{');
                i += 1;
            }
            b'[' => {
                if stack.len() >= MAX_DEPTH {
                    return Err(BodyError::TooDeep(MAX_DEPTH));
                }
                stack.push(Frame::Array);
                out.push('[');
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                out.push(c as char);
                i += 1;
            }
            b',' => {
                if let Some(Frame::Object { expect_key }) = stack.last_mut() {
                    *expect_key = true;
                }
                out.push(',');
                i += 1;
            }
            _ if key_position => {
                // Unquoted key: a number (`0`, `-1`) or an identifier (`topic`).
                let start = i;
                while i < bytes.len() && is_bare_key_byte(bytes[i]) {
                    i += 1;
                }
                if i == start {
                    // Not a key at all; let serde report the syntax error.
                    out.push_str(&text[start..]);
                    return Ok(());
                }
                push_json_string(out, &text[start..i]);
                mark_key_read(&mut stack, true);
            }
            _ => {
                // Literals, numbers, ':' — copied; serde validates them.
                let start = i;
                while i < bytes.len() && !b"\"'{}[],: \t\r\n".contains(&bytes[i]) {
                    i += 1;
                }
                if i == start {
                    i += 1;
                }
                out.push_str(&text[start..i]);
            }
        }
    }
    Ok(())
}

fn mark_key_read(stack: &mut [Frame], was_key: bool) {
    if was_key && let Some(Frame::Object { expect_key }) = stack.last_mut() {
        *expect_key = false;
    }
}

fn is_bare_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'-' | b'+' | b'.')
}

/// Copies the string starting at `start` (quoted with `"` or `'`) as a double-quoted
/// JSON string; returns the index after its closing quote.
fn copy_string(text: &str, start: usize, out: &mut String) -> Result<usize, BodyError> {
    let bytes = text.as_bytes();
    let quote = bytes[start];
    let mut i = start + 1;
    out.push('"');
    let mut run = i;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                if i + 1 >= bytes.len() {
                    break;
                }
                out.push_str(&text[run..i]);
                // The escaped character may be multi-byte (an invalid escape the JSON
                // parser then refuses): copy it whole, never half a UTF-8 sequence.
                let escaped = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                if bytes[i + 1] == b'\'' {
                    out.push('\'');
                } else {
                    out.push_str(&text[i..i + 1 + escaped]);
                }
                i += 1 + escaped;
                run = i;
            }
            b'"' if quote == b'\'' => {
                out.push_str(&text[run..i]);
                out.push_str("\\\"");
                i += 1;
                run = i;
            }
            b if b == quote => {
                out.push_str(&text[run..i]);
                out.push('"');
                return Ok(i + 1);
            }
            _ => i += 1,
        }
    }
    Err(BodyError::Json("unterminated string".into()))
}

/// Index just past the `}`/`]` closing the container opened at `start`.
fn matching_close(bytes: &[u8], start: usize) -> Result<usize, BodyError> {
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(BodyError::Json("unterminated object key".into()))
}

fn push_json_string(out: &mut String, s: &str) {
    write_string(out, s, false);
}

/// Output dialect of [`to_vec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// fastjson's default `toJSONString`: raw UTF-8, and the maps named by
    /// [`to_vec_with`]'s `numeric_key_fields` get unquoted integer keys.
    Default,
    /// `SerializerFeature.BrowserCompatible`: standard JSON with every key quoted,
    /// non-ASCII escaped as `\uXXXX`, and integers beyond ±(2^53 − 1) written as strings.
    Browser,
}

/// Serializes `value` with properties sorted like fastjson.
pub fn to_vec<T: Serialize>(value: &T, style: Style) -> Vec<u8> {
    to_vec_with(value, style, &[])
}

/// Like [`to_vec`]; in [`Style::Default`] the objects held by properties named in
/// `numeric_key_fields` (Java `Map<Long, _>` / `Map<Integer, _>`) get unquoted keys.
pub fn to_vec_with<T: Serialize>(value: &T, style: Style, numeric_key_fields: &[&str]) -> Vec<u8> {
    // Serializing plain data structs into a Value cannot fail (no non-string map keys
    // reach serde: numeric keys are serialized as strings by serde_json).
    let value = serde_json::to_value(value).unwrap_or(Value::Null);
    let mut out = String::new();
    let writer = Writer {
        style,
        numeric_key_fields,
    };
    writer.value(&mut out, &value, false);
    out.into_bytes()
}

struct Writer<'a> {
    style: Style,
    numeric_key_fields: &'a [&'a str],
}

/// Largest integer a JavaScript number holds exactly (BrowserCompatible's threshold).
const JS_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

impl Writer<'_> {
    fn value(&self, out: &mut String, value: &Value, numeric_keys: bool) {
        let browser = self.style == Style::Browser;
        match value {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => {
                let big = n
                    .as_i64()
                    .map(|v| !(-JS_SAFE_INTEGER..=JS_SAFE_INTEGER).contains(&v));
                let big = big.or_else(|| n.as_u64().map(|v| v > JS_SAFE_INTEGER as u64));
                if browser && big == Some(true) {
                    let _ = write!(out, "\"{n}\"");
                } else {
                    let _ = write!(out, "{n}");
                }
            }
            Value::String(s) => write_string(out, s, browser),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.value(out, item, false);
                }
                out.push(']');
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                let all_integers = entries.iter().all(|(k, _)| k.parse::<i64>().is_ok());
                if all_integers {
                    entries.sort_by_key(|(k, _)| k.parse::<i64>().unwrap_or(0));
                } else {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                let bare = numeric_keys && all_integers && !browser;
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if bare {
                        out.push_str(k);
                    } else {
                        write_string(out, k, browser);
                    }
                    out.push(':');
                    let child_numeric = self.numeric_key_fields.contains(&k.as_str());
                    self.value(out, v, child_numeric);
                }
                out.push('}');
            }
        }
    }
}

fn write_string(out: &mut String, s: &str, escape_non_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (escape_non_ascii && !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests;
