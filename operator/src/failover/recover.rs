//! Who is master, according to the brokers. `status.groups[]` is a cache of the failover
//! machine's state; the members' own roles and epochs (GET_BROKER_HA_STATUS) are the truth.
//! When the two disagree at rest, or status is gone, the brokers win.

use std::collections::BTreeMap;

use crate::admin::HaStatus;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The record agrees with the brokers, or nothing better is known.
    Keep,
    /// One member claims mastership at the highest epoch any member reports, and the
    /// record says otherwise (or there is none): that member is the master.
    Adopt { master: String, epoch: i64 },
    /// No record, the members hold data and none claims mastership: nobody may start as
    /// master until every member reports its epoch.
    Wait { reason: String },
    /// No record and no master: promote the member with the newest data at `epoch`.
    Promote { pod: String, epoch: i64 },
}

/// The master of a group, from the record (`(masterPod, epoch)` when status has one),
/// the members' HA answers, and whether the members hold data (retained PVCs).
pub fn derive(
    recorded: Option<(&str, i64)>,
    members: &[String],
    ha: &BTreeMap<String, HaStatus>,
    has_data: bool,
) -> Verdict {
    let answering: Vec<(&String, &HaStatus)> = members
        .iter()
        .filter_map(|p| Some((p, ha.get(p)?)))
        .collect();
    let top = answering.iter().map(|(_, h)| h.epoch).max().unwrap_or(0);
    let masters: Vec<&String> = answering
        .iter()
        .filter(|(_, h)| h.master && h.epoch == top)
        .map(|(p, _)| *p)
        .collect();
    if let [master] = masters.as_slice() {
        return match recorded {
            Some((pod, epoch)) if pod == master.as_str() && epoch == top => Verdict::Keep,
            // A record newer than every broker is a failover the brokers have not seen
            // yet (fenced members restarting); the machine finishes it.
            Some((_, epoch)) if epoch > top => Verdict::Keep,
            _ => Verdict::Adopt {
                master: (*master).clone(),
                epoch: top,
            },
        };
    }
    if recorded.is_some() || !has_data || masters.len() > 1 {
        return Verdict::Keep;
    }
    if answering.len() < members.len() {
        let missing: Vec<&str> = members
            .iter()
            .filter(|p| !ha.contains_key(*p))
            .map(String::as_str)
            .collect();
        return Verdict::Wait {
            reason: format!(
                "status lost: waiting for {} to report their epochs before choosing a master",
                missing.join(", ")
            ),
        };
    }
    let newest = answering
        .iter()
        .max_by_key(|(p, h)| (h.epoch, h.max_offset, std::cmp::Reverse((*p).clone())))
        .map(|(p, _)| (*p).clone());
    match newest {
        Some(pod) => Verdict::Promote {
            pod,
            epoch: top + 1,
        },
        None => Verdict::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::ha::HaRole;

    fn ha(master: bool, epoch: i64, max_offset: i64) -> HaStatus {
        HaStatus {
            master,
            role: if master {
                HaRole::SyncMaster
            } else {
                HaRole::Slave
            },
            epoch,
            broker_id: 0,
            master_commit_log_max_offset: 0,
            max_offset,
            confirm_offset: 0,
            in_sync_slave_nums: 0,
            ha_connection_info: Vec::new(),
            ha_client_runtime_info: None,
        }
    }

    fn members() -> Vec<String> {
        vec!["c-0-0".to_owned(), "c-0-1".to_owned()]
    }

    #[test]
    fn the_broker_at_the_highest_epoch_wins_over_a_stale_record() {
        let live = BTreeMap::from([
            ("c-0-0".to_owned(), ha(false, 3, 100)),
            ("c-0-1".to_owned(), ha(true, 3, 100)),
        ]);
        assert_eq!(
            derive(Some(("c-0-0", 2)), &members(), &live, true),
            Verdict::Adopt {
                master: "c-0-1".to_owned(),
                epoch: 3
            }
        );
        assert_eq!(
            derive(Some(("c-0-1", 3)), &members(), &live, true),
            Verdict::Keep
        );
        // No record at all: adopted too.
        assert!(matches!(
            derive(None, &members(), &live, true),
            Verdict::Adopt { .. }
        ));
    }

    #[test]
    fn a_stale_master_below_the_top_epoch_is_not_adopted() {
        let live = BTreeMap::from([
            ("c-0-0".to_owned(), ha(true, 1, 100)),
            ("c-0-1".to_owned(), ha(false, 2, 90)),
        ]);
        assert_eq!(
            derive(Some(("c-0-1", 2)), &members(), &live, true),
            Verdict::Keep
        );
        // Without a record: nobody is master at the top epoch, so the newest data wins.
        assert_eq!(
            derive(None, &members(), &live, true),
            Verdict::Promote {
                pod: "c-0-1".to_owned(),
                epoch: 3
            }
        );
    }

    #[test]
    fn lost_status_waits_for_every_member() {
        let live = BTreeMap::from([("c-0-0".to_owned(), ha(false, 2, 100))]);
        assert!(matches!(
            derive(None, &members(), &live, true),
            Verdict::Wait { .. }
        ));
        // A fresh group (no data) starts with ordinal 0 as usual.
        assert_eq!(derive(None, &members(), &live, false), Verdict::Keep);
    }

    #[test]
    fn two_masters_at_one_epoch_are_left_to_the_machine() {
        let live = BTreeMap::from([
            ("c-0-0".to_owned(), ha(true, 2, 100)),
            ("c-0-1".to_owned(), ha(true, 2, 100)),
        ]);
        assert_eq!(
            derive(Some(("c-0-0", 2)), &members(), &live, true),
            Verdict::Keep
        );
    }
}
