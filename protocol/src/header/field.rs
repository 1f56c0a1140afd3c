//! Java's string conversions for header field values (`String.valueOf` out,
//! `Integer.parseInt` / `Long.parseLong` / `Boolean.parseBoolean` in).

use bytes::Bytes;

use crate::SharedStr;

pub trait FieldValue: Sized {
    /// `None` when the text is not a valid value of this type.
    fn parse(text: &str) -> Option<Self>;
    fn render(&self) -> String;

    /// [`Self::parse`] from an owned string, handing the string back on failure.
    /// Strings override it to move instead of copy.
    fn parse_owned(text: String) -> Result<Self, String> {
        Self::parse(&text).ok_or(text)
    }

    /// [`Self::parse`] of a value that may lie inside `source`, the decoded header it
    /// came from; [`SharedStr`] overrides it to share those bytes instead of copying.
    #[inline]
    fn parse_shared(text: &str, source: &Bytes) -> Option<Self> {
        let _ = source;
        Self::parse(text)
    }
}

impl FieldValue for SharedStr {
    fn parse(text: &str) -> Option<Self> {
        Some(text.into())
    }
    fn render(&self) -> String {
        self.as_str().to_owned()
    }
    fn parse_owned(text: String) -> Result<Self, String> {
        Ok(text.into())
    }
    #[inline]
    fn parse_shared(text: &str, source: &Bytes) -> Option<Self> {
        Some(SharedStr::within(text, source))
    }
}

impl FieldValue for String {
    fn parse(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn render(&self) -> String {
        self.clone()
    }
    fn parse_owned(text: String) -> Result<Self, String> {
        Ok(text)
    }
}

/// `Boolean.parseBoolean`: only a case-insensitive "true" is true; anything else is
/// false, never an error.
impl FieldValue for bool {
    fn parse(text: &str) -> Option<Self> {
        Some(text.eq_ignore_ascii_case("true"))
    }
    fn render(&self) -> String {
        if *self { "true" } else { "false" }.to_owned()
    }
}

/// The value of 1 to 18 ASCII digits (no sign), which cannot overflow a `u64`: what
/// almost every numeric header field holds. `None` sends the text to the full parser.
#[inline]
fn plain_digits(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 18 {
        return None;
    }
    text.bytes().try_fold(0u64, |n, b| {
        let digit = b.wrapping_sub(b'0');
        (digit < 10).then(|| n * 10 + u64::from(digit))
    })
}

macro_rules! integer_field {
    ($($t:ty),*) => {$(
        /// Java's integer parsers: optional sign, decimal digits, nothing else.
        impl FieldValue for $t {
            #[inline]
            fn parse(text: &str) -> Option<Self> {
                match plain_digits(text) {
                    Some(n) => <$t>::try_from(n).ok(),
                    None => text.parse().ok(),
                }
            }
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}

integer_field!(i8, i16, i32, i64, u8, u16, u32, u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_semantics() {
        assert_eq!(bool::parse("TRUE"), Some(true));
        assert_eq!(bool::parse("yes"), Some(false));
        assert_eq!(i32::parse("-12"), Some(-12));
        assert_eq!(i32::parse(" 1"), None);
        assert_eq!(i64::parse("9223372036854775807"), Some(i64::MAX));
        assert_eq!(i32::parse("2147483648"), None);
        assert_eq!(i32::parse("2147483647"), Some(i32::MAX));
        assert_eq!(u8::parse("256"), None);
        assert_eq!(u64::parse("18446744073709551615"), Some(u64::MAX));
        assert_eq!(i64::parse("+7"), Some(7));
        assert_eq!(i32::parse(""), None);
        assert_eq!(i32::parse("1a"), None);
    }

    proptest::proptest! {
        #[test]
        fn integers_parse_like_std(text in "[-+]?[0-9]{0,21}|[0-9a/ ]{0,4}") {
            proptest::prop_assert_eq!(i32::parse(&text), text.parse().ok());
            proptest::prop_assert_eq!(i64::parse(&text), text.parse().ok());
            proptest::prop_assert_eq!(u16::parse(&text), text.parse().ok());
            proptest::prop_assert_eq!(u64::parse(&text), text.parse().ok());
        }
    }
}
