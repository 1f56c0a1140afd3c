//! Reads fastjson output, which writes non-String map keys bare (`{0:"addr"}`), by quoting
//! such keys before handing the text to serde_json (see `MapSerializer` in fastjson and
//! reference §8.1). Standard JSON passes through unchanged.

use serde::de::DeserializeOwned;

/// Largest body accepted; admin answers are small, and this caps the copy below.
pub const MAX_BODY: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum LenientJsonError {
    #[error("body of {0} bytes exceeds {MAX_BODY}")]
    TooLarge(usize),
    #[error("body is not UTF-8")]
    NotUtf8,
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

pub fn from_slice<T: DeserializeOwned>(body: &[u8]) -> Result<T, LenientJsonError> {
    if body.len() > MAX_BODY {
        return Err(LenientJsonError::TooLarge(body.len()));
    }
    let text = std::str::from_utf8(body).map_err(|_| LenientJsonError::NotUtf8)?;
    Ok(serde_json::from_str(&quote_numeric_keys(text))?)
}

/// Wraps in quotes every run of `-`/digits that stands in key position (after `{` or `,`
/// inside an object, followed by `:`), outside string literals.
pub fn quote_numeric_keys(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 16);
    // Open brackets, innermost last: tells a `,` between members from one between elements.
    let mut open: Vec<u8> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut expect_key = false;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                expect_key = false;
            }
            b'{' => {
                open.push(b);
                expect_key = true;
            }
            b'[' => {
                open.push(b);
                expect_key = false;
            }
            b'}' | b']' => {
                open.pop();
                expect_key = false;
            }
            b',' => expect_key = open.last() == Some(&b'{'),
            b' ' | b'\n' | b'\r' | b'\t' => {}
            b'-' | b'0'..=b'9' if expect_key => {
                let mut end = i + 1;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
                let mut after = end;
                while after < bytes.len() && bytes[after].is_ascii_whitespace() {
                    after += 1;
                }
                if bytes.get(after) == Some(&b':') {
                    // All indices here sit on ASCII bytes, so they are char boundaries.
                    out.push_str(&text[copied..i]);
                    out.push('"');
                    out.push_str(&text[i..end]);
                    out.push('"');
                    copied = end;
                }
                expect_key = false;
                i = end;
                continue;
            }
            _ => expect_key = false,
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_bare_numeric_keys_only() {
        assert_eq!(
            quote_numeric_keys(r#"{"a":{0:"x:1",1:"y"},"n":[1,2],"s":"{3:4}"}"#),
            r#"{"a":{"0":"x:1","1":"y"},"n":[1,2],"s":"{3:4}"}"#
        );
        assert_eq!(quote_numeric_keys(r#"{ -1 : 5 }"#), r#"{ "-1" : 5 }"#);
        assert_eq!(quote_numeric_keys(r#"{"k":"é",2:3}"#), r#"{"k":"é","2":3}"#);
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert!(from_slice::<serde_json::Value>(b"{0:").is_err());
        assert!(from_slice::<serde_json::Value>(&[0xff, 0xfe]).is_err());
    }
}
