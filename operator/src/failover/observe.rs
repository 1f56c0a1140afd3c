//! Observations for the machine from what the reconciler saw (pods, GET_BROKER_HA_STATUS
//! answers, the previous status), pure.

use std::collections::BTreeMap;

use crate::admin::HaStatus;
use crate::crd::{AckMode, FailoverSpec, GroupStatus};

use super::machine::{Ha, Member, Observations, Policy, Request};

/// What the reconciler knows about one member's pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    pub pod: String,
    pub broker_id: i64,
    /// The pod object exists and is not terminating.
    pub exists: bool,
    /// The pod object is being deleted; its process may still run.
    pub terminating: bool,
    pub ready: bool,
    pub unready_since_ms: Option<i64>,
    pub ip: Option<String>,
}

/// Milliseconds of a Go-style duration made of `<n>h`, `<n>m`, `<n>s` parts (the CRD's
/// pattern); `None` for anything else.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let mut total: i64 = 0;
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let n: i64 = digits.parse().ok()?;
        digits.clear();
        let unit = match c {
            'h' => 3_600_000,
            'm' => 60_000,
            's' => 1_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    digits.is_empty().then_some(total)
}

pub fn policy(spec: &FailoverSpec, ack_mode: AckMode) -> Policy {
    Policy {
        async_acks: ack_mode == AckMode::Async,
        mode: spec.policy,
        // An unparsable value cannot pass the CRD's pattern; 30 s is its default.
        unavailable_for_ms: parse_duration_ms(&spec.unavailable_for).unwrap_or(30_000),
        max_lag_bytes: spec.max_lag_bytes.max(0),
        allow_unclean: spec.allow_unclean,
    }
}

/// Whether the master's HA connection list shows `pod` in sync. Connections are keyed
/// by the slave's remote address, matched against the pod IP (or a DNS name starting
/// with the pod name).
fn in_sync_per_master(master: &HaStatus, pod: &PodFacts) -> bool {
    master.ha_connection_info.iter().any(|c| {
        let host = c.addr.rsplit_once(':').map_or(c.addr.as_str(), |(h, _)| h);
        let same = pod.ip.as_deref() == Some(host)
            || host
                .strip_prefix(pod.pod.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
        same && c.in_sync
    })
}

/// In-sync flag per member: from the live master when it answers, else as last recorded.
pub fn in_sync_set(
    master: &str,
    pods: &[PodFacts],
    ha: &BTreeMap<String, HaStatus>,
    previous: Option<&GroupStatus>,
) -> BTreeMap<String, bool> {
    let live = ha.get(master).filter(|h| h.master);
    pods.iter()
        .map(|p| {
            let flag = match live {
                Some(m) => in_sync_per_master(m, p),
                None => previous
                    .and_then(|g| g.members.iter().find(|m| m.pod == p.pod))
                    .and_then(|m| m.in_sync)
                    .unwrap_or(false),
            };
            (p.pod.clone(), flag)
        })
        .collect()
}

/// The master's offset: live, else the larger of the recorded one and what its slaves
/// last saw of it.
pub fn master_offset(
    master: &str,
    ha: &BTreeMap<String, HaStatus>,
    previous: Option<&GroupStatus>,
) -> Option<i64> {
    if let Some(h) = ha.get(master).filter(|h| h.master) {
        return Some(h.max_offset);
    }
    let seen_by_slaves = ha
        .iter()
        .filter(|(pod, h)| pod.as_str() != master && !h.master)
        .map(|(_, h)| h.master_commit_log_max_offset)
        .filter(|o| *o > 0)
        .max();
    previous
        .and_then(|g| g.master_max_offset)
        .max(seen_by_slaves)
}

pub fn observations(
    policy: Policy,
    now_ms: i64,
    master: &str,
    pods: &[PodFacts],
    ha: &BTreeMap<String, HaStatus>,
    previous: Option<&GroupStatus>,
    request: Option<Request>,
) -> Observations {
    let in_sync = in_sync_set(master, pods, ha, previous);
    let members = pods
        .iter()
        .map(|p| Member {
            pod: p.pod.clone(),
            // The id the broker runs with wins over the configured one.
            broker_id: ha.get(&p.pod).map_or(p.broker_id, |h| h.broker_id),
            exists: p.exists,
            terminating: p.terminating,
            ready: p.ready,
            unready_since_ms: p.unready_since_ms,
            ha: ha.get(&p.pod).map(|h| Ha {
                master: h.master,
                epoch: h.epoch,
                max_offset: h.max_offset,
            }),
            in_sync: in_sync.get(&p.pod).copied().unwrap_or(false),
        })
        .collect();
    Observations {
        now_ms,
        policy,
        members,
        request,
        master_offset: master_offset(master, ha, previous),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::ha::{HaConnection, HaRole};
    use crate::crd::MemberStatus;

    fn facts(pod: &str, ip: &str) -> PodFacts {
        PodFacts {
            pod: pod.to_owned(),
            broker_id: 1,
            exists: true,
            terminating: false,
            ready: true,
            unready_since_ms: None,
            ip: Some(ip.to_owned()),
        }
    }

    fn ha(master: bool, max_offset: i64, conns: Vec<HaConnection>) -> HaStatus {
        HaStatus {
            master,
            role: if master {
                HaRole::SyncMaster
            } else {
                HaRole::Slave
            },
            epoch: 1,
            broker_id: 0,
            master_commit_log_max_offset: if master { 0 } else { 900 },
            max_offset,
            confirm_offset: 0,
            in_sync_slave_nums: 0,
            ha_connection_info: conns,
            ha_client_runtime_info: None,
        }
    }

    #[test]
    fn durations_parse_like_the_crd_pattern() {
        assert_eq!(parse_duration_ms("5s"), Some(5_000));
        assert_eq!(parse_duration_ms("1m30s"), Some(90_000));
        assert_eq!(parse_duration_ms("2h"), Some(7_200_000));
        assert_eq!(parse_duration_ms("5"), None);
        assert_eq!(parse_duration_ms("5d"), None);
        assert_eq!(parse_duration_ms("99999999999999999999s"), None);
    }

    #[test]
    fn in_sync_comes_from_the_live_master_then_from_the_record() {
        let pods = [facts("c-0-0", "10.0.0.1"), facts("c-0-1", "10.0.0.2")];
        let conn = HaConnection {
            addr: "10.0.0.2:41234".to_owned(),
            slave_ack_offset: 1000,
            diff: 0,
            in_sync: true,
        };
        let live = BTreeMap::from([
            ("c-0-0".to_owned(), ha(true, 1000, vec![conn])),
            ("c-0-1".to_owned(), ha(false, 1000, vec![])),
        ]);
        let set = in_sync_set("c-0-0", &pods, &live, None);
        assert!(set["c-0-1"]);
        assert_eq!(master_offset("c-0-0", &live, None), Some(1000));

        // Master gone: the recorded flag and the larger of recorded/seen offsets.
        let dead = BTreeMap::from([("c-0-1".to_owned(), ha(false, 990, vec![]))]);
        let previous = GroupStatus {
            master_max_offset: Some(800),
            members: vec![MemberStatus {
                pod: "c-0-1".to_owned(),
                in_sync: Some(true),
                ..MemberStatus::default()
            }],
            ..GroupStatus::default()
        };
        let set = in_sync_set("c-0-0", &pods, &dead, Some(&previous));
        assert_eq!((set["c-0-0"], set["c-0-1"]), (false, true));
        assert_eq!(master_offset("c-0-0", &dead, Some(&previous)), Some(900));
    }
}
