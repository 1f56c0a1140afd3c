//! The string stored for one extFields entry.

use std::fmt;

/// An extFields value: a `String`, or up to [`Value::INLINE_CAP`] bytes stored in place. Same
/// size as `String` (the inline variant lives beside `String`'s capacity niche).
#[derive(Clone)]
pub(crate) enum Value {
    /// Invariant: `bytes[..len]` is valid UTF-8 (it is always copied from a `&str`) and
    /// `len <= INLINE_CAP`. Neither field is ever mutated after construction.
    Inline {
        len: u8,
        bytes: [u8; Value::INLINE_CAP],
    },
    Heap(String),
}

impl Value {
    /// Longest value kept inline. Header values are mostly numbers, flags and short
    /// names, so most entries of a frame never touch the allocator.
    pub(crate) const INLINE_CAP: usize = 15;

    /// `s`, allocating only when it is too long to be stored inline.
    #[inline]
    pub(crate) fn copied(s: &str) -> Self {
        Self::inline(s).unwrap_or_else(|| Self::Heap(s.to_owned()))
    }

    #[inline]
    fn inline(s: &str) -> Option<Self> {
        if s.len() > Self::INLINE_CAP {
            return None;
        }
        let mut bytes = [0u8; Self::INLINE_CAP];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        Some(Self::Inline {
            len: s.len() as u8,
            bytes,
        })
    }

    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Inline { len, bytes } => {
                let bytes = &bytes[..usize::from(*len)];
                debug_assert!(std::str::from_utf8(bytes).is_ok());
                // SAFETY: `Inline` is only built by `Self::inline`, which copies the
                // whole of a `&str`, and its fields are never mutated afterwards (see the
                // variant's invariant), so `bytes` is valid UTF-8. Checking it again on
                // every read costs more than the lookup the value was read for.
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
            Self::Heap(s) => s,
        }
    }

    /// The heap string when there is one, so that it can be moved out instead of
    /// copied; the inline value otherwise.
    #[inline]
    pub(crate) fn into_heap(self) -> Result<String, Self> {
        match self {
            Self::Heap(s) => Ok(s),
            inline => Err(inline),
        }
    }

    pub(crate) fn into_string(self) -> String {
        self.into_heap().unwrap_or_else(|v| v.as_str().to_owned())
    }
}

impl From<String> for Value {
    #[inline]
    fn from(s: String) -> Self {
        Self::inline(&s).unwrap_or(Self::Heap(s))
    }
}

/// The empty string, stored inline: what a value moved out of a map leaves behind.
impl Default for Value {
    fn default() -> Self {
        Self::Inline {
            len: 0,
            bytes: [0; Self::INLINE_CAP],
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Value {}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_up_to_capacity() {
        assert_eq!(std::mem::size_of::<Value>(), std::mem::size_of::<String>());
        for s in [
            "",
            "1",
            "héllo",
            "123456789012345",
            "1234567890123456",
            "ü€𝄞 multi-byte text",
        ] {
            let copied = Value::copied(s);
            let owned = Value::from(s.to_owned());
            assert_eq!(copied.as_str(), s);
            assert_eq!(owned, copied);
            assert_eq!(
                matches!(copied, Value::Inline { .. }),
                s.len() <= Value::INLINE_CAP
            );
            assert_eq!(copied.clone().into_string(), s);
            assert_eq!(copied.into_heap().is_ok(), s.len() > Value::INLINE_CAP);
        }
        assert_eq!(format!("{:?}", Value::copied("a\"b")), "\"a\\\"b\"");
    }
}
