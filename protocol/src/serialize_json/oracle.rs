//! The serde_json visitor the JSON header was first read with, kept as the reference
//! the single-pass reader (`super::reader`) is checked against.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::Header;
use crate::ext_fields::{Value, decoded_key};
use crate::{ExtFields, LanguageCode, ProtocolError};

pub(super) fn decode(bytes: &[u8]) -> Result<Header, ProtocolError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let header = de
        .deserialize_map(HeaderVisitor)
        .map_err(|e| ProtocolError::Json(e.to_string()))?;
    de.end().map_err(|e| ProtocolError::Json(e.to_string()))?;
    Ok(header)
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
                entries.push((key, Value::from(value)));
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
