//! Tag hash codes (`MessageExtBrokerInner.tagsString2tagsCode`).

use super::properties;

/// Java `String.hashCode()`: `h = 31 * h + c` over UTF-16 code units, wrapping.
/// Characters outside the BMP contribute their two surrogates, as in Java.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The ConsumeQueue `tagsCode` of a tag: its hash sign-extended to i64, 0 for an
/// empty tag.
pub fn tags_code(tag: &str) -> i64 {
    if tag.is_empty() {
        0
    } else {
        i64::from(java_string_hash(tag))
    }
}

/// `tagsCode` of a record from its properties string (0 when there is no `TAGS`).
pub fn tags_code_of_properties(props: &str) -> i64 {
    properties::find(props, properties::TAGS).map_or(0, tags_code)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn matches_java_values() {
        // Values computed with Java's String.hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("hello world"), 1_794_106_052);
        // Overflowing: "polygenelubricants" is a well-known Integer.MIN_VALUE hash.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // U+1F600 is the surrogate pair D83D DE00: 31 * 0xD83D + 0xDE00.
        assert_eq!(java_string_hash("\u{1F600}"), 31 * 0xD83D + 0xDE00);
        assert_eq!(tags_code("polygenelubricants"), -2_147_483_648);
        assert_eq!(tags_code_of_properties("KEYS\u{1}k\u{2}TAGS\u{1}a"), 97);
        assert_eq!(tags_code_of_properties("KEYS\u{1}k"), 0);
    }

    proptest! {
        #[test]
        fn hash_is_linear_recurrence(a in "\\PC{0,20}", b in "\\PC{0,20}") {
            // hash(a + b) = hash(a) * 31^len16(b) + hash(b) (mod 2^32).
            let n = b.encode_utf16().count() as u32;
            let pow = (0..n).fold(1i32, |p, _| p.wrapping_mul(31));
            let joined = format!("{a}{b}");
            prop_assert_eq!(
                java_string_hash(&joined),
                java_string_hash(&a).wrapping_mul(pow).wrapping_add(java_string_hash(&b))
            );
        }
    }
}
