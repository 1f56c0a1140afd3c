//! JSON header (serialize type 0), as fastjson writes and reads it
//! (`RemotingSerializable`, reference §3.3).
//!
//! Reading is deliberately lenient because real clients differ: the C++ client sends
//! numbers and booleans as extField values, rocketmq-client-rust sends `null` remark and
//! extFields, fastjson ignores unknown properties and keeps the last of duplicate keys.
//! Writing is strict: every extField value a string, language as its name, properties in
//! alphabetical order like fastjson.

use std::fmt;

use bytes::{BufMut, BytesMut};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::command::RemotingCommand;
use crate::ext_fields::decoded_key;
use crate::{ExtFields, LanguageCode, ProtocolError};

/// The header fields of a command; the body travels outside the header.
pub(crate) struct Header {
    pub code: i32,
    pub language: LanguageCode,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Header, ProtocolError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let header = de
        .deserialize_map(HeaderVisitor)
        .map_err(|e| ProtocolError::Json(e.to_string()))?;
    de.end().map_err(|e| ProtocolError::Json(e.to_string()))?;
    Ok(header)
}

pub(crate) fn encode(cmd: &RemotingCommand, out: &mut BytesMut) {
    let mut w = out.writer();
    // Writing into a BytesMut cannot fail, and every value here serializes.
    let _ = write_header(cmd, &mut w);
}

fn write_header(cmd: &RemotingCommand, w: &mut impl std::io::Write) -> std::io::Result<()> {
    write!(w, "{{\"code\":{}", cmd.code)?;
    if !cmd.ext_fields.is_empty() {
        w.write_all(b",\"extFields\":{")?;
        for (i, (k, v)) in cmd.ext_fields.iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            serde_json::to_writer(&mut *w, k)?;
            w.write_all(b":")?;
            serde_json::to_writer(&mut *w, v)?;
        }
        w.write_all(b"}")?;
    }
    write!(
        w,
        ",\"flag\":{},\"language\":\"{}\",\"opaque\":{}",
        cmd.flag,
        cmd.language.name(),
        cmd.opaque
    )?;
    if let Some(remark) = &cmd.remark {
        w.write_all(b",\"remark\":")?;
        serde_json::to_writer(&mut *w, remark)?;
    }
    write!(
        w,
        ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":{}}}",
        cmd.version
    )
}

struct HeaderVisitor;

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = Header;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a RemotingCommand JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
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
        while let Some(Key(key)) = map.next_key::<Key>()? {
            match key.as_ref() {
                "code" => {
                    header.code = map.next_value::<Int>()?.0;
                    saw_code = true;
                }
                "version" => header.version = map.next_value::<Int>()?.0,
                "opaque" => header.opaque = map.next_value::<Int>()?.0,
                "flag" => header.flag = map.next_value::<Int>()?.0,
                "language" => header.language = map.next_value::<Language>()?.0,
                "remark" => header.remark = map.next_value::<Option<String>>()?,
                "extFields" => {
                    header.ext_fields = map.next_value_seed(ExtFieldsSeed)?.unwrap_or_default()
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !saw_code {
            return Err(de::Error::missing_field("code"));
        }
        Ok(header)
    }
}

/// An object key; well-known keys are not allocated (`Cow<str>` would always be).
struct Key(std::borrow::Cow<'static, str>);

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(decoded_key(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// An i32 written as a JSON number or a numeric string.
struct Int(i32);

impl<'de> de::Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a 32-bit integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int, E> {
                i32::try_from(v)
                    .map(Int)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int, E> {
                i32::try_from(v)
                    .map(Int)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Int, E> {
                v.parse().map(Int).map_err(|_| E::custom("not an integer"))
            }
        }
        d.deserialize_any(V)
    }
}

/// `language` as an enum name (`"JAVA"`) or, as fastjson also accepts, its ordinal.
struct Language(LanguageCode);

impl<'de> de::Deserialize<'de> for Language {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Language;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a language name or code")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Language, E> {
                Ok(Language(LanguageCode::from_name(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Language, E> {
                Ok(Language(LanguageCode::from_code(
                    u8::try_from(v).unwrap_or(u8::MAX),
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Language, E> {
                Ok(Language(LanguageCode::from_code(
                    u8::try_from(v).unwrap_or(u8::MAX),
                )))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Language, E> {
                Ok(Language(LanguageCode::Java))
            }
        }
        d.deserialize_any(V)
    }
}

/// `extFields`: `null` or an object whose values are strings, numbers, booleans or null
/// (null entries are dropped, like an absent field).
struct ExtFieldsSeed;

impl<'de> DeserializeSeed<'de> for ExtFieldsSeed {
    type Value = Option<ExtFields>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ExtFieldsSeed {
    type Value = Option<ExtFields>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an extFields object or null")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(16).min(64));
        while let Some(Key(key)) = map.next_key::<Key>()? {
            if let Some(value) = map.next_value::<Scalar>()?.0 {
                entries.push((key, value));
            }
        }
        Ok(Some(ExtFields::from_entries(entries)))
    }
}

/// One extFields value, stringified the way Java's `String.valueOf` would.
struct Scalar(Option<String>);

impl<'de> de::Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number, boolean or null")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(Some(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(Some(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(Some(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(Some(v.to_string())))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(Some(v.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar(None))
            }
        }
        d.deserialize_any(V)
    }
}
