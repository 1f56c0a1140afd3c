//! Failover scenarios: the machine and the executor against the simulated group.

use futures::executor::block_on;

use super::executor::{Recorder, execute};
use super::machine::{Action, BlockedReason, Phase, Policy, State, step};
use super::sim::{Sim, policy, switchover};
use crate::crd::{FailoverPolicy, FailoverTrigger};
use crate::metrics::{GroupLabels, Metrics};

pub fn labels() -> GroupLabels {
    GroupLabels {
        resource_namespace: "ns".to_owned(),
        broker: "c".to_owned(),
        broker_name: "c-0".to_owned(),
    }
}

/// Steps until the phase stops changing (at most `max` steps); returns every action.
pub fn drive(sim: &Sim, state: &mut State, policy: Policy, metrics: &Metrics) -> Vec<Action> {
    let mut all = Vec::new();
    for _ in 0..12 {
        let obs = sim.observations(policy, &state.master);
        let (next, actions) = step(state, &obs);
        let recorder = Recorder {
            metrics,
            group: labels(),
        };
        block_on(execute(&actions, sim, sim, &recorder)).expect("actions apply");
        sim.render_configs(&next);
        let moved = next.phase != state.phase || actions.iter().any(Action::acts);
        *state = next;
        all.extend(actions);
        if !moved {
            break;
        }
    }
    all
}

/// Observes the master gone, lets `unavailableFor` pass and steps on; returns the actions
/// of the steps after the wait.
fn past_unavailable_for(
    sim: &Sim,
    state: &mut State,
    policy: Policy,
    metrics: &Metrics,
) -> Vec<Action> {
    drive(sim, state, policy, metrics);
    sim.advance(10_000);
    drive(sim, state, policy, metrics)
}

fn reasons(actions: &[Action]) -> Vec<&'static str> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn no_violations(sim: &Sim) {
    let w = sim.world();
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn automatic_failover_waits_unavailable_for_then_promotes_the_best_in_sync_slave() {
    let sim = Sim::group(3, 1000);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Automatic, false);
    let mut state = State::idle("g-0", 1);
    sim.world().brokers[2].max_offset = 990;
    sim.kill(0);

    let actions = drive(&sim, &mut state, p, &metrics);
    assert_eq!(state.phase, Phase::Detected);
    assert_eq!(reasons(&actions), ["MasterUnavailable"]);
    sim.advance(4_999);
    assert!(drive(&sim, &mut state, p, &metrics).is_empty());

    sim.advance(1);
    let actions = drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        reasons(&actions),
        [
            "FailoverFencing",
            "FailoverElecting",
            "FailoverPromoting",
            "FailoverRepointing",
            "FailoverCompleted"
        ]
    );
    assert_eq!(state.phase, Phase::Completed);
    assert_eq!((state.master.as_str(), state.epoch), ("g-1", 2));
    assert_eq!(state.fenced, ["g-0"]);
    let w = sim.world();
    assert_eq!(w.labelled_master.as_deref(), Some("g-1"));
    assert_eq!(w.promotions, [("g-1".to_owned(), 2)]);
    // The dead master's pod was deleted (it did not answer), the other slave follows.
    assert_eq!(w.deleted, ["g-0"]);
    assert!(!w.brokers[2].master && w.brokers[2].epoch == 2);
    drop(w);
    no_violations(&sim);
    let text = metrics.encode();
    assert!(text.contains(r#"outcome="clean"} 1"#), "{text}");
}

#[test]
fn a_partitioned_master_is_fenced_by_deleting_its_pod_before_anyone_is_promoted() {
    let sim = Sim::group(2, 500);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Automatic, false);
    let mut state = State::idle("g-0", 1);
    sim.partition(0);
    drive(&sim, &mut state, p, &metrics);
    sim.advance(10_000);
    let actions = drive(&sim, &mut state, p, &metrics);
    let delete = actions
        .iter()
        .position(|a| matches!(a, Action::DeletePod { pod } if pod == "g-0"));
    let promote = actions
        .iter()
        .position(|a| matches!(a, Action::Promote { pod, .. } if pod == "g-1"));
    assert!(delete.unwrap() < promote.unwrap());
    no_violations(&sim);
}

#[test]
fn manual_policy_waits_for_a_request_naming_the_target() {
    let sim = Sim::group(3, 1000);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Manual, false);
    let mut state = State::idle("g-0", 1);
    sim.kill(0);
    for _ in 0..5 {
        sim.advance(60_000);
        let actions = drive(&sim, &mut state, p, &metrics);
        assert!(
            actions
                .iter()
                .all(|a| matches!(a, Action::Event { .. } | Action::Finished { .. })),
            "{actions:?}"
        );
    }
    assert_eq!(state.phase, Phase::Detected);
    sim.world().request = Some(switchover(Some("g-2")));
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        (state.phase, state.master.as_str()),
        (Phase::Completed, "g-2")
    );
    assert!(sim.world().request.is_none(), "request removed when done");
    no_violations(&sim);
}

/// A group of two whose master g-0 holds 1000 bytes, a manual switchover to g-1 (holding
/// `target_offset`) requested and driven as far as it goes.
fn switchover_started(target_offset: i64) -> (Sim, Metrics, Policy, State) {
    let sim = Sim::group(2, 1000);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Manual, false);
    let mut state = State::idle("g-0", 1);
    sim.world().brokers[1].max_offset = target_offset;
    sim.world().request = Some(switchover(Some("g-1")));
    drive(&sim, &mut state, p, &metrics);
    (sim, metrics, p, state)
}

#[test]
fn planned_switchover_demotes_first_waits_for_catch_up_and_keeps_the_old_master_as_slave() {
    let (sim, metrics, p, mut state) = switchover_started(900);
    // Fenced by role change (it answers), not deleted; the target is 100 bytes behind.
    assert_eq!(state.phase, Phase::Electing);
    {
        let w = sim.world();
        assert!(!w.brokers[0].master && w.brokers[0].alive && w.deleted.is_empty());
    }
    sim.world().brokers[1].max_offset = 1000;
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        (state.phase, state.master.as_str()),
        (Phase::Completed, "g-1")
    );
    assert_eq!(state.bytes_lost, None);
    let w = sim.world();
    assert!(w.brokers[1].master && !w.brokers[0].master);
    assert_eq!(w.brokers[0].epoch, 2, "old master follows at the new epoch");
    drop(w);
    no_violations(&sim);
}

#[test]
fn a_switchover_target_that_never_catches_up_hands_back_to_the_old_master() {
    let (sim, metrics, p, mut state) = switchover_started(999);
    sim.advance(30_000);
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        (state.phase, state.master.as_str()),
        (Phase::Completed, "g-0")
    );
    assert_eq!(state.epoch, 2);
    assert!(metrics.encode().contains(r#"outcome="reverted"} 1"#));
    no_violations(&sim);
}

#[test]
fn a_switchover_target_missing_one_observation_is_waited_for_not_reverted() {
    let (sim, metrics, p, mut state) = switchover_started(900);
    assert_eq!(state.phase, Phase::Electing);
    // One admin answer from the target is lost: still electing, the old master not back.
    sim.world().brokers[1].reachable = false;
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        (state.phase, state.master.as_str()),
        (Phase::Electing, "g-0")
    );
    // It answers again, caught up: the switchover completes.
    {
        let mut w = sim.world();
        w.brokers[1].reachable = true;
        w.brokers[1].max_offset = 1000;
    }
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        (state.phase, state.master.as_str()),
        (Phase::Completed, "g-1")
    );
    no_violations(&sim);
}

#[test]
fn no_eligible_replica_blocks_until_the_old_master_returns() {
    let sim = Sim::group(2, 5000);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Automatic, false);
    let mut state = State::idle("g-0", 1);
    sim.world().brokers[1].max_offset = 1000;
    sim.world().brokers[1].in_sync = false;
    sim.kill(0);
    drive(&sim, &mut state, p, &metrics);
    sim.advance(5_000);
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        state.phase,
        Phase::Blocked(BlockedReason::NoEligibleReplica)
    );
    assert!(sim.world().promotions.is_empty());
    // The old master restarts (as a fenced slave) with everything it had.
    sim.revive(0);
    assert!(!sim.world().brokers[0].master);
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        (state.phase, state.master.as_str()),
        (Phase::Completed, "g-0")
    );
    assert!(
        state.epoch >= 3,
        "re-fenced at a new epoch: {}",
        state.epoch
    );
    no_violations(&sim);
}

#[test]
fn allow_unclean_promotes_a_lagging_replica_and_records_the_loss() {
    let sim = Sim::group(2, 5000);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Automatic, true);
    sim.world().brokers[1].max_offset = 3000;
    sim.world().brokers[1].in_sync = false;
    sim.kill(0);
    // The master's offset is known from the status recorded before it died.
    let observe = |sim: &Sim| {
        let mut o = sim.observations(p, "g-0");
        o.master_offset = Some(5000);
        o
    };
    let recorder = Recorder {
        metrics: &metrics,
        group: labels(),
    };
    let mut state = State::idle("g-0", 1);
    let mut last = Vec::new();
    for advance in [0, 5_000, 0, 0, 0] {
        sim.advance(advance);
        let (next, actions) = step(&state, &observe(&sim));
        block_on(execute(&actions, &sim, &sim, &recorder)).unwrap();
        state = next;
        last = actions;
    }
    assert_eq!(state.phase, Phase::Promoting);
    assert_eq!(state.bytes_lost, Some(2000));
    assert!(matches!(&last[0], Action::Promote { pod, .. } if pod == "g-1"));
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        (state.phase, state.master.as_str()),
        (Phase::Completed, "g-1")
    );
    assert!(metrics.encode().contains(r#"outcome="unclean"} 1"#));
    no_violations(&sim);
}

#[test]
fn a_request_for_an_unknown_pod_or_the_master_is_rejected_and_removed() {
    let sim = Sim::group(2, 10);
    let p = policy(FailoverPolicy::Manual, false);
    let state = State::idle("g-0", 1);
    for target in ["g-0", "other-0"] {
        sim.world().request = Some(switchover(Some(target)));
        let (next, actions) = step(&state, &sim.observations(p, "g-0"));
        assert_eq!(next, state);
        assert!(actions.contains(&Action::ClearRequest));
    }
}

#[test]
fn an_ineligible_target_blocks_without_fencing_the_healthy_master() {
    let sim = Sim::group(2, 10_000);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Manual, false);
    let mut state = State::idle("g-0", 1);
    sim.world().brokers[1].max_offset = 10;
    sim.world().request = Some(switchover(Some("g-1")));
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(
        state.phase,
        Phase::Blocked(BlockedReason::TargetNotEligible)
    );
    assert!(sim.world().brokers[0].master, "still serving");
    // Withdrawing the request cancels.
    sim.world().request = None;
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(state.phase, Phase::Idle);
}

#[test]
fn a_master_that_recovers_before_fencing_cancels_the_failover() {
    let sim = Sim::group(2, 10);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Automatic, false);
    let mut state = State::idle("g-0", 1);
    sim.partition(0);
    drive(&sim, &mut state, p, &metrics);
    sim.advance(1_000);
    sim.revive(0);
    let actions = drive(&sim, &mut state, p, &metrics);
    assert_eq!(state.phase, Phase::Idle);
    assert_eq!(reasons(&actions), ["FailoverCancelled"]);
}

#[test]
fn a_candidate_lost_mid_promotion_is_fenced_again_at_a_higher_epoch() {
    let sim = Sim::group(3, 100);
    let p = policy(FailoverPolicy::Automatic, false);
    let mut state = State::idle("g-0", 1);
    sim.kill(0);
    let (s, _) = step(&state, &sim.observations(p, "g-0"));
    state = s;
    sim.advance(5_000);
    for _ in 0..2 {
        let (s, _) = step(&state, &sim.observations(p, "g-0"));
        state = s;
    }
    assert_eq!(state.phase, Phase::Electing);
    let (s, actions) = step(&state, &sim.observations(p, "g-0"));
    assert_eq!(s.phase, Phase::Promoting);
    assert!(
        !actions.iter().any(Action::acts),
        "chosen, not yet promoted"
    );
    let (s, actions) = step(&s, &sim.observations(p, "g-0"));
    let Action::Promote { pod, epoch, .. } = &actions[0] else {
        panic!("{actions:?}")
    };
    assert_eq!(*epoch, 2);
    let pod = pod.clone();
    let i: usize = pod[2..].parse().unwrap();
    sim.partition(i);
    let (s, actions) = step(&s, &sim.observations(p, "g-0"));
    assert_eq!(s.phase, Phase::Fencing);
    assert_eq!(s.target_epoch, Some(3));
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::DeletePod { pod: p } if *p == pod))
    );
    assert_eq!(s.trigger, Some(FailoverTrigger::MasterUnavailable));
}

/// A master whose pod is terminating (a drain, a delete) may serve
/// clients until its grace period ends. Cut off from the operator, it used to count as
/// fenced at once, and a slave was promoted while it still took writes.
#[test]
fn a_terminating_master_counts_as_fenced_only_once_it_is_gone_or_confirms() {
    let sim = Sim::group(2, 500);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Automatic, false);
    let mut state = State::idle("g-0", 1);
    sim.terminate(0);
    sim.partition(0);
    let actions = past_unavailable_for(&sim, &mut state, p, &metrics);
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Promote { .. })),
        "promoted while the old master may still run: {actions:?}"
    );
    assert_eq!(state.phase, Phase::Fencing);
    // Still running and writing: the group waits rather than have two masters.
    sim.write(100, 100);
    sim.advance(30_000);
    drive(&sim, &mut state, p, &metrics);
    assert_eq!(state.phase, Phase::Fencing);
    // The process exits and the pod object goes: now the slave is promoted.
    sim.terminated(0);
    let actions = drive(&sim, &mut state, p, &metrics);
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Promote { pod, .. } if pod == "g-1")),
        "{actions:?}"
    );
    no_violations(&sim);
}

/// A terminating master that still answers is told the new epoch, and counts as fenced
/// once it reports it.
#[test]
fn a_terminating_master_that_answers_is_fenced_by_role_change() {
    let sim = Sim::group(2, 500);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Automatic, false);
    let mut state = State::idle("g-0", 1);
    sim.terminate(0);
    let actions = past_unavailable_for(&sim, &mut state, p, &metrics);
    let fence = actions
        .iter()
        .position(|a| matches!(a, Action::Fence { pod, .. } if pod == "g-0"));
    let promote = actions
        .iter()
        .position(|a| matches!(a, Action::Promote { pod, .. } if pod == "g-1"));
    assert!(fence.unwrap() < promote.unwrap(), "{actions:?}");
    no_violations(&sim);
}

/// Under ASYNC_MASTER a failover to an in-sync slave that lacks the
/// master's last bytes was counted clean, yet those bytes may have been acknowledged. It
/// reports the loss, measured from the master's last observed end (a lower bound: the
/// master did not answer), and counts as unclean so the alert fires.
#[test]
fn an_async_failover_reports_what_the_promoted_slave_lacked() {
    let sim = Sim::group(2, 5000);
    let metrics = Metrics::default();
    let mut p = policy(FailoverPolicy::Automatic, false);
    p.async_acks = true;
    // In the master's in-sync set (within haMaxGapNotInSync) but 300 bytes behind.
    sim.world().brokers[1].max_offset = 4700;
    let mut state = State::idle("g-0", 1);
    drive(&sim, &mut state, p, &metrics);
    sim.kill(0);
    past_unavailable_for(&sim, &mut state, p, &metrics);
    assert_eq!(
        (state.phase, state.master.as_str()),
        (Phase::Completed, "g-1")
    );
    assert_eq!(
        (state.bytes_lost, state.bytes_lost_exact),
        (Some(300), Some(false))
    );
    let status = super::status::to_status(&state);
    assert_eq!(
        (status.bytes_lost, status.bytes_lost_exact),
        (Some(300), Some(false))
    );
    assert!(metrics.encode().contains(r#"outcome="unclean"} 1"#));
    no_violations(&sim);
}

/// The same failover under SYNC_MASTER is clean: the in-sync slave holds every
/// acknowledged byte, and what it lacks was never acknowledged.
#[test]
fn a_sync_failover_to_an_in_sync_slave_is_clean() {
    let sim = Sim::group(2, 5000);
    let metrics = Metrics::default();
    let p = policy(FailoverPolicy::Automatic, false);
    sim.world().brokers[1].max_offset = 4700;
    let mut state = State::idle("g-0", 1);
    drive(&sim, &mut state, p, &metrics);
    sim.kill(0);
    past_unavailable_for(&sim, &mut state, p, &metrics);
    assert_eq!(state.master, "g-1");
    assert_eq!(state.bytes_lost, None);
    assert!(metrics.encode().contains(r#"outcome="clean"} 1"#));
}
