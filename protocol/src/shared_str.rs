//! An immutable string that shares the bytes of the frame it was read from.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;

use crate::ext_fields::subslice_range;

/// A UTF-8 string backed by [`Bytes`]: a header field read from a decoded frame points
/// into the frame's header instead of being copied, and cloning it is a reference-count
/// increment. Used for the fields of the send path's headers (topic, group,
/// properties), which every send request carries and the broker keeps until the
/// message is stored.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SharedStr(Bytes);

impl SharedStr {
    pub const fn from_static(s: &'static str) -> Self {
        Self(Bytes::from_static(s.as_bytes()))
    }

    /// `text` as a slice of `source` when it lies inside it (no copy), else copied.
    pub(crate) fn within(text: &str, source: &Bytes) -> Self {
        match subslice_range(text.as_bytes(), source) {
            Some((start, len)) => {
                let start = start as usize;
                Self(source.slice(start..start + len as usize))
            }
            None => Self::from(text),
        }
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor takes its bytes from a `str` (`from_static`, the
        // `From` impls) or from a range of a decoded header that `within` found to be
        // exactly a `&str`'s bytes; `Bytes` is immutable.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

impl Deref for SharedStr {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// Hashes like `str`, as `Borrow<str>` requires.
impl Hash for SharedStr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        Self(Bytes::from(s.into_bytes()))
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        Self(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        s.as_str().to_owned()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_its_source_or_copies() {
        let source = Bytes::from_static("{\"b\":\"TopicTest\"}".as_bytes());
        let text = std::str::from_utf8(&source[6..15]).unwrap();
        let shared = SharedStr::within(text, &source);
        assert_eq!(shared, "TopicTest");
        assert_eq!(shared.as_ptr(), source[6..].as_ptr(), "no copy");
        let other = String::from("TopicTest");
        let copied = SharedStr::within(&other, &source);
        assert_eq!(copied, shared);
        assert_ne!(copied.as_ptr(), other.as_ptr());
        assert_eq!(SharedStr::from(String::from("é")).len(), 2);
        assert_eq!(format!("{shared} {shared:?}"), "TopicTest \"TopicTest\"");
        let mut set = std::collections::HashSet::new();
        set.insert(shared);
        assert!(set.contains("TopicTest"));
    }
}
