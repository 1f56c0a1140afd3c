//! Live figures in Broker status. Offsets and lag change with every message, so writing
//! them whenever they differ made each reconcile's status write schedule the next one.
//! Status keeps them as a cache for humans and for the failover's "last known master
//! offset"; they are written when something meaningful changed (roles, readiness, in-sync
//! flags, conditions, a lag crossing `maxLagBytes`) and otherwise at most every
//! [`LIVE_STATUS_INTERVAL`]. Metrics carry the live values.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::crd::{BrokerStatus, GroupStatus, MemberStatus};

/// Shortest interval between two status writes that only move live figures.
pub const LIVE_STATUS_INTERVAL: Duration = Duration::from_secs(30);

/// dispatchBehindBytes below this counts as caught up.
const DISPATCH_THRESHOLD: i64 = 1 << 20;

#[derive(Default)]
struct Entry {
    /// The last status computed (live figures included), written or not.
    computed: Option<BrokerStatus>,
    written_at: Option<Instant>,
}

/// Per Broker (`namespace/name`): the freshest status this process computed and when it
/// last wrote one.
#[derive(Default)]
pub struct LiveStatus {
    entries: Mutex<HashMap<String, Entry>>,
}

impl LiveStatus {
    /// `stored` with the fresher live figures this process saw for the same masters.
    pub fn overlay(&self, key: &str, mut stored: BrokerStatus) -> BrokerStatus {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some(computed) = entries.get(key).and_then(|e| e.computed.as_ref()) else {
            return stored;
        };
        for g in &mut stored.groups {
            let Some(c) = computed
                .groups
                .iter()
                .find(|c| c.broker_name == g.broker_name && c.master_pod == g.master_pod)
            else {
                continue;
            };
            g.master_max_offset = g.master_max_offset.max(c.master_max_offset);
            g.confirm_offset = g.confirm_offset.max(c.confirm_offset);
        }
        stored
    }

    pub fn remember(&self, key: &str, status: &BrokerStatus) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.to_owned())
            .or_default()
            .computed = Some(status.clone());
    }

    pub fn written(&self, key: &str) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.to_owned())
            .or_default()
            .written_at = Some(Instant::now());
    }

    fn since_written(&self, key: &str) -> Option<Duration> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)?
            .written_at
            .map(|t| t.elapsed())
    }

    /// Forgets a deleted Broker.
    pub fn forget(&self, key: &str) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

fn bucket(bytes: Option<i64>, threshold: i64) -> u8 {
    match bytes {
        None => 0,
        Some(b) if b <= 0 => 1,
        Some(b) if b <= threshold => 2,
        Some(_) => 3,
    }
}

/// The status without its live figures; lag and dispatch-behind reduced to which side of
/// their thresholds they are on.
pub fn significant(status: &BrokerStatus, max_lag_bytes: i64) -> BrokerStatus {
    let mut s = status.clone();
    for g in &mut s.groups {
        *g = GroupStatus {
            master_max_offset: None,
            confirm_offset: None,
            members: g
                .members
                .iter()
                .map(|m| MemberStatus {
                    replication_lag_bytes: Some(i64::from(bucket(
                        m.replication_lag_bytes,
                        max_lag_bytes,
                    ))),
                    dispatch_behind_bytes: Some(i64::from(bucket(
                        m.dispatch_behind_bytes,
                        DISPATCH_THRESHOLD,
                    ))),
                    ..m.clone()
                })
                .collect(),
            ..g.clone()
        };
    }
    s
}

/// Whether `status` must be written over `stored` now.
pub fn write_due(
    live: &LiveStatus,
    key: &str,
    stored: &BrokerStatus,
    status: &BrokerStatus,
    max_lag_bytes: i64,
) -> bool {
    if status == stored {
        return false;
    }
    if significant(status, max_lag_bytes) != significant(stored, max_lag_bytes) {
        return true;
    }
    live.since_written(key)
        .is_none_or(|d| d >= LIVE_STATUS_INTERVAL)
        && live_moved(stored, status)
}

/// Live figures that moved enough to be worth a write: a master offset first seen, or
/// lag appearing/disappearing (the buckets above catch threshold crossings).
fn live_moved(stored: &BrokerStatus, status: &BrokerStatus) -> bool {
    status.groups.iter().zip(&stored.groups).any(|(a, b)| {
        a.master_max_offset.is_some() != b.master_max_offset.is_some()
            || a.members.iter().zip(&b.members).any(|(x, y)| {
                x.replication_lag_bytes.is_some() != y.replication_lag_bytes.is_some()
            })
    }) || status.groups.len() != stored.groups.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(master_offset: i64, lag: i64) -> BrokerStatus {
        BrokerStatus {
            groups: vec![GroupStatus {
                broker_name: "c-0".to_owned(),
                master_pod: Some("c-0-0".to_owned()),
                master_max_offset: Some(master_offset),
                members: vec![MemberStatus {
                    pod: "c-0-1".to_owned(),
                    replication_lag_bytes: Some(lag),
                    dispatch_behind_bytes: Some(0),
                    ..MemberStatus::default()
                }],
                ..GroupStatus::default()
            }],
            ..BrokerStatus::default()
        }
    }

    #[test]
    fn moving_offsets_alone_are_not_written() {
        let live = LiveStatus::default();
        live.written("k");
        assert!(!write_due(
            &live,
            "k",
            &status(100, 10),
            &status(5000, 20),
            1000
        ));
    }

    #[test]
    fn crossing_max_lag_is_written() {
        let live = LiveStatus::default();
        live.written("k");
        assert!(write_due(
            &live,
            "k",
            &status(100, 10),
            &status(5000, 2000),
            1000
        ));
    }

    #[test]
    fn the_overlay_keeps_the_freshest_master_offset() {
        let live = LiveStatus::default();
        live.remember("k", &status(5000, 0));
        let merged = live.overlay("k", status(100, 0));
        assert_eq!(merged.groups[0].master_max_offset, Some(5000));
        assert_eq!(
            live.overlay("other", status(100, 0)).groups[0].master_max_offset,
            Some(100)
        );
    }
}
