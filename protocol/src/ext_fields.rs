//! A command's `extFields`: the string map every typed header is carried in.

use std::collections::HashMap;

/// `extFields` of a [`crate::RemotingCommand`]. Keys are unique: when a peer sends a key
/// twice (ACL copies header fields into extFields before signing, so the binary header
/// can hold duplicates) the last value wins, like Java's `HashMap.put`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtFields(HashMap<String, String>);

impl ExtFields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Self(HashMap::with_capacity(n))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.0.insert(key.into(), value.into());
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.0.remove(key)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Entries sorted by key: the order fastjson writes them in, and a stable order for
    /// golden fixtures.
    pub fn sorted(&self) -> Vec<(&str, &str)> {
        let mut v: Vec<_> = self.iter().collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}
