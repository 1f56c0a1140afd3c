//! Reading and writing the JSON dialect fastjson produces for RocketMQ config files.
//!
//! fastjson writes non-String map keys unquoted (`{0:250,1:249}`),
//! which strict JSON parsers reject, and pretty-prints with tab indentation and no space after
//! the colon. [`parse`] reads that dialect through `protocol::body::fastjson`; [`to_pretty`]
//! and [`write_int_key_map`] write it.

use std::io;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::ser::{Formatter, PrettyFormatter};

/// Parses fastjson text (unquoted integer keys accepted) with the protocol crate's
/// tolerant reader; the error is a human-readable reason.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    protocol::body::fastjson::from_slice(text.as_bytes()).map_err(|e| e.to_string())
}

/// Pretty JSON in fastjson's `PrettyFormat` style: tab indentation, `"key":value`, and
/// properties sorted by name (going through `serde_json::Value`, whose maps are sorted).
pub fn to_pretty<T: Serialize>(value: &T) -> String {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, FastjsonPretty::default());
    // Plain structs/maps of strings and numbers always serialize.
    let sorted = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
    if sorted.serialize(&mut ser).is_err() {
        return String::from("{}");
    }
    String::from_utf8(out).unwrap_or_else(|_| String::from("{}"))
}

/// Renders `{k:v,k:v}` with unquoted integer keys, as fastjson writes `Map<Integer, Long>`.
pub fn write_int_key_map(out: &mut String, entries: impl IntoIterator<Item = (i64, i64)>) {
    use std::fmt::Write;
    out.push('{');
    for (n, (k, v)) in entries.into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        let _ = write!(out, "{k}:{v}");
    }
}

/// JSON string literal for a map key.
pub fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| String::from("\"\""))
}

struct FastjsonPretty {
    inner: PrettyFormatter<'static>,
}

impl Default for FastjsonPretty {
    fn default() -> Self {
        Self {
            inner: PrettyFormatter::with_indent(b"\t"),
        }
    }
}

impl Formatter for FastjsonPretty {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.inner.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.inner.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b":")
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn parses_bare_numeric_keys() {
        let text = r#"{"a@g":{0:12,15 :7},"s":{"0":1}}"#;
        let parsed: BTreeMap<String, BTreeMap<i32, i64>> = parse(text).unwrap();
        assert_eq!(parsed["a@g"][&15], 7);
        assert_eq!(parsed["s"][&0], 1);
        assert!(parse::<BTreeMap<String, i64>>("{\"a\":").is_err());
    }

    #[test]
    fn pretty_uses_tabs_sorted_keys_and_no_space_after_colon() {
        let v = serde_json::json!({"b": {"d": 1, "c": [1, 2]}, "a": true});
        assert_eq!(
            to_pretty(&v),
            "{\n\t\"a\":true,\n\t\"b\":{\n\t\t\"c\":[\n\t\t\t1,\n\t\t\t2\n\t\t],\n\t\t\"d\":1\n\t}\n}"
        );
    }

    #[test]
    fn int_key_maps_are_unquoted() {
        let mut out = String::new();
        write_int_key_map(&mut out, [(0, 5), (3, -1)]);
        assert_eq!(out, "{0:5,3:-1");
    }
}
