//! Java `String.hashCode()` over UTF-16 code units, and the IndexFile key hash
//! (`IndexFile.indexKeyHashMethod`).

/// Continues a Java string hash over `text`: `h = 31·h + u` for every UTF-16 code unit,
/// wrapping. Hashing `"a"` then `"b"` equals hashing `"ab"`, so `topic#key` needs no
/// temporary string.
pub fn java_hash_continue(mut h: i32, text: &str) -> i32 {
    for unit in text.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    h
}

pub use protocol::message::java_string_hash;

/// `Math.abs(hashCode)`, with `Integer.MIN_VALUE` (whose abs overflows) mapped to 0.
pub fn index_key_hash(java_hash: i32) -> i32 {
    java_hash.checked_abs().unwrap_or(0)
}

/// Index hash of the key `"<topic>#<key>"` (`IndexService.buildKey`).
pub fn topic_key_hash(topic: &str, key: &str) -> i32 {
    let h = java_hash_continue(0, topic);
    let h = java_hash_continue(h, "#");
    index_key_hash(java_hash_continue(h, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_examples() {
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("TopicTest#KEY1"), -1_656_969_516);
        assert_eq!(topic_key_hash("TopicTest", "KEY1"), 1_656_969_516);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(index_key_hash(i32::MIN), 0);
    }

    #[test]
    fn continuing_equals_hashing_the_concatenation() {
        for (a, b) in [("TopicTest", "#KEY1"), ("é", "😀x"), ("", "abc")] {
            let joined = format!("{a}{b}");
            assert_eq!(
                java_hash_continue(java_hash_continue(0, a), b),
                java_string_hash(&joined)
            );
        }
        assert_eq!(
            topic_key_hash("é", "😀"),
            index_key_hash(java_string_hash("é#😀"))
        );
    }
}
