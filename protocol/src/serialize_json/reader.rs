//! Single-pass reader of a JSON header.
//!
//! It accepts exactly what the serde_json visitor it replaced accepted (that visitor is
//! kept as the test oracle in `oracle.rs`), with one deliberate difference: unknown
//! values are skipped iteratively, so any nesting depth is accepted where serde_json
//! gave up at 128 levels. The rules it mirrors:
//! - the header is one object, surrounded by JSON whitespace only;
//! - `code`, `version`, `opaque`, `flag`: a JSON integer in `i32` range (`-0`, fractions
//!   and exponents are floats to serde_json, hence errors) or a string `i32::from_str`
//!   accepts; `code` is required;
//! - `language`: a name, an ordinal, or `null` (JAVA);
//! - `remark`: a string or `null`; `extFields`: an object or `null`, whose values are
//!   strings, numbers and booleans rendered as Java's `String.valueOf` would (numbers as
//!   serde_json renders the value it parsed), `null` values being dropped;
//! - duplicate keys: the last one wins; other keys are skipped with their values;
//! - strings that are read must be valid UTF-8 without lone surrogate escapes; strings
//!   inside skipped values only need valid escapes and no raw control characters.
//!
//! Errors carry the byte offset they were found at and cost nothing until raised. No
//! allocation is larger than the input.

use std::borrow::Cow;

use bytes::Bytes;

use super::Header;
use super::number::{Integer, Number, render_float};
use super::plain_text::{STOPS_PLAIN_TEXT, stop_bytes};
use crate::ext_fields::{DecodedEntries, Value, intern};
use crate::{ExtFields, LanguageCode, ProtocolError};

/// Reads the header in `source`; the extFields values of the result are spans of it.
pub(super) fn read(source: &Bytes) -> std::result::Result<Header, ProtocolError> {
    let bytes = &source[..];
    let mut reader = Reader {
        source,
        bytes,
        text: std::str::from_utf8(bytes).ok(),
        pos: 0,
    };
    reader
        .header()
        .map_err(|e| ProtocolError::Json(format!("{} at byte {}", e.what, e.at)))
}

struct Error {
    what: &'static str,
    at: usize,
}

type Result<T> = std::result::Result<T, Error>;

struct Reader<'a> {
    source: &'a Bytes,
    bytes: &'a [u8],
    /// The whole input when it is valid UTF-8 (checked once up front), so that strings
    /// read from it are borrowed without validating each one again.
    text: Option<&'a str>,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn error<T>(&self, what: &'static str) -> Result<T> {
        Err(Error { what, at: self.pos })
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips whitespace and returns the next byte without consuming it.
    #[inline(always)]
    fn peek_token(&mut self) -> Option<u8> {
        // fastjson writes no whitespace, so the first byte is almost always the token.
        match self.bytes.get(self.pos) {
            Some(&b) if !is_whitespace(b) => Some(b),
            _ => self.skip_whitespace(),
        }
    }

    #[inline(never)]
    fn skip_whitespace(&mut self) -> Option<u8> {
        while let Some(&b) = self.bytes.get(self.pos) {
            if !is_whitespace(b) {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    #[inline]
    fn expect(&mut self, byte: u8, what: &'static str) -> Result<()> {
        if self.peek_token() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            self.error(what)
        }
    }

    fn header(&mut self) -> Result<Header> {
        let mut header = Header {
            code: 0,
            language: LanguageCode::Java,
            version: 0,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
        };
        let mut saw_code = false;
        self.expect(b'{', "expected a JSON object")?;
        if self.peek_token() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.expect(b'"', "expected a property name")?;
                let key = self.string()?;
                self.expect(b':', "expected ':'")?;
                match &*key {
                    "code" => {
                        header.code = self.int()?;
                        saw_code = true;
                    }
                    "extFields" => header.ext_fields = self.ext_fields()?,
                    "flag" => header.flag = self.int()?,
                    "language" => header.language = self.language()?,
                    "opaque" => header.opaque = self.int()?,
                    "remark" => header.remark = self.remark()?,
                    "version" => header.version = self.int()?,
                    _ => self.skip_value()?,
                }
                if self.end_of_object()? {
                    break;
                }
            }
        }
        if self.peek_token().is_some() {
            return self.error("trailing characters");
        }
        if !saw_code {
            return self.error("missing field `code`");
        }
        Ok(header)
    }

    /// After a member: `true` at the closing brace, `false` after a comma.
    #[inline]
    fn end_of_object(&mut self) -> Result<bool> {
        match self.peek_token() {
            Some(b',') => {
                self.pos += 1;
                Ok(false)
            }
            Some(b'}') => {
                self.pos += 1;
                Ok(true)
            }
            _ => self.error("expected ',' or '}'"),
        }
    }

    fn int(&mut self) -> Result<i32> {
        match self.peek_token() {
            Some(b'"') => {
                self.pos += 1;
                let start = self.pos;
                let s = self.string()?;
                s.parse().or(Err(Error {
                    what: "not a 32-bit integer",
                    at: start,
                }))
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                if let Some(n) = self.small_natural() {
                    return Ok(n);
                }
                match self.number()?.integer() {
                    Some(Integer::Unsigned(n)) => i32::try_from(n).ok(),
                    Some(Integer::Negative(n)) => i32::try_from(n).ok(),
                    None => None,
                }
                .ok_or(Error {
                    what: "not a 32-bit integer",
                    at: start,
                })
            }
            _ => self.error("expected a 32-bit integer"),
        }
    }

    /// A number token of 1 to 9 digits without sign, fraction or exponent (every
    /// `code`, `flag` and `opaque` Java sends but negative ones), consumed; otherwise
    /// `None` with nothing consumed, for [`Self::number`] to judge.
    #[inline]
    fn small_natural(&mut self) -> Option<i32> {
        let digits = self.bytes.get(self.pos..)?;
        let len = digits
            .iter()
            .take(10)
            .take_while(|d| d.is_ascii_digit())
            .count();
        let followed_by = digits.get(len).copied();
        if len == 0
            || len > 9
            || (digits[0] == b'0' && len > 1)
            || matches!(followed_by, Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        self.pos += len;
        Some(
            digits[..len]
                .iter()
                .fold(0, |n, d| n * 10 + i32::from(d - b'0')),
        )
    }

    fn language(&mut self) -> Result<LanguageCode> {
        match self.peek_token() {
            Some(b'"') => {
                self.pos += 1;
                Ok(LanguageCode::from_name(&self.string()?))
            }
            Some(b'n') => self.literal(b"null").map(|()| LanguageCode::Java),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                let code = match self.number()?.integer() {
                    Some(Integer::Unsigned(n)) => u8::try_from(n).unwrap_or(u8::MAX),
                    Some(Integer::Negative(_)) => u8::MAX,
                    None => {
                        return Err(Error {
                            what: "expected a language name or code",
                            at: start,
                        });
                    }
                };
                Ok(LanguageCode::from_code(code))
            }
            _ => self.error("expected a language name or code"),
        }
    }

    fn remark(&mut self) -> Result<Option<String>> {
        match self.peek_token() {
            Some(b'"') => {
                self.pos += 1;
                Ok(Some(self.string()?.into_owned()))
            }
            Some(b'n') => self.literal(b"null").map(|()| None),
            _ => self.error("expected a string or null"),
        }
    }

    fn ext_fields(&mut self) -> Result<ExtFields> {
        match self.peek_token() {
            Some(b'{') => self.pos += 1,
            Some(b'n') => return self.literal(b"null").map(|()| ExtFields::new()),
            _ => return self.error("expected an extFields object or null"),
        }
        if self.peek_token() == Some(b'}') {
            self.pos += 1;
            return Ok(ExtFields::new());
        }
        // An entry takes at least 5 bytes (`"":0,`), which bounds the reservation.
        let mut entries =
            DecodedEntries::with_capacity(((self.bytes.len() - self.pos) / 5).min(16));
        loop {
            self.expect(b'"', "expected an extFields key")?;
            let key = match self.string()? {
                Cow::Borrowed(k) => {
                    intern(k).map_or_else(|| Cow::Owned(k.to_owned()), Cow::Borrowed)
                }
                Cow::Owned(k) => intern(&k).map_or(Cow::Owned(k), Cow::Borrowed),
            };
            self.expect(b':', "expected ':'")?;
            if let Some(value) = self.scalar()? {
                entries.push(key, value);
            }
            if self.end_of_object()? {
                return Ok(entries.finish(self.source.clone()));
            }
        }
    }

    /// One extFields value; `None` for `null`.
    fn scalar(&mut self) -> Result<Option<Value>> {
        Ok(Some(match self.peek_token() {
            Some(b'"') => {
                self.pos += 1;
                match self.string()? {
                    Cow::Borrowed(s) => Value::span(s, self.bytes),
                    Cow::Owned(s) => Value::from(s),
                }
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                let number = self.number()?;
                match number.integer() {
                    // serde_json renders these integers as they are written.
                    Some(_) => Value::span(number.text, self.bytes),
                    None => Value::from(render_float(number.text).ok_or(Error {
                        what: "number out of range",
                        at: start,
                    })?),
                }
            }
            Some(b't') => self.literal(b"true").map(|()| Value::copied("true"))?,
            Some(b'f') => self.literal(b"false").map(|()| Value::copied("false"))?,
            Some(b'n') => return self.literal(b"null").map(|()| None),
            _ => return self.error("expected a string, number, boolean or null"),
        }))
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            self.error("invalid literal")
        }
    }

    /// A number token, checked against the JSON grammar as serde_json checks it.
    fn number(&mut self) -> Result<Number<'a>> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return self.error("invalid number");
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return self.error("invalid number"),
        }
        let int_end = self.pos;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return self.error("invalid number");
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return self.error("invalid number");
            }
            self.digits();
        }
        // The token is ASCII, so neither way of slicing it can fail.
        let text = match self.text {
            Some(text) => text.get(start..self.pos),
            None => std::str::from_utf8(&self.bytes[start..self.pos]).ok(),
        }
        .unwrap_or_default();
        Ok(Number {
            text,
            negative,
            is_integer: int_end == self.pos,
        })
    }

    #[inline]
    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// The rest of a string whose opening quote has been consumed: borrowed from the
    /// input unless it holds escapes.
    #[inline(always)]
    fn string(&mut self) -> Result<Cow<'a, str>> {
        let start = self.pos;
        let end = self.scan_plain();
        if self.peek() == Some(b'"') {
            self.pos += 1;
            return self.text_at(start, end).map(Cow::Borrowed);
        }
        self.escaped_string(start, end)
    }

    /// [`Self::string`] past its first run of plain text, which did not end with the
    /// closing quote. Kept out of line so that the common case stays small.
    #[inline(never)]
    fn escaped_string(&mut self, start: usize, end: usize) -> Result<Cow<'a, str>> {
        if self.peek() != Some(b'\\') {
            return self.string_error();
        }
        // Bounded by the input: escapes only ever shrink.
        let mut owned = String::with_capacity(self.bytes.len() - start);
        owned.push_str(self.text_at(start, end)?);
        loop {
            self.pos += 1;
            self.escape(&mut owned)?;
            let from = self.pos;
            let to = self.scan_plain();
            owned.push_str(self.text_at(from, to)?);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(owned));
                }
                Some(b'\\') => {}
                _ => return self.string_error(),
            }
        }
    }

    fn string_error<T>(&self) -> Result<T> {
        match self.peek() {
            None => self.error("EOF while parsing a string"),
            _ => self.error("control character (\\u0000-\\u001F) found while parsing a string"),
        }
    }

    /// Advances to the next quote, backslash or control character (or the end) and
    /// returns that position.
    #[inline(always)]
    fn scan_plain(&mut self) -> usize {
        // Eight bytes per step while a whole word is left; the rest byte by byte.
        while let Some(word) = self
            .bytes
            .get(self.pos..)
            .and_then(<[u8]>::first_chunk::<8>)
        {
            let stops = stop_bytes(u64::from_le_bytes(*word));
            if stops != 0 {
                self.pos += (stops.trailing_zeros() / 8) as usize;
                return self.pos;
            }
            self.pos += 8;
        }
        while let Some(&b) = self.bytes.get(self.pos) {
            if STOPS_PLAIN_TEXT[usize::from(b)] {
                break;
            }
            self.pos += 1;
        }
        self.pos
    }

    #[inline(always)]
    fn text_at(&self, start: usize, end: usize) -> Result<&'a str> {
        let text = match self.text {
            Some(text) => {
                let bytes = text.as_bytes().get(start..end).unwrap_or_default();
                debug_assert!(std::str::from_utf8(bytes).is_ok());
                // SAFETY: `text` is valid UTF-8, and `start` and `end` sit next to ASCII
                // delimiters (a quote, a backslash escape, a control character) or at
                // the end of the input. No byte of a multi-byte character is ASCII, so
                // both are char boundaries and the range is valid UTF-8 on its own.
                Some(unsafe { std::str::from_utf8_unchecked(bytes) })
            }
            None => std::str::from_utf8(&self.bytes[start..end]).ok(),
        };
        text.ok_or(Error {
            what: "invalid unicode code point",
            at: start,
        })
    }

    /// Decodes one escape; the backslash has been consumed.
    fn escape(&mut self, out: &mut String) -> Result<()> {
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                if let Some(ascii) = self.ascii_escape() {
                    // `\u00XX` below 0x80: the separators of the message properties
                    // (`\u0001`, `\u0002`) fastjson writes for every send.
                    self.pos += 5;
                    out.push(char::from(ascii));
                    return Ok(());
                }
                self.pos += 1;
                let unit = self.hex4()?;
                let c = match unit {
                    0xDC00..=0xDFFF => return self.error("lone trailing surrogate in hex escape"),
                    0xD800..=0xDBFF => {
                        if !self.bytes[self.pos..].starts_with(b"\\u") {
                            return self.error("unexpected end of hex escape");
                        }
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return self.error("lone leading surrogate in hex escape");
                        }
                        0x1_0000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
                    }
                    _ => u32::from(unit),
                };
                // Surrogates were handled above, so this is always a scalar value.
                out.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                return Ok(());
            }
            _ => return self.error("invalid escape"),
        };
        self.pos += 1;
        out.push(c);
        Ok(())
    }

    /// The ASCII character of a `u00XX` escape body at the cursor (XX below 0x80).
    #[inline]
    fn ascii_escape(&self) -> Option<u8> {
        let [b'u', b'0', b'0', high, low] = *self.bytes.get(self.pos..)?.first_chunk::<5>()? else {
            return None;
        };
        let high = match high {
            b'0'..=b'7' => high - b'0',
            _ => return None,
        };
        let low = match low {
            b'0'..=b'9' => low - b'0',
            b'a'..=b'f' => low - b'a' + 10,
            b'A'..=b'F' => low - b'A' + 10,
            _ => return None,
        };
        Some(high << 4 | low)
    }

    fn hex4(&mut self) -> Result<u16> {
        let Some(digits) = self.bytes.get(self.pos..self.pos + 4) else {
            self.pos = self.bytes.len();
            return self.error("EOF while parsing a string");
        };
        let mut n = 0u16;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return self.error("invalid escape"),
            };
            n = n << 4 | u16::from(v);
        }
        self.pos += 4;
        Ok(n)
    }

    /// Skips a string whose opening quote has been consumed, checking only its escapes
    /// and control characters (serde_json's `ignore_str`).
    fn skip_string(&mut self) -> Result<()> {
        loop {
            self.scan_plain();
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            self.hex4()?;
                        }
                        None => return self.error("EOF while parsing a string"),
                        _ => return self.error("invalid escape"),
                    }
                }
                _ => return self.string_error(),
            }
        }
    }

    /// Skips one value of any depth without recursing (serde_json's `ignore_value`).
    /// The stack of open containers grows by one byte per nesting level, each of which
    /// took at least one byte of input.
    fn skip_value(&mut self) -> Result<()> {
        let mut open: Vec<u8> = Vec::new();
        loop {
            match self.peek_token() {
                Some(b'n') => self.literal(b"null")?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                }
                Some(b'"') => {
                    self.pos += 1;
                    self.skip_string()?;
                }
                Some(bracket @ (b'[' | b'{')) => {
                    self.pos += 1;
                    let close = if bracket == b'[' { b']' } else { b'}' };
                    if self.peek_token() == Some(close) {
                        self.pos += 1;
                    } else {
                        open.push(close);
                        if close == b'}' {
                            self.skip_member_name()?;
                        }
                        continue;
                    }
                }
                None => return self.error("EOF while parsing a value"),
                _ => return self.error("expected value"),
            }
            // A value is complete: close containers until one expects another value.
            loop {
                let Some(&close) = open.last() else {
                    return Ok(());
                };
                match self.peek_token() {
                    Some(b',') => {
                        self.pos += 1;
                        if close == b'}' {
                            self.skip_member_name()?;
                        }
                        break;
                    }
                    Some(b) if b == close => {
                        self.pos += 1;
                        open.pop();
                    }
                    None => return self.error("EOF while parsing a list or object"),
                    _ => return self.error("expected ',' or the end of a list or object"),
                }
            }
        }
    }

    fn skip_member_name(&mut self) -> Result<()> {
        self.expect(b'"', "key must be a string")?;
        self.skip_string()?;
        self.expect(b':', "expected ':'")
    }
}

#[inline(always)]
fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}
