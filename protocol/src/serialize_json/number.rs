//! JSON number tokens and the values serde_json gives them.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

/// A number token as written.
pub(super) struct Number<'a> {
    pub(super) text: &'a str,
    pub(super) negative: bool,
    /// No fraction, no exponent.
    pub(super) is_integer: bool,
}

pub(super) enum Integer {
    Unsigned(u64),
    Negative(i64),
}

impl Number<'_> {
    /// The value when serde_json would read the token as an integer: without fraction
    /// or exponent, within `u64` (positive) or `i64` (negative, `-0` excluded: serde_json
    /// reads it as the float -0.0).
    pub(super) fn integer(&self) -> Option<Integer> {
        if !self.is_integer {
            return None;
        }
        let digits = if self.negative {
            &self.text[1..]
        } else {
            self.text
        };
        let mut n: u64 = 0;
        for d in digits.bytes() {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        if !self.negative {
            return Some(Integer::Unsigned(n));
        }
        match n {
            0 => None,
            n if n <= 1 << 63 => Some(Integer::Negative((n as i64).wrapping_neg())),
            _ => None,
        }
    }
}

/// A number token serde_json reads as a float (`-0`, a fraction, an exponent, an
/// integer out of 64-bit range), rendered as `f64::to_string` renders the value
/// serde_json parsed. serde_json parses it itself, so that long mantissas round the
/// same way; `None` when it refuses the value (out of `f64` range).
pub(super) fn render_float(token: &str) -> Option<String> {
    struct Render;
    impl Visitor<'_> for Render {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<String, E> {
            Ok(v.to_string())
        }
    }
    serde_json::Deserializer::from_str(token)
        .deserialize_any(Render)
        .ok()
}
