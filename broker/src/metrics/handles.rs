//! Metric handles cached by key, so the request path finds a topic's counters or a request
//! code's histogram with one read-locked lookup by `&str` / `i32`, instead of building a
//! label set (allocating its `String`s) and hashing it into a prometheus family on every
//! message. The cached handles share their values with the family, so `/metrics` output
//! is unchanged.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use parking_lot::RwLock;

pub struct HandleCache<K, M> {
    map: RwLock<HashMap<K, M>>,
}

impl<K, M> Default for HandleCache<K, M> {
    fn default() -> Self {
        Self {
            map: RwLock::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq, M> HandleCache<K, M> {
    /// Runs `use_it` on the handle of `key`, made with `make` the first time.
    pub fn with<Q>(&self, key: &Q, make: impl FnOnce() -> M, use_it: impl FnOnce(&M))
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(m) = self.map.read().get(key) {
            use_it(m);
            return;
        }
        let mut map = self.map.write();
        let m = map.entry(key.to_owned()).or_insert_with(make);
        use_it(m);
    }

    /// Forgets `key`'s handle (its series was removed from the family).
    pub fn remove<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.write().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn makes_once_per_key_and_reuses() {
        let cache: HandleCache<String, Cell<u32>> = HandleCache::default();
        let made = Cell::new(0);
        for key in ["a", "b", "a", "a"] {
            cache.with(
                key,
                || {
                    made.set(made.get() + 1);
                    Cell::new(0)
                },
                |c| c.set(c.get() + 1),
            );
        }
        assert_eq!(made.get(), 2);
        cache.with("a", || unreachable!(), |c| assert_eq!(c.get(), 3));
        cache.with("b", || unreachable!(), |c| assert_eq!(c.get(), 1));
    }
}
