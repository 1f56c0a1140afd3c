//! Typed request/response headers, converted to and from a command's extFields.
//!
//! RocketMQ's `RemotingCommand.decodeCommandCustomHeader` fills a header class from
//! extFields with Java's parsers; a `@CFNotNull` field that is missing fails the request
//! with `SYSTEM_ERROR`. [`header!`](crate::header!) declares a header the same way: each
//! field is `required`, `optional` (an `Option`) or `default` (a Java primitive that
//! keeps its initial value when absent).

mod acl;
mod admin;
mod client;
mod consumer;
mod field;
mod ha;
mod namesrv;
mod offset;
mod pull;
mod query;
mod reply;
mod reset_offset;
mod send;
mod transaction;

pub use acl::*;
pub use admin::*;
pub use client::*;
pub use consumer::*;
pub use field::FieldValue;
pub use ha::*;
pub use namesrv::*;
pub use offset::*;
pub use pull::*;
pub use query::*;
pub use reply::*;
pub use reset_offset::*;
pub use send::*;
pub use transaction::*;

use bytes::Bytes;
use thiserror::Error;

use crate::ExtFields;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// Same wording as Java's `RemotingCommandException` so client logs read alike.
    #[error("the custom field <{0}> is null")]
    Missing(&'static str),
    #[error("the custom field <{field}> has an invalid value {value:?}")]
    Invalid { field: &'static str, value: String },
}

/// A typed view of a command's extFields.
pub trait CommandHeader: Sized {
    fn read(fields: &ExtFields) -> Result<Self, HeaderError>;
    fn write(&self, fields: &mut ExtFields);
}

/// A command that carries no header fields.
impl CommandHeader for () {
    fn read(_: &ExtFields) -> Result<Self, HeaderError> {
        Ok(())
    }
    fn write(&self, _: &mut ExtFields) {}
}

/// Reads one field. `required` fails when absent, `optional` yields `None`, `default`
/// yields the given value.
pub fn read_required<T: FieldValue>(
    fields: &ExtFields,
    key: &'static str,
) -> Result<T, HeaderError> {
    parse_required(fields.get(key), key, fields.source())
}

pub fn read_optional<T: FieldValue>(
    fields: &ExtFields,
    key: &'static str,
) -> Result<Option<T>, HeaderError> {
    parse_optional(fields.get(key), key, fields.source())
}

/// [`read_required`] for a value found by [`ExtFields::lookup_slots`]; `source` is the
/// map's [`ExtFields::source`].
#[doc(hidden)]
#[inline]
pub fn parse_required<T: FieldValue>(
    value: Option<&str>,
    key: &'static str,
    source: &Bytes,
) -> Result<T, HeaderError> {
    match value {
        Some(v) => parse(key, v, source),
        None => Err(HeaderError::Missing(key)),
    }
}

#[doc(hidden)]
#[inline]
pub fn parse_optional<T: FieldValue>(
    value: Option<&str>,
    key: &'static str,
    source: &Bytes,
) -> Result<Option<T>, HeaderError> {
    value.map(|v| parse(key, v, source)).transpose()
}

fn invalid(key: &'static str, value: &str) -> HeaderError {
    HeaderError::Invalid {
        field: key,
        value: value.chars().take(64).collect(),
    }
}

#[inline]
fn parse<T: FieldValue>(key: &'static str, value: &str, source: &Bytes) -> Result<T, HeaderError> {
    T::parse_shared(value, source).ok_or_else(|| invalid(key, value))
}

/// Declares a header struct and its [`CommandHeader`] impl.
///
/// ```
/// protocol::header! {
///     /// Example.
///     pub struct Example {
///         required topic: String = "topic",
///         optional queue_id: i32 = "queueId",
///         default unit_mode: bool = "unitMode" => false,
///     }
/// }
/// ```
#[macro_export]
macro_rules! header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $kind:ident $field:ident : $ty:ty = $key:literal $(=> $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: $crate::header_field_type!($kind $ty),
            )*
        }

        impl $crate::header::CommandHeader for $name {
            // One visit of the extFields maps each key to its field's slot; then the
            // fields are parsed in declaration order (so the first error is the one a
            // field-by-field read would give).
            fn read(
                fields: &$crate::ExtFields,
            ) -> ::core::result::Result<Self, $crate::header::HeaderError> {
                #[allow(non_camel_case_types)]
                enum Slot { $( $field, )* }
                let [$( $field, )*] = fields.lookup_slots(|key| match key {
                    $( $key => Some(Slot::$field as usize), )*
                    _ => None,
                });
                let source = fields.source();
                Ok(Self {
                    $( $field: $crate::header_parse_field!($kind $field, $key, source $(, $default)?), )*
                })
            }

            fn write(&self, fields: &mut $crate::ExtFields) {
                $( $crate::header_write_field!($kind fields, $key, &self.$field); )*
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! header_parse_field {
    (required $value:ident, $key:literal, $source:ident) => {
        $crate::header::parse_required($value, $key, $source)?
    };
    (optional $value:ident, $key:literal, $source:ident) => {
        $crate::header::parse_optional($value, $key, $source)?
    };
    (default $value:ident, $key:literal, $source:ident, $default:expr) => {
        $crate::header::parse_optional($value, $key, $source)?.unwrap_or($default)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! header_field_type {
    (required $ty:ty) => { $ty };
    (default $ty:ty) => { $ty };
    (optional $ty:ty) => { ::core::option::Option<$ty> };
}

#[doc(hidden)]
#[macro_export]
macro_rules! header_write_field {
    (required $fields:ident, $key:literal, $value:expr) => {
        $fields.insert_static($key, $crate::header::FieldValue::render($value))
    };
    (default $fields:ident, $key:literal, $value:expr) => {
        $fields.insert_static($key, $crate::header::FieldValue::render($value))
    };
    (optional $fields:ident, $key:literal, $value:expr) => {
        if let Some(v) = $value {
            $fields.insert_static($key, $crate::header::FieldValue::render(v));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::header! {
        pub struct Probe {
            required topic: String = "topic",
            required queue_id: i32 = "queueId",
            optional offset: i64 = "offset",
            default unit_mode: bool = "unitMode" => false,
        }
    }

    #[test]
    fn round_trip_and_errors() {
        let h = Probe {
            topic: "T".into(),
            queue_id: 3,
            offset: Some(-7),
            unit_mode: true,
        };
        let mut f = ExtFields::new();
        h.write(&mut f);
        assert_eq!(f.get("queueId"), Some("3"));
        assert_eq!(f.get("unitMode"), Some("true"));
        assert_eq!(Probe::read(&f), Ok(h));

        f.remove("topic");
        assert_eq!(Probe::read(&f), Err(HeaderError::Missing("topic")));
        assert_eq!(
            HeaderError::Missing("topic").to_string(),
            "the custom field <topic> is null"
        );

        let f: ExtFields = [("topic", "T"), ("queueId", "x")].into_iter().collect();
        assert!(matches!(
            Probe::read(&f),
            Err(HeaderError::Invalid {
                field: "queueId",
                ..
            })
        ));

        let f: ExtFields = [("topic", "T"), ("queueId", "+1")].into_iter().collect();
        let p = Probe::read(&f).unwrap();
        assert_eq!((p.queue_id, p.offset, p.unit_mode), (1, None, false));
    }
}
