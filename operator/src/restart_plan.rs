//! Operator-driven rolling restart of one broker group (its StatefulSet uses `OnDelete`).
//!
//! A pod is outdated when its `controller-revision-hash` differs from the StatefulSet's
//! `updateRevision` (the template changed: config hash, image, resources, restart
//! annotation). One pod at a time, only while the rest of the group is ready; slaves
//! before the master, so the master restarts once, last, with its slaves in sync. A
//! master with slaves is not restarted directly: it first hands over to an in-sync slave
//! (a switchover through the failover machine) and is restarted as a slave afterwards.

/// What the reconciler observed about one pod of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub name: String,
    pub ordinal: i32,
    pub ready: bool,
    pub revision: Option<String>,
    pub terminating: bool,
    /// In the master's in-sync set (`Some(true)` for the master itself); `None` when
    /// the master does not report replication.
    pub in_sync: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartStep {
    /// Every pod runs the current revision.
    UpToDate,
    /// Something is in flight (a pod starting or terminating); try again later.
    Wait { reason: String },
    /// Delete this pod; the StatefulSet recreates it from the current template.
    Restart { pod: String, reason: String },
    /// The outdated master is next: switch over to an in-sync slave first. If no slave
    /// can take over, the caller restarts `master` in place.
    Switchover { master: String },
}

/// The next step for a group with `replicas` pods whose master has `master_ordinal`.
pub fn next_step(
    pods: &[PodView],
    replicas: i32,
    update_revision: Option<&str>,
    master_ordinal: i32,
) -> RestartStep {
    let Some(update_revision) = update_revision else {
        return RestartStep::Wait {
            reason: "StatefulSet has no updateRevision yet".to_owned(),
        };
    };
    if let Some(p) = pods.iter().find(|p| p.terminating) {
        return RestartStep::Wait {
            reason: format!("pod {} is terminating", p.name),
        };
    }
    let outdated = |p: &&PodView| p.revision.as_deref().is_some_and(|r| r != update_revision);

    // An outdated pod that is not ready serves nothing; restarting it first is safe and is
    // often the fix (e.g. it crash-loops on the old configuration).
    if let Some(p) = pods.iter().filter(outdated).find(|p| !p.ready) {
        return RestartStep::Restart {
            pod: p.name.clone(),
            reason: "outdated and not ready".to_owned(),
        };
    }
    let present = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    if present < replicas {
        return RestartStep::Wait {
            reason: format!("{present} of {replicas} pods exist"),
        };
    }
    if let Some(p) = pods.iter().find(|p| !p.ready) {
        return RestartStep::Wait {
            reason: format!("pod {} is not ready", p.name),
        };
    }
    // Readiness means "store recovered", not "caught up": a slave that just restarted
    // must be back in sync before the next pod (or the master) goes.
    if let Some(p) = pods.iter().find(|p| p.in_sync == Some(false)) {
        return RestartStep::Wait {
            reason: format!("pod {} is not in sync with its master yet", p.name),
        };
    }
    let mut candidates: Vec<&PodView> = pods.iter().filter(outdated).collect();
    // Slaves first, highest ordinal first; the master sorts last.
    candidates.sort_by_key(|p| (p.ordinal == master_ordinal, std::cmp::Reverse(p.ordinal)));
    match candidates.first() {
        None => RestartStep::UpToDate,
        Some(p) if p.ordinal == master_ordinal && pods.len() > 1 => RestartStep::Switchover {
            master: p.name.clone(),
        },
        Some(p) => RestartStep::Restart {
            pod: p.name.clone(),
            reason: if p.ordinal == master_ordinal {
                "master restarted last, after its slaves".to_owned()
            } else {
                "slave runs an outdated configuration".to_owned()
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ordinal: i32, ready: bool, rev: &str) -> PodView {
        PodView {
            name: format!("b-0-{ordinal}"),
            ordinal,
            ready,
            revision: Some(rev.to_owned()),
            terminating: false,
            in_sync: None,
        }
    }

    #[test]
    fn waits_for_a_restarted_slave_to_catch_up_before_the_next_step() {
        let mut pods = vec![
            pod(0, true, "old"),
            pod(1, true, "new"),
            pod(2, true, "old"),
        ];
        pods[0].in_sync = Some(true);
        pods[1].in_sync = Some(false);
        pods[2].in_sync = Some(true);
        assert!(matches!(
            next_step(&pods, 3, Some("new"), 0),
            RestartStep::Wait { reason } if reason.contains("b-0-1")
        ));
        pods[1].in_sync = Some(true);
        assert!(matches!(
            next_step(&pods, 3, Some("new"), 0),
            RestartStep::Restart { pod, .. } if pod == "b-0-2"
        ));
    }

    #[test]
    fn restarts_slaves_highest_first_then_master() {
        let mut pods = vec![
            pod(0, true, "old"),
            pod(1, true, "old"),
            pod(2, true, "old"),
        ];
        let mut order = Vec::new();
        let mut master = 0;
        loop {
            match next_step(&pods, 3, Some("new"), master) {
                RestartStep::Restart { pod: name, .. } => {
                    let p = pods.iter_mut().find(|p| p.name == name).unwrap();
                    p.revision = Some("new".to_owned());
                    order.push(name);
                }
                // The switchover moves the master to a slave that is already updated.
                RestartStep::Switchover { master: m } => {
                    order.push(format!("switchover {m}"));
                    master = 2;
                }
                RestartStep::UpToDate => break,
                RestartStep::Wait { reason } => panic!("unexpected wait: {reason}"),
            }
        }
        assert_eq!(order, ["b-0-2", "b-0-1", "switchover b-0-0", "b-0-0"]);
    }

    #[test]
    fn master_is_last_even_when_it_is_not_ordinal_zero() {
        let pods = vec![
            pod(0, true, "old"),
            pod(1, true, "new"),
            pod(2, true, "old"),
        ];
        assert_eq!(
            next_step(&pods, 3, Some("new"), 2),
            RestartStep::Restart {
                pod: "b-0-0".to_owned(),
                reason: "slave runs an outdated configuration".to_owned()
            }
        );
    }

    #[test]
    fn waits_while_an_updated_pod_is_starting_or_one_is_missing() {
        let pods = vec![pod(0, true, "old"), pod(1, false, "new")];
        assert!(matches!(
            next_step(&pods, 2, Some("new"), 0),
            RestartStep::Wait { .. }
        ));
        let pods = vec![pod(0, true, "old")];
        assert!(matches!(
            next_step(&pods, 2, Some("new"), 0),
            RestartStep::Wait { .. }
        ));
    }

    #[test]
    fn a_lone_master_restarts_in_place() {
        let pods = vec![pod(0, true, "old")];
        assert!(matches!(
            next_step(&pods, 1, Some("new"), 0),
            RestartStep::Restart { .. }
        ));
    }

    #[test]
    fn an_unready_outdated_pod_goes_first() {
        let pods = vec![pod(0, false, "old"), pod(1, true, "old")];
        assert_eq!(
            next_step(&pods, 2, Some("new"), 0),
            RestartStep::Restart {
                pod: "b-0-0".to_owned(),
                reason: "outdated and not ready".to_owned()
            }
        );
    }

    #[test]
    fn up_to_date_group_needs_nothing() {
        let pods = vec![pod(0, true, "new"), pod(1, true, "new")];
        assert_eq!(next_step(&pods, 2, Some("new"), 0), RestartStep::UpToDate);
    }
}
