//! Compiled SQL92 subscriptions by `(topic, group)` (`ConsumerFilterManager`): heartbeats
//! register them, pulls look them up, so a selector is compiled once per subscription
//! version rather than per pull or per message.
//!
//! The registry is keyed by names a client chose, so it is bounded in bytes
//! (`filterRegistryMaxBytes`, each entry charged its compiled selector's footprint): a
//! subscription that would pass the budget is refused and counted, live entries are
//! never evicted. Entries go with their owners: the heartbeat path drops a group's
//! entries for topics its subscriptions no longer name, and the group's entries when its
//! last member leaves.
//!
//! Differences from 4.9: entries live in memory only (4.9 persists `consumerFilter.json`
//! for its bloom bitmap, which this broker does not build; after a restart the consumers'
//! next heartbeat registers them again, and no pull is served before that heartbeat
//! because the group is unknown until then).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use protocol::body::SubscriptionData;

use super::sql92::{CompileError, Sql92Filter, Sql92Limits};
use super::{EXPRESSION_SQL92, FilterError};
use crate::metrics::limits::Refusals;

/// Distinct selector texts kept by [`FilterRegistry::compile_cached`] (4.9 keeps 100).
const COMPILE_CACHE_MAX: usize = 256;

#[derive(Debug, Clone)]
pub struct FilterEntry {
    /// The subscription version the entry was built from (`clientVersion`).
    pub client_version: i64,
    pub filter: Arc<Sql92Filter>,
}

/// A selector's compile outcome, cached so a bad expression is parsed once.
type CompiledSelector = Result<Arc<Sql92Filter>, CompileError>;

#[derive(Default)]
struct Entries {
    map: HashMap<(String, String), FilterEntry>,
    /// Sum of the entries' footprints.
    bytes: usize,
}

#[derive(Default)]
struct Cache {
    map: HashMap<Box<str>, CompiledSelector>,
    bytes: usize,
}

#[derive(Default)]
pub struct FilterRegistry {
    entries: RwLock<Entries>,
    /// Selectors sent with each pull (pull and lite-pull consumers), by text.
    cache: Mutex<Cache>,
    /// The budget every selector is compiled within, whichever request carried it.
    limits: Sql92Limits,
    /// `filterRegistryMaxBytes`: what the registered entries may hold in all. The
    /// pull-selector cache, which may evict, holds at most an eighth of it more.
    max_bytes: usize,
    refusals: Refusals,
}

/// Bytes a cached compile outcome is charged: its text, plus the selector.
fn cache_cost(text: &str, outcome: &CompiledSelector) -> usize {
    text.len() + outcome.as_ref().map_or(64, |f| f.footprint())
}

impl std::fmt::Debug for FilterRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterRegistry")
            .field("entries", &self.entries.read().map.len())
            .finish()
    }
}

/// Whether a subscription is a TAG one (`ExpressionType.isTagType`: null, empty or TAG).
pub fn is_tag_type(expression_type: Option<&str>) -> bool {
    expression_type.is_none_or(|t| t.is_empty() || t.eq_ignore_ascii_case(super::EXPRESSION_TAG))
}

impl FilterRegistry {
    pub fn new(limits: Sql92Limits, max_bytes: usize, refusals: Refusals) -> Self {
        Self {
            limits,
            max_bytes,
            refusals,
            ..Self::default()
        }
    }

    /// The budget selectors are compiled within.
    pub fn limits(&self) -> &Sql92Limits {
        &self.limits
    }

    /// `FilterFactory.get(type).compile` within the configured budget: only `SQL92`
    /// (exact case, as 4.9 registers it). A selector over budget is counted by the limit
    /// it exceeded.
    pub fn compile(&self, expression_type: &str, text: &str) -> Result<Sql92Filter, FilterError> {
        if expression_type != EXPRESSION_SQL92 {
            return Err(FilterError::Unsupported(expression_type.to_owned()));
        }
        self.compile_sql(text).map_err(FilterError::Compile)
    }

    fn compile_sql(&self, text: &str) -> Result<Sql92Filter, CompileError> {
        Sql92Filter::compile_within(text, &self.limits).inspect_err(|e| {
            if let Some(b) = e.budget {
                self.refusals.count(b.key());
            }
        })
    }

    /// `ConsumerFilterManager.register` for one subscription of `group`. TAG subscriptions
    /// and empty expressions are not registered. A version not newer than the registered
    /// one is ignored, as in 4.9; a newer one with a new expression is recompiled, and a
    /// compile failure removes the entry so that pulls answer FILTER_DATA_NOT_EXIST.
    pub fn register(&self, group: &str, sub: &SubscriptionData) -> Result<(), FilterError> {
        if is_tag_type(Some(&sub.expression_type)) || sub.sub_string.trim().is_empty() {
            return Ok(());
        }
        let key = (sub.topic.clone(), group.to_owned());
        // (registered version, same selector) under the read lock only.
        let registered = self.entries.read().map.get(&key).map(|e| {
            (
                e.client_version,
                e.filter.source() == sub.sub_string && sub.expression_type == EXPRESSION_SQL92,
            )
        });
        match registered {
            Some((version, _)) if sub.sub_version <= version => return Ok(()),
            Some((_, true)) => {
                if let Some(e) = self.entries.write().map.get_mut(&key) {
                    e.client_version = sub.sub_version;
                }
                return Ok(());
            }
            _ => {}
        }
        let filter = match self.compile(&sub.expression_type, &sub.sub_string) {
            Ok(filter) => filter,
            Err(e) => {
                self.remove(&key);
                return Err(e);
            }
        };
        let mut entries = self.entries.write();
        let replaced = entries.map.get(&key).map_or(0, |e| e.filter.footprint());
        let bytes = entries.bytes - replaced + filter.footprint();
        if bytes > self.max_bytes {
            let held = entries.bytes;
            drop(entries);
            self.refusals.count(REGISTRY_LIMIT);
            return Err(FilterError::Limit {
                limit: REGISTRY_LIMIT,
                remark: format!(
                    "the broker holds {} bytes of compiled SQL92 subscriptions; this one ({} bytes) would pass {REGISTRY_LIMIT} {}",
                    held,
                    filter.footprint(),
                    self.max_bytes
                ),
            });
        }
        entries.bytes = bytes;
        entries.map.insert(
            key,
            FilterEntry {
                client_version: sub.sub_version,
                filter: Arc::new(filter),
            },
        );
        Ok(())
    }

    fn remove(&self, key: &(String, String)) {
        let mut entries = self.entries.write();
        if let Some(e) = entries.map.remove(key) {
            entries.bytes -= e.filter.footprint();
        }
    }

    /// Drops `group`'s entries for the topics `keep` rejects: subscriptions the group no
    /// longer has (`keep` always false: the group's last member left).
    pub fn retain_group(&self, group: &str, keep: impl Fn(&str) -> bool) {
        let mut entries = self.entries.write();
        let mut freed = 0;
        entries.map.retain(|(topic, g), e| {
            let stays = g != group || keep(topic);
            if !stays {
                freed += e.filter.footprint();
            }
            stays
        });
        entries.bytes -= freed;
    }

    /// Registered entries and the bytes they hold.
    pub fn usage(&self) -> (usize, usize) {
        let entries = self.entries.read();
        (entries.map.len(), entries.bytes)
    }

    pub fn get(&self, topic: &str, group: &str) -> Option<FilterEntry> {
        self.entries
            .read()
            .map
            .get(&(topic.to_owned(), group.to_owned()))
            .cloned()
    }

    /// Compiles a selector sent along with a pull, reusing earlier results for the same
    /// text (failures included). The cache is emptied when it fills.
    pub fn compile_cached(
        &self,
        expression_type: &str,
        text: &str,
    ) -> Result<Arc<Sql92Filter>, FilterError> {
        if expression_type != EXPRESSION_SQL92 {
            return Err(FilterError::Unsupported(expression_type.to_owned()));
        }
        let mut cache = self.cache.lock();
        if let Some(hit) = cache.map.get(text) {
            return hit.clone().map_err(FilterError::Compile);
        }
        let result = self.compile_sql(text).map(Arc::new);
        // A text over the length budget is refused before the lexer runs, so caching it
        // would only pin its bytes.
        if text.len() <= self.limits.max_length {
            let cost = cache_cost(text, &result);
            if cache.map.len() >= COMPILE_CACHE_MAX || cache.bytes + cost > self.max_bytes / 8 {
                *cache = Cache::default();
            }
            cache.bytes += cost;
            cache.map.insert(text.into(), result.clone());
        }
        result.map_err(FilterError::Compile)
    }
}

/// The key of the registry's byte budget.
pub const REGISTRY_LIMIT: &str = "filterRegistryMaxBytes";

/// `FilterFactory.get(type).compile` within `limits`: only `SQL92` (exact case, as 4.9
/// registers it).
pub fn compile(
    expression_type: &str,
    text: &str,
    limits: &Sql92Limits,
) -> Result<Sql92Filter, FilterError> {
    if expression_type != EXPRESSION_SQL92 {
        return Err(FilterError::Unsupported(expression_type.to_owned()));
    }
    Sql92Filter::compile_within(text, limits).map_err(FilterError::Compile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(topic: &str, expr: &str, version: i64) -> SubscriptionData {
        SubscriptionData {
            class_filter_mode: false,
            topic: topic.into(),
            sub_string: expr.into(),
            tags_set: Default::default(),
            code_set: Default::default(),
            sub_version: version,
            expression_type: EXPRESSION_SQL92.into(),
        }
    }

    fn registry() -> FilterRegistry {
        FilterRegistry::new(Sql92Limits::default(), 1 << 20, Refusals::default())
    }

    #[test]
    fn versions_decide_whether_an_entry_is_rebuilt() {
        let r = registry();
        r.register("g", &sub("T", "a > 1", 10)).unwrap();
        assert_eq!(r.get("T", "g").unwrap().filter.source(), "a > 1");
        // Not newer: ignored even though the text differs (4.9).
        r.register("g", &sub("T", "a > 2", 10)).unwrap();
        assert_eq!(r.get("T", "g").unwrap().filter.source(), "a > 1");
        // Newer and different: rebuilt.
        r.register("g", &sub("T", "a > 2", 11)).unwrap();
        let e = r.get("T", "g").unwrap();
        assert_eq!((e.filter.source(), e.client_version), ("a > 2", 11));
        // Newer and broken: removed.
        let err = r.register("g", &sub("T", "a >", 12)).unwrap_err();
        assert!(matches!(err, FilterError::Compile(_)), "{err}");
        assert!(r.get("T", "g").is_none());
        // TAG subscriptions are not registered.
        let mut tag = sub("U", "A || B", 1);
        tag.expression_type = "TAG".into();
        r.register("g", &tag).unwrap();
        assert!(r.get("U", "g").is_none());
        // Unknown types fail.
        let mut other = sub("V", "x", 1);
        other.expression_type = "XPATH".into();
        assert!(r.register("g", &other).is_err());
    }

    #[test]
    fn pull_selectors_are_compiled_once() {
        let r = registry();
        let a = r.compile_cached("SQL92", "a = 1").unwrap();
        let b = r.compile_cached("SQL92", "a = 1").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(r.compile_cached("SQL92", "a =").is_err());
        assert!(r.compile_cached("sql92", "a = 1").is_err());
    }

    #[test]
    fn entries_are_bounded_in_bytes_and_go_with_their_owners() {
        let one = Sql92Filter::compile("a > 1").unwrap().footprint();
        let refusals = Refusals::default();
        let r = FilterRegistry::new(Sql92Limits::default(), 3 * one, refusals.clone());
        for g in ["g1", "g2", "g3"] {
            r.register(g, &sub("T", "a > 1", 1)).unwrap();
        }
        assert_eq!(r.usage(), (3, 3 * one));
        let err = r.register("g4", &sub("T", "a > 1", 1)).unwrap_err();
        assert!(
            matches!(
                err,
                FilterError::Limit {
                    limit: REGISTRY_LIMIT,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(REGISTRY_LIMIT), "{err}");
        assert_eq!(refusals.get(REGISTRY_LIMIT), 1);
        // Live entries were not evicted; replacing one within budget works.
        assert!(r.get("T", "g1").is_some());
        r.register("g1", &sub("T", "a > 2", 2)).unwrap();
        // A group that stops subscribing, or leaves, frees its bytes.
        r.retain_group("g2", |topic| topic != "T");
        r.retain_group("g3", |_| false);
        assert_eq!(r.usage(), (1, one));
        r.register("g4", &sub("T", "a > 1", 1)).unwrap();
        r.register("g5", &sub("T", "a > 1", 1)).unwrap();
    }

    #[test]
    fn the_pull_cache_is_bounded_in_bytes() {
        let r = FilterRegistry::new(Sql92Limits::default(), 1 << 20, Refusals::default());
        let text = |i: usize| format!("a > {i} AND b IN ({}'y')", "'x',".repeat(200));
        let one = cache_cost(
            &text(0),
            &Ok(Arc::new(Sql92Filter::compile(&text(0)).unwrap())),
        );
        for i in 0..200 {
            r.compile_cached("SQL92", &text(i)).unwrap();
            let held = r.cache.lock().bytes;
            assert!(held <= (1 << 20) / 8, "{held} bytes after {i}, {one} each");
        }
    }
}
