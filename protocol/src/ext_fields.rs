//! A command's `extFields`: the string map every typed header is carried in.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use bytes::Bytes;

mod value;

pub(crate) use value::{Value, subslice_range};

/// `extFields` of a [`crate::RemotingCommand`]. Keys are unique: when a peer sends a key
/// twice (ACL copies header fields into extFields before signing, so the binary header
/// can hold duplicates) the last value wins, like Java's `HashMap.put`.
///
/// Stored as a vector sorted by key: commands carry a dozen short entries, for which a
/// binary search beats hashing, and well-known keys are kept as `&'static str` instead
/// of being allocated per frame. Ascending key order is also the order fastjson writes,
/// so a decoded map is usually already sorted.
///
/// A decoded map keeps the frame's header bytes (`source`, a reference-counted slice of
/// the read buffer) and its values are spans of them: decoding copies no value, and a
/// header field of type [`crate::SharedStr`] is read without a copy either.
#[derive(Clone, Default)]
pub struct ExtFields {
    entries: Vec<(Cow<'static, str>, Value)>,
    source: Bytes,
}

/// Entries most commands start with; one allocation covers them.
const FIRST_CAPACITY: usize = 8;

impl ExtFields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Self {
            entries: Vec::with_capacity(n),
            source: Bytes::new(),
        }
    }

    /// The header bytes the decoded values are spans of (empty for a map built here).
    #[doc(hidden)]
    #[inline]
    pub fn source(&self) -> &Bytes {
        &self.source
    }

    /// `Ok(i)` when `key` is at `i`, else `Err(i)` where it would be inserted.
    #[inline]
    fn position(&self, key: &str) -> Result<usize, usize> {
        let key = key.as_bytes();
        self.entries
            .binary_search_by(|(k, _)| cmp_key(k.as_bytes(), key))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key)
            .ok()
            .map(|i| self.entries[i].1.resolve(&self.source))
    }

    /// Inserts or replaces an entry. A well-known key is not copied.
    pub fn insert<K, V>(&mut self, key: K, value: V)
    where
        K: AsRef<str> + Into<String>,
        V: AsRef<str> + Into<String>,
    {
        let key = match intern(key.as_ref()) {
            Some(k) => Cow::Borrowed(k),
            None => Cow::Owned(key.into()),
        };
        let value = if value.as_ref().len() <= Value::INLINE_CAP {
            Value::copied(value.as_ref())
        } else {
            Value::Heap(value.into())
        };
        self.insert_key(key, value);
    }

    /// [`Self::insert`] for a key known at compile time (typed headers): the key is not
    /// copied.
    pub fn insert_static(&mut self, key: &'static str, value: impl Into<String>) {
        self.insert_key(Cow::Borrowed(key), Value::from(value.into()));
    }

    fn insert_key(&mut self, key: Cow<'static, str>, value: Value) {
        match self.position(&key) {
            Ok(i) => self.entries[i].1 = value,
            Err(i) => {
                if self.entries.capacity() == 0 {
                    self.entries.reserve(FIRST_CAPACITY);
                }
                self.entries.insert(i, (key, value))
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.position(key).ok()?;
        Some(self.entries.remove(i).1.into_string(&self.source))
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &str)> + ExactSizeIterator {
        self.entries
            .iter()
            .map(|(k, v)| (k.as_ref(), v.resolve(&self.source)))
    }

    /// Entries sorted by key: the order fastjson writes them in, and a stable order for
    /// golden fixtures. Same order as [`Self::iter`].
    pub fn sorted(&self) -> Vec<(&str, &str)> {
        self.iter().collect()
    }

    /// Builds the map from entries in wire order in O(n log n), last duplicate winning
    /// (inserting one by one would be quadratic on a hostile frame with many keys).
    pub(crate) fn from_entries(entries: Vec<(Cow<'static, str>, Value)>) -> Self {
        let mut decoded = DecodedEntries::with_capacity(entries.len());
        for (key, value) in entries {
            decoded.push(key, value);
        }
        decoded.finish(Bytes::new())
    }
}

/// Entries as a decoder meets them, in wire order, noting on the way whether they are
/// strictly ascending: what fastjson and Java's binary writer produce, and so what
/// almost every frame holds, which then needs neither sorting nor deduplication.
pub(crate) struct DecodedEntries {
    entries: Vec<(Cow<'static, str>, Value)>,
    ascending: bool,
}

impl DecodedEntries {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            entries: Vec::with_capacity(n),
            ascending: true,
        }
    }

    #[inline(always)]
    pub(crate) fn push(&mut self, key: Cow<'static, str>, value: Value) {
        if let Some((last, _)) = self.entries.last() {
            self.ascending &= cmp_key(last.as_bytes(), key.as_bytes()) == Ordering::Less;
        }
        self.entries.push((key, value));
    }

    /// The map; `source` is the header the decoder's spans point into.
    pub(crate) fn finish(self, source: Bytes) -> ExtFields {
        let mut entries = self.entries;
        if !self.ascending {
            // Reversed, a stable sort puts the last occurrence of a key first in its
            // run, and `dedup_by` keeps the first of each run.
            entries.reverse();
            entries.sort_by(|a, b| cmp_key(a.0.as_bytes(), b.0.as_bytes()));
            entries.dedup_by(|later, earlier| later.0 == earlier.0);
        }
        ExtFields { entries, source }
    }
}

impl ExtFields {
    /// The values of the keys that `slot_of` maps to a slot, in one pass over the
    /// entries: a typed header reads all its fields this way instead of searching the
    /// map once per field. Slots `>= N` are ignored.
    #[doc(hidden)]
    #[inline]
    pub fn lookup_slots<const N: usize>(
        &self,
        slot_of: impl Fn(&str) -> Option<usize>,
    ) -> [Option<&str>; N] {
        let mut slots = [None; N];
        for (key, value) in &self.entries {
            if let Some(slot) = slot_of(key).and_then(|i| slots.get_mut(i)) {
                *slot = Some(value.resolve(&self.source));
            }
        }
        slots
    }
}

/// Equal when they hold the same entries, wherever the values are stored.
impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// `str` ordering, written out because keys are a few bytes long: a byte loop beats
/// the call to `memcmp` the slice comparison makes.
#[inline]
fn cmp_key(a: &[u8], b: &[u8]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// A decoded key, borrowed from the static table when it is a well-known one.
pub(crate) fn decoded_key(key: &str) -> Cow<'static, str> {
    intern(key).map_or_else(|| Cow::Owned(key.to_owned()), Cow::Borrowed)
}

/// The one-letter keys of SEND_MESSAGE_V2, in order.
const LETTER_KEYS: [&str; 14] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
];

/// Keys seen in (almost) every frame of the hot paths.
#[inline]
pub(crate) fn intern(key: &str) -> Option<&'static str> {
    match key.as_bytes() {
        [letter @ b'a'..=b'n'] => LETTER_KEYS.get(usize::from(letter - b'a')).copied(),
        _ => intern_named(key),
    }
}

macro_rules! known_keys {
    ($($k:literal),* $(,)?) => {
        fn intern_named(key: &str) -> Option<&'static str> {
            match key {
                $($k => Some($k),)*
                _ => None,
            }
        }
    };
}

known_keys![
    "bname",
    "producerGroup",
    "consumerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "batch",
    "maxReconsumeTimes",
    "msgId",
    "queueOffset",
    "transactionId",
    "MSG_REGION",
    "TRACE_ON",
    "maxMsgNums",
    "commitOffset",
    "suspendTimeoutMillis",
    "subscription",
    "subVersion",
    "expressionType",
    "suggestWhichBrokerId",
    "nextBeginOffset",
    "minOffset",
    "maxOffset",
    "offset",
    "timestamp",
    "group",
    "delayLevel",
    "originMsgId",
    "originTopic",
    "tranStateTableOffset",
    "commitLogOffset",
    "commitOrRollback",
    "fromTransactionCheck",
    "clientID",
    "AccessKey",
    "Signature",
    "OnsChannel",
    "SecurityToken",
    "brokerName",
    "brokerAddr",
    "clusterName",
    "haServerAddr",
    "brokerId",
    "compressed",
    // Top-level properties of a JSON header.
    "code",
    "extFields",
    "language",
    "opaque",
    "remark",
    "serializeTypeCurrentRPC",
    "version",
];

impl<K, V> FromIterator<(K, V)> for ExtFields
where
    K: AsRef<str> + Into<String>,
    V: AsRef<str> + Into<String>,
{
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self::from_entries(
            iter.into_iter()
                .map(|(k, v)| {
                    let k = intern(k.as_ref()).map_or_else(|| Cow::Owned(k.into()), Cow::Borrowed);
                    (k, Value::from(v.into()))
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn last_duplicate_wins_and_order_is_by_key() {
        let f: ExtFields = [
            ("b", "1"),
            ("zz", "2"),
            ("b", "3"),
            ("custom", "4"),
            ("zz", "5"),
        ]
        .into_iter()
        .collect();
        assert_eq!(f.sorted(), [("b", "3"), ("custom", "4"), ("zz", "5")]);
        let mut g = ExtFields::new();
        g.insert("zz", "5");
        g.insert_static("b", "3");
        g.insert(String::from("custom"), "4");
        assert_eq!(f, g);
        g.insert("b", "6");
        assert_eq!(g.get("b"), Some("6"));
        assert_eq!(g.remove("custom").as_deref(), Some("4"));
        assert!(!g.contains_key("custom") && g.len() == 2);
    }

    proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec(("[a-e]{1,2}", "[0-9]{0,2}", any::<bool>()), 0..40)) {
            let mut model = std::collections::HashMap::new();
            let mut f = ExtFields::new();
            for (k, v, remove) in &ops {
                if *remove {
                    prop_assert_eq!(f.remove(k), model.remove(k));
                } else {
                    f.insert(k.clone(), v.clone());
                    model.insert(k.clone(), v.clone());
                }
            }
            let mut want: Vec<_> = model.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            want.sort();
            prop_assert_eq!(f.sorted(), want);
            let bulk: ExtFields = ops.iter().filter(|o| !o.2).map(|(k, v, _)| (k.clone(), v.clone())).collect();
            for (k, v, _) in ops.iter().filter(|o| !o.2) {
                let last = ops.iter().rev().find(|o| !o.2 && &o.0 == k).map(|o| o.1.as_str());
                prop_assert_eq!(bulk.get(k), last);
                let _ = v;
            }
        }
    }
}
