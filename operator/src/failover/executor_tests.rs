//! The executor against the simulated group: what each action sends, what stops it.

use futures::executor::block_on;

use super::*;
use crate::failover::machine::Outcome;
use crate::failover::machine_tests::labels;
use crate::failover::sim::Sim;

fn run(sim: &Sim, actions: &[Action], metrics: &Metrics) -> Result<(), ExecError> {
    let recorder = Recorder {
        metrics,
        group: labels(),
    };
    block_on(execute(actions, sim, sim, &recorder))
}

#[test]
fn fence_promote_follow_send_the_role_change_headers() {
    let sim = Sim::group(3, 10);
    let metrics = Metrics::default();
    let actions = [
        Action::Fence {
            pod: "g-0".to_owned(),
            epoch: 2,
        },
        Action::Promote {
            pod: "g-2".to_owned(),
            broker_id: 2,
            epoch: 2,
        },
        Action::Follow {
            pod: "g-1".to_owned(),
            master: "g-2".to_owned(),
            master_broker_id: 2,
            epoch: 2,
        },
    ];
    run(&sim, &actions, &metrics).unwrap();
    let w = sim.world();
    let changes = &w.role_changes;
    assert_eq!(changes[0].0, "g-0");
    assert_eq!(changes[0].1.master_broker_id, NO_MASTER_BROKER_ID);
    assert_eq!(changes[0].1.master_address, "");
    assert_eq!(changes[1].0, "g-2");
    assert_eq!(
        (
            changes[1].1.master_address.as_str(),
            changes[1].1.master_broker_id
        ),
        ("g-2", 2)
    );
    assert_eq!(changes[2].1.master_address, "g-2");
    assert!(w.brokers[2].master && !w.brokers[0].master && !w.brokers[1].master);
    assert!(w.brokers.iter().all(|b| b.epoch == 2));
}

#[test]
fn a_refused_fence_stops_the_actions_after_it() {
    let sim = Sim::group(2, 10);
    sim.world().brokers[0].epoch = 9;
    let metrics = Metrics::default();
    let actions = [
        Action::Fence {
            pod: "g-0".to_owned(),
            epoch: 2,
        },
        Action::Promote {
            pod: "g-1".to_owned(),
            broker_id: 1,
            epoch: 2,
        },
    ];
    let err = run(&sim, &actions, &metrics).unwrap_err();
    assert!(
        matches!(err, ExecError::Admin(AdminError::Refused { .. })),
        "{err}"
    );
    assert!(
        !sim.world().brokers[1].master,
        "no promotion after a failed fence"
    );
}

#[test]
fn a_failed_delete_stops_but_a_failed_follow_is_only_an_event() {
    let sim = Sim::group(2, 10);
    let metrics = Metrics::default();
    sim.kill(1);
    let follow = Action::Follow {
        pod: "g-1".to_owned(),
        master: "g-0".to_owned(),
        master_broker_id: 0,
        epoch: 1,
    };
    let repoint = Action::Repoint {
        master: "g-0".to_owned(),
    };
    run(&sim, &[follow, repoint, Action::ClearRequest], &metrics).unwrap();
    assert_eq!(sim.world().events, ["FollowFailed"]);

    sim.world().fail_deletes = true;
    let err = run(
        &sim,
        &[
            Action::DeletePod {
                pod: "g-1".to_owned(),
            },
            Action::Repoint {
                master: "g-1".to_owned(),
            },
        ],
        &metrics,
    )
    .unwrap_err();
    assert!(matches!(err, ExecError::Api(_)));
    assert_eq!(sim.world().labelled_master.as_deref(), Some("g-0"));
}

#[test]
fn finished_records_outcome_and_duration() {
    let sim = Sim::group(2, 10);
    let metrics = Metrics::default();
    let actions = [Action::Finished {
        outcome: Outcome::Clean,
        duration_ms: 7_500,
    }];
    run(&sim, &actions, &metrics).unwrap();
    metrics.set_failover_phase(&labels(), "Completed");
    let text = metrics.encode();
    assert!(text.contains(
        r#"rmq_operator_failovers_total{resource_namespace="ns",broker="c",broker_name="c-0",outcome="clean"} 1"#
    ), "{text}");
    assert!(text.contains(r#"rmq_operator_failover_duration_seconds_sum{resource_namespace="ns",broker="c",broker_name="c-0",outcome="clean"} 7.5"#), "{text}");
    assert!(text.contains(r#"rmq_operator_failover_phase{resource_namespace="ns",broker="c",broker_name="c-0",phase="Completed"} 1"#));
    assert!(text.contains(r#"phase="Idle"} 0"#));
}
