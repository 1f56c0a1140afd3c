//! The message properties string (Java `MessageDecoder`
//! `messageProperties2String` / `string2messageProperties`, names from `MessageConst`).
//!
//! `name U+0001 value U+0002 name U+0001 value ...`. The parser is as lenient as
//! Java's: a segment is kept only when it has a non-empty name and a non-empty value,
//! anything else is skipped silently, so parsing never fails.

use std::fmt;

pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
pub const PROPERTY_SEPARATOR: char = '\u{2}';

pub const KEYS: &str = "KEYS";
pub const TAGS: &str = "TAGS";
pub const WAIT: &str = "WAIT";
pub const DELAY: &str = "DELAY";
pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
pub const REAL_TOPIC: &str = "REAL_TOPIC";
pub const REAL_QID: &str = "REAL_QID";
pub const TRAN_MSG: &str = "TRAN_MSG";
pub const PGROUP: &str = "PGROUP";
pub const MIN_OFFSET: &str = "MIN_OFFSET";
pub const MAX_OFFSET: &str = "MAX_OFFSET";
pub const BUYER_ID: &str = "BUYER_ID";
pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
pub const MQ2_FLAG: &str = "MQ2_FLAG";
pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
pub const MSG_REGION: &str = "MSG_REGION";
pub const TRACE_SWITCH: &str = "TRACE_ON";
pub const UNIQ_KEY: &str = "UNIQ_KEY";
pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
pub const TRAN_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
pub const INSTANCE_ID: &str = "INSTANCE_ID";
pub const CORRELATION_ID: &str = "CORRELATION_ID";
pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
pub const TTL: &str = "TTL";
pub const ARRIVE_TIME: &str = "ARRIVE_TIME";
pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
pub const CLUSTER: &str = "CLUSTER";
pub const MSG_TYPE: &str = "MSG_TYPE";
pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
pub const INNER_MULTI_QUEUE_OFFSET: &str = "INNER_MULTI_QUEUE_OFFSET";
/// Set by Java transactional producers; not in `MessageConst`'s reserved set.
pub const TRANSACTION_ID: &str = "__transactionId__";
/// `MessageConst.KEY_SEPARATOR`: separates the business keys inside `KEYS`.
pub const KEY_SEPARATOR: char = ' ';

/// Iterates the well-formed `(name, value)` pairs of a properties string in order,
/// without allocating. Duplicated names are all yielded; [`Properties::parse`] keeps
/// the last, like Java's `HashMap.put`.
pub fn iter(properties: &str) -> impl Iterator<Item = (&str, &str)> {
    properties.split(PROPERTY_SEPARATOR).filter_map(|segment| {
        let (name, value) = segment.split_once(NAME_VALUE_SEPARATOR)?;
        (!name.is_empty() && !value.is_empty()).then_some((name, value))
    })
}

/// The value of one property, straight from the string (for the dispatcher, which
/// needs `TAGS`, `KEYS` and `UNIQ_KEY` of every record).
pub fn find<'a>(properties: &'a str, name: &str) -> Option<&'a str> {
    iter(properties)
        .filter(|(n, _)| *n == name)
        .last()
        .map(|(_, v)| v)
}

/// Business keys of `KEYS`, split on spaces, empty pieces dropped.
pub fn keys(properties: &str) -> impl Iterator<Item = &str> {
    find(properties, KEYS)
        .unwrap_or("")
        .split(KEY_SEPARATOR)
        .filter(|k| !k.is_empty())
}

/// A parsed properties map in insertion order. Messages carry a handful of entries, so
/// a vector beats hashing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties(Vec<(String, String)>);

impl Properties {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn parse(properties: &str) -> Self {
        let mut map = Self::new();
        for (name, value) in iter(properties) {
            map.insert(name, value);
        }
        map
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Replaces the value in place when the name exists, else appends. A name or value
    /// that is empty or contains a separator cannot survive a round trip; Java writes
    /// such entries anyway and so does this.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let name = name.into();
        let value = value.into();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.0.push((name, value)),
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<String> {
        let i = self.0.iter().position(|(n, _)| n == name)?;
        Some(self.0.remove(i).1)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// Encoded length in bytes, to check against the record's 32767-byte limit before
    /// building the string.
    pub fn encoded_len(&self) -> usize {
        let payload: usize = self.0.iter().map(|(n, v)| n.len() + v.len() + 2).sum();
        payload.saturating_sub(1)
    }

    /// Appends the encoded form to `out`, 4.9.x style: no trailing separator.
    pub fn write_to(&self, out: &mut String) {
        for (i, (name, value)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(PROPERTY_SEPARATOR);
            }
            out.push_str(name);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(value);
        }
    }
}

impl fmt::Display for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(self.encoded_len());
        self.write_to(&mut s);
        f.write_str(&s)
    }
}

impl<N: Into<String>, V: Into<String>> FromIterator<(N, V)> for Properties {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        let mut map = Self::new();
        for (n, v) in iter {
            map.insert(n, v);
        }
        map
    }
}

/// Properties of one record of a stored batch (`CommitLog.MessageExtEncoder.encode`
/// for `MessageExtBatch`): the inner message's own string, then the batch-level string
/// from the request header, with a separator between them only when both are non-empty
/// and the inner one does not already end with one.
pub fn join_batch_properties(inner: &str, batch_level: &str, out: &mut String) {
    out.push_str(inner);
    if !inner.is_empty() && !batch_level.is_empty() && !inner.ends_with(PROPERTY_SEPARATOR) {
        out.push(PROPERTY_SEPARATOR);
    }
    out.push_str(batch_level);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_java_shapes() {
        // A 2017 capture from a Java producer, trailing separator included.
        let s = "TAGS\u{1}TAG\u{2}WAIT\u{1}true\u{2}KEYS\u{1}ffff\u{2}";
        let p = Properties::parse(s);
        assert_eq!(p.get(TAGS), Some("TAG"));
        assert_eq!(p.get(WAIT), Some("true"));
        assert_eq!(p.get(KEYS), Some("ffff"));
        assert_eq!(
            p.to_string(),
            "TAGS\u{1}TAG\u{2}WAIT\u{1}true\u{2}KEYS\u{1}ffff"
        );
        assert_eq!(find(s, WAIT), Some("true"));
        assert_eq!(find(s, DELAY), None);
    }

    #[test]
    fn skips_malformed_segments_and_keeps_last_duplicate() {
        let s = "\u{1}x\u{2}a\u{1}\u{2}noSep\u{2}\u{2}k\u{1}1\u{2}v\u{1}a\u{1}b\u{2}k\u{1}2";
        let p = Properties::parse(s);
        assert_eq!(p.iter().collect::<Vec<_>>(), [("k", "2"), ("v", "a\u{1}b")]);
        assert_eq!(find(s, "k"), Some("2"));
    }

    #[test]
    fn keys_and_batch_join() {
        let s = "KEYS\u{1} order-1  order-2 ";
        assert_eq!(keys(s).collect::<Vec<_>>(), ["order-1", "order-2"]);
        let mut out = String::new();
        join_batch_properties("A\u{1}1", "WAIT\u{1}true", &mut out);
        assert_eq!(out, "A\u{1}1\u{2}WAIT\u{1}true");
        out.clear();
        join_batch_properties("A\u{1}1\u{2}", "WAIT\u{1}true", &mut out);
        assert_eq!(out, "A\u{1}1\u{2}WAIT\u{1}true");
        out.clear();
        join_batch_properties("", "WAIT\u{1}true", &mut out);
        assert_eq!(out, "WAIT\u{1}true");
    }

    #[test]
    fn insert_remove_len() {
        let mut p: Properties = [(TAGS, "a"), (KEYS, "k")].into_iter().collect();
        p.insert(TAGS, "b");
        assert_eq!(p.to_string(), "TAGS\u{1}b\u{2}KEYS\u{1}k");
        assert_eq!(p.encoded_len(), p.to_string().len());
        assert_eq!(p.remove(TAGS).as_deref(), Some("b"));
        assert!(!p.contains(TAGS));
        assert_eq!(Properties::new().encoded_len(), 0);
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC*|[\u{1}\u{2}ab]{0,40}") {
            let p = Properties::parse(&s);
            prop_assert_eq!(p.len(), iter(&s).map(|(n, _)| n).collect::<std::collections::HashSet<_>>().len());
        }

        #[test]
        fn round_trip(entries in proptest::collection::vec(("[A-Za-z_]{1,12}", "[^\u{1}\u{2}]{1,20}"), 0..8)) {
            let p: Properties = entries.into_iter().collect();
            let s = p.to_string();
            prop_assert_eq!(s.len(), p.encoded_len());
            prop_assert_eq!(Properties::parse(&s), p);
        }
    }
}
