//! Minimal access to a serialized properties string (`name U+0001 value U+0002` pairs,
//! `MessageDecoder.string2messageProperties`), for the few properties the store itself
//! reads or adds.

const NAME_VALUE: char = '\u{1}';
const PROPERTY: char = '\u{2}';

/// The value of `name`, if present.
pub fn property<'a>(properties: &'a str, name: &str) -> Option<&'a str> {
    properties.split(PROPERTY).find_map(|pair| {
        let (k, v) = pair.split_once(NAME_VALUE)?;
        (k == name).then_some(v)
    })
}

/// `properties` with `name` set to `value` (replacing an earlier value), in RocketMQ's
/// serialization (every pair followed by U+0002).
pub fn set_property(properties: &str, name: &str, value: &str) -> String {
    let mut out = String::with_capacity(properties.len() + name.len() + value.len() + 2);
    for pair in properties.split(PROPERTY).filter(|p| !p.is_empty()) {
        if pair.split_once(NAME_VALUE).is_some_and(|(k, _)| k == name) {
            continue;
        }
        out.push_str(pair);
        out.push(PROPERTY);
    }
    out.push_str(name);
    out.push(NAME_VALUE);
    out.push_str(value);
    out.push(PROPERTY);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_and_set() {
        let p = "TAGS\u{1}a\u{2}DELAY\u{1}3\u{2}";
        assert_eq!(property(p, "DELAY"), Some("3"));
        assert_eq!(property(p, "KEYS"), None);
        assert_eq!(property("", "KEYS"), None);
        let q = set_property(p, "DELAY", "4");
        assert_eq!(q, "TAGS\u{1}a\u{2}DELAY\u{1}4\u{2}");
        assert_eq!(set_property("", "A", "1"), "A\u{1}1\u{2}");
        assert_eq!(
            set_property("A\u{1}1", "B", "2"),
            "A\u{1}1\u{2}B\u{1}2\u{2}"
        );
    }
}
