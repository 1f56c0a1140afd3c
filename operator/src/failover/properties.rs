//! Property tests of the failover machine: random histories of crashes, partitions,
//! recoveries, writes, time and switchover requests against the simulated group.

use futures::executor::block_on;
use proptest::prelude::*;

use super::executor::{Recorder, execute};
use super::machine::{Action, BlockedReason, Ha, Member, Observations, Phase, State, step};
use super::machine_tests::labels;
use super::sim::{Sim, policy, switchover};
use crate::crd::{FailoverPolicy, FailoverTrigger};
use crate::metrics::Metrics;

#[derive(Debug, Clone)]
enum Ev {
    Kill(usize),
    Partition(usize),
    Revive(usize),
    Write { bytes: i64, copy: i64 },
    Advance(i64),
    Request(Option<usize>),
    Withdraw,
}

fn event(n: usize, requests: bool) -> BoxedStrategy<Ev> {
    let base = prop_oneof![
        2 => (0..n).prop_map(Ev::Kill),
        2 => (0..n).prop_map(Ev::Partition),
        4 => (0..n).prop_map(Ev::Revive),
        4 => (1i64..2_000, 0i64..3_000).prop_map(|(bytes, copy)| Ev::Write { bytes, copy }),
        4 => (0i64..12_000).prop_map(Ev::Advance),
    ];
    if requests {
        prop_oneof![
            8 => base,
            1 => proptest::option::of(0..n).prop_map(Ev::Request),
            1 => Just(Ev::Withdraw),
        ]
        .boxed()
    } else {
        base.boxed()
    }
}

fn apply(sim: &Sim, ev: &Ev) {
    match ev {
        Ev::Kill(i) => sim.kill(*i),
        Ev::Partition(i) => sim.partition(*i),
        Ev::Revive(i) => sim.revive(*i),
        Ev::Write { bytes, copy } => sim.write(*bytes, *copy),
        Ev::Advance(ms) => sim.advance(*ms),
        Ev::Request(target) => {
            let target = target.map(|i| format!("g-{i}"));
            sim.world().request = Some(switchover(target.as_deref()));
        }
        Ev::Withdraw => sim.world().request = None,
    }
}

/// One reconcile: steps while the phase changes; a failed action keeps the old state,
/// as the reconciler does. Returns every action executed.
fn reconcile(
    sim: &Sim,
    state: &mut State,
    p: super::Policy,
    metrics: &Metrics,
) -> Result<Vec<Action>, TestCaseError> {
    let mut all = Vec::new();
    for _ in 0..12 {
        let obs = sim.observations(p, &state.master);
        let (next, actions) = step(state, &obs);
        for a in &actions {
            match a {
                Action::Fence { epoch, .. } | Action::Promote { epoch, .. } => {
                    prop_assert!(
                        *epoch > state.epoch,
                        "{a:?} not above epoch {}",
                        state.epoch
                    );
                }
                _ => {}
            }
        }
        prop_assert!(next.epoch >= state.epoch);
        if next.master != state.master {
            prop_assert!(next.epoch > state.epoch, "master moved without a new epoch");
        }
        let recorder = Recorder {
            metrics,
            group: labels(),
        };
        let ok = block_on(execute(&actions, sim, sim, &recorder)).is_ok();
        let acted = actions.iter().any(Action::acts);
        all.extend(actions);
        if !ok {
            break;
        }
        sim.render_configs(&next);
        let moved = next.phase != state.phase || acted;
        *state = next;
        if !moved {
            break;
        }
    }
    Ok(all)
}

fn check_world(sim: &Sim) -> Result<(), TestCaseError> {
    let w = sim.world();
    prop_assert!(w.violations.is_empty(), "{:?}", w.violations);
    let mut epochs: Vec<i64> = w
        .brokers
        .iter()
        .filter(|b| b.alive && b.master)
        .map(|b| b.epoch)
        .collect();
    let n = epochs.len();
    epochs.dedup();
    epochs.sort_unstable();
    epochs.dedup();
    prop_assert_eq!(epochs.len(), n, "two live masters share an epoch");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Fencing before every promotion, never two live masters with one epoch, promotion
    /// epochs strictly increasing, whatever happens to the pods.
    #[test]
    fn histories_keep_the_safety_invariants(
        n in 2usize..=4,
        automatic in any::<bool>(),
        unclean in any::<bool>(),
        events in proptest::collection::vec(event(4, true), 1..60),
    ) {
        let sim = Sim::group(n, 1_000);
        let metrics = Metrics::default();
        let mode = if automatic { FailoverPolicy::Automatic } else { FailoverPolicy::Manual };
        let p = policy(mode, unclean);
        let mut state = State::idle("g-0", 1);
        for ev in &events {
            let ev = match ev {
                Ev::Kill(i) => Ev::Kill(i % n),
                Ev::Partition(i) => Ev::Partition(i % n),
                Ev::Revive(i) => Ev::Revive(i % n),
                Ev::Request(t) => Ev::Request(t.map(|i| i % n)),
                other => other.clone(),
            };
            apply(&sim, &ev);
            reconcile(&sim, &mut state, p, &metrics)?;
            check_world(&sim)?;
        }
    }

    /// Under policy Manual nothing but Events happens until someone asks.
    #[test]
    fn manual_never_acts_without_a_request(
        n in 2usize..=4,
        events in proptest::collection::vec(event(4, false), 1..60),
    ) {
        let sim = Sim::group(n, 1_000);
        let metrics = Metrics::default();
        let p = policy(FailoverPolicy::Manual, true);
        let mut state = State::idle("g-0", 1);
        for ev in &events {
            let ev = match ev {
                Ev::Kill(i) => Ev::Kill(i % n),
                Ev::Partition(i) => Ev::Partition(i % n),
                Ev::Revive(i) => Ev::Revive(i % n),
                other => other.clone(),
            };
            apply(&sim, &ev);
            for a in reconcile(&sim, &mut state, p, &metrics)? {
                prop_assert!(
                    matches!(a, Action::Event { .. } | Action::Finished { .. }),
                    "acted without a request: {a:?}"
                );
            }
        }
        prop_assert!(sim.world().promotions.is_empty());
    }

    /// After fencing, with no replica in sync within maxLagBytes and reachable (and no
    /// unclean election), the machine blocks; with one, it promotes the best such one.
    #[test]
    fn electing_blocks_exactly_when_no_replica_is_eligible(
        members in proptest::collection::vec(
            (any::<bool>(), any::<bool>(), any::<bool>(), 0i64..3_000), 1..5),
        old_answers in any::<bool>(),
    ) {
        let max_lag = 1_000;
        let master_offset = 2_500;
        let mut all = vec![Member {
            pod: "g-0".to_owned(),
            broker_id: 0,
            exists: true,
            terminating: false,
            ready: false,
            unready_since_ms: Some(0),
            ha: old_answers.then_some(Ha { master: false, epoch: 2, max_offset: master_offset }),
            in_sync: false,
        }];
        for (i, (ready, answers, in_sync, offset)) in members.iter().enumerate() {
            all.push(Member {
                pod: format!("g-{}", i + 1),
                broker_id: i as i64 + 1,
                exists: true,
                terminating: false,
                ready: *ready,
                unready_since_ms: None,
                ha: answers.then_some(Ha { master: false, epoch: 1, max_offset: *offset }),
                in_sync: *in_sync,
            });
        }
        let eligible: Vec<&Member> = all[1..]
            .iter()
            .filter(|m| m.reachable() && m.in_sync
                && m.ha.is_some_and(|h| master_offset - h.max_offset <= max_lag))
            .collect();
        let state = State {
            master: "g-0".to_owned(),
            epoch: 1,
            phase: Phase::Electing,
            trigger: Some(FailoverTrigger::MasterUnavailable),
            from: Some("g-0".to_owned()),
            target_epoch: Some(2),
            fenced: vec!["g-0".to_owned()],
            phase_since_ms: Some(0),
            ..State::default()
        };
        let mut p = policy(FailoverPolicy::Automatic, false);
        p.max_lag_bytes = max_lag;
        let obs = Observations {
            now_ms: 1,
            policy: p,
            members: all.clone(),
            request: None,
            master_offset: Some(master_offset),
        };
        let (next, actions) = step(&state, &obs);
        prop_assert!(!actions.iter().any(Action::acts), "Electing only decides");
        let promoted: Vec<&String> = next
            .to
            .iter()
            .filter(|_| next.phase == Phase::Promoting)
            .collect();
        if eligible.is_empty() {
            // Only the old master itself may come back (it holds everything), and only
            // when ready; otherwise Blocked.
            if promoted.is_empty() {
                prop_assert_eq!(next.phase, Phase::Blocked(BlockedReason::NoEligibleReplica));
            } else {
                prop_assert_eq!(promoted, vec!["g-0"]);
                prop_assert!(all[0].reachable());
            }
        } else {
            let best = eligible.iter().map(|m| m.ha.map_or(0, |h| h.max_offset)).max();
            prop_assert_eq!(promoted.len(), 1);
            let chosen = eligible.iter().find(|m| &m.pod == promoted[0]);
            prop_assert!(chosen.is_some(), "promoted an ineligible replica");
            prop_assert_eq!(chosen.and_then(|m| m.ha.map(|h| h.max_offset)), best);
        }
    }
}
