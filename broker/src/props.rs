//! Message properties strings (reference §9.1): `name \u{1} value \u{2}` repeated.
//! The protocol crate is getting the same codec (helper "proto"); switch when it lands.

pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
pub const PROPERTY_SEPARATOR: char = '\u{2}';

pub const WAIT: &str = "WAIT";
pub const TAGS: &str = "TAGS";
pub const KEYS: &str = "KEYS";
pub const CLUSTER: &str = "CLUSTER";
pub const TRAN_MSG: &str = "TRAN_MSG";
pub const DELAY: &str = "DELAY";
pub const MSG_REGION: &str = "MSG_REGION";
pub const TRACE_ON: &str = "TRACE_ON";

/// `string2messageProperties`: a segment counts only with a non-empty name and value.
pub fn parse(text: &str) -> Vec<(&str, &str)> {
    text.split(PROPERTY_SEPARATOR)
        .filter_map(|seg| {
            let (k, v) = seg.split_once(NAME_VALUE_SEPARATOR)?;
            (!k.is_empty() && !v.is_empty()).then_some((k, v))
        })
        .collect()
}

pub fn get<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    parse(text)
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// `messageProperties2String` (4.9 writers: no trailing separator).
pub fn render<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (k, v) in entries {
        if !out.is_empty() {
            out.push(PROPERTY_SEPARATOR);
        }
        out.push_str(k);
        out.push(NAME_VALUE_SEPARATOR);
        out.push_str(v);
    }
    out
}

/// The properties a single message is stored with: `WAIT` removed (4.9.1+), `CLUSTER`
/// set to the broker's cluster (`SendMessageProcessor`).
pub fn for_store(text: &str, cluster: &str) -> String {
    let kept = parse(text)
        .into_iter()
        .filter(|(k, _)| *k != WAIT && *k != CLUSTER)
        .chain(std::iter::once((CLUSTER, cluster)));
    render(kept)
}

/// `WAIT` decides whether the answer waits for the store's durability; default true.
pub fn wait_store_ok(text: &str) -> bool {
    get(text, WAIT).is_none_or(|v| v.eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_render_and_store_form() {
        let old = "TAGS\u{1}TagA\u{2}WAIT\u{1}false\u{2}KEYS\u{1}k1 k2\u{2}";
        assert_eq!(
            parse(old),
            vec![("TAGS", "TagA"), ("WAIT", "false"), ("KEYS", "k1 k2")]
        );
        assert_eq!(get(old, KEYS), Some("k1 k2"));
        assert!(!wait_store_ok(old));
        assert!(wait_store_ok("TAGS\u{1}x"));
        assert_eq!(parse("\u{1}v\u{2}k\u{1}\u{2}ok\u{1}1"), vec![("ok", "1")]);
        assert_eq!(
            for_store(old, "C1"),
            "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}CLUSTER\u{1}C1"
        );
    }
}
