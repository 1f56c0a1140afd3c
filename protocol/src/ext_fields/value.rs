//! The string stored for one extFields entry.

use std::fmt;

/// An extFields value: a `String`, up to [`Value::INLINE_CAP`] bytes stored in place, or
/// a span of the decoded header the map keeps (see [`crate::ExtFields`]), so that
/// decoding a frame copies no value. Same size as `String` (the other variants live
/// beside `String`'s capacity niche).
#[derive(Clone)]
pub(crate) enum Value {
    /// Invariant: `bytes[..len]` is valid UTF-8 (it is always copied from a `&str`) and
    /// `len <= INLINE_CAP`. Neither field is ever mutated after construction.
    Inline {
        len: u8,
        bytes: [u8; Value::INLINE_CAP],
    },
    Heap(String),
    /// `source[start..start + len]` of the map holding it. Invariant: made only by
    /// [`Value::span`] from a `&str` that lies inside that source, and never moved to
    /// another map (the entries of an `ExtFields` are private to it).
    Span {
        start: u32,
        len: u32,
    },
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

    /// `text`, which must lie inside `source`, as a span of it; copied when it does not
    /// (a decoder bug, not worth a panic).
    #[inline(always)]
    pub(crate) fn span(text: &str, source: &[u8]) -> Self {
        match subslice_range(text.as_bytes(), source) {
            Some((start, len)) => Self::Span { start, len },
            None => Self::copied(text),
        }
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

    /// The text of the value; `source` is the header of the map holding it.
    #[inline]
    pub(crate) fn resolve<'a>(&'a self, source: &'a [u8]) -> &'a str {
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
            Self::Span { start, len } => {
                let range = *start as usize..(*start as usize + *len as usize);
                let bytes = source.get(range).unwrap_or_default();
                debug_assert!(std::str::from_utf8(bytes).is_ok());
                // SAFETY: a span is made only from a `&str` lying inside the source of
                // the map holding it, and both are immutable, so the range is that
                // string's bytes: valid UTF-8 (an out-of-range span, impossible by the
                // same invariant, reads as "").
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
        }
    }

    pub(crate) fn into_string(self, source: &[u8]) -> String {
        match self {
            Self::Heap(s) => s,
            other => other.resolve(source).to_owned(),
        }
    }
}

/// Where `part` lies inside `whole`, as (start, len), when it does.
#[inline(always)]
pub(crate) fn subslice_range(part: &[u8], whole: &[u8]) -> Option<(u32, u32)> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    if end > whole.len() {
        return None;
    }
    Some((u32::try_from(start).ok()?, u32::try_from(part.len()).ok()?))
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

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Span { start, len } => write!(f, "Span({start}..+{len})"),
            other => fmt::Debug::fmt(other.resolve(&[]), f),
        }
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
            assert_eq!(copied.resolve(&[]), s);
            assert_eq!(owned.resolve(&[]), copied.resolve(&[]));
            assert_eq!(
                matches!(copied, Value::Inline { .. }),
                s.len() <= Value::INLINE_CAP
            );
            assert_eq!(copied.clone().into_string(&[]), s);
        }
        assert_eq!(format!("{:?}", Value::copied("a\"b")), "\"a\\\"b\"");
    }

    #[test]
    fn spans_resolve_inside_their_source_only() {
        let source = "xx héllo yy";
        let part = &source[3..9];
        let span = Value::span(part, source.as_bytes());
        assert!(matches!(span, Value::Span { start: 3, len: 6 }));
        assert_eq!(span.resolve(source.as_bytes()), "héllo");
        assert_eq!(span.clone().into_string(source.as_bytes()), "héllo");
        let elsewhere = String::from("héllo");
        let copied = Value::span(&elsewhere, source.as_bytes());
        assert!(matches!(copied, Value::Inline { .. }));
        assert_eq!(
            subslice_range(&source.as_bytes()[11..11], &source.as_bytes()[11..]),
            Some((0, 0))
        );
        assert_eq!(
            subslice_range(&source.as_bytes()[..4], &source.as_bytes()[1..]),
            None
        );
    }
}
