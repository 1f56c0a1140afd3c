//! brokerName → the highest `masterEpoch` a brokerId-0 registration carried.
//!
//! An entry outlives the group's brokers on purpose: a fenced or partitioned former
//! master that registers again with an older epoch must not take the route back while
//! the group is briefly empty (a failover in progress, a restart). It does not outlive
//! them for ever: once no broker of the name has been registered for
//! `masterEpochRetentionMillis` the entry goes, so names a peer registered once and
//! abandoned do not pile up. A group silent that long has no route to protect, and its
//! next master starts a new term anyway. Entries of names with a registered broker never
//! expire; `maxMasterEpochs` bounds the whole table, and a name that would need a new
//! entry is refused while the table is full of entries that cannot expire yet.
//!
//! Each entry remembers the address that registered it (its holder). When registrations
//! are not authenticated (no ACL, no `adminSecret`), an epoch fences only while its
//! holder is live: otherwise one anonymous registration with `masterEpoch=i32::MAX`
//! would keep the real master out for the whole retention.

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
struct Entry {
    epoch: i32,
    /// The broker address whose registration carried `epoch`.
    holder: String,
    /// When the last broker of the name went; `None` while one is registered.
    gone_since: Option<Instant>,
}

#[derive(Debug, Default)]
pub(super) struct MasterEpochs {
    entries: HashMap<String, Entry>,
}

impl MasterEpochs {
    /// The name's newest epoch and the address that registered it.
    pub(super) fn highest_with_holder(&self, name: &str) -> Option<(i32, &str)> {
        self.entries.get(name).map(|e| (e.epoch, e.holder.as_str()))
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Records `epoch`, registered by `holder`, as the name's newest; the name has a
    /// registered broker.
    pub(super) fn record(&mut self, name: &str, epoch: i32, holder: &str) {
        self.entries.insert(
            name.to_owned(),
            Entry {
                epoch,
                holder: holder.to_owned(),
                gone_since: None,
            },
        );
    }

    /// A broker of `name` registered: its entry, if any, stops ageing.
    pub(super) fn name_registered(&mut self, name: &str) {
        if let Some(e) = self.entries.get_mut(name) {
            e.gone_since = None;
        }
    }

    /// The last broker of `name` went at `now`: its entry starts ageing.
    pub(super) fn name_gone(&mut self, name: &str, now: Instant) {
        if let Some(e) = self.entries.get_mut(name) {
            e.gone_since.get_or_insert(now);
        }
    }

    /// Drops the entries whose name has had no broker for longer than `retention`;
    /// returns how many went.
    pub(super) fn purge(&mut self, now: Instant, retention: Duration) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, e| {
            e.gone_since
                .is_none_or(|gone| now.saturating_duration_since(gone) <= retention)
        });
        before - self.entries.len()
    }
}
