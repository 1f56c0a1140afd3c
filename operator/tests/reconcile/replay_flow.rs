//! Failover bookkeeping that survives failures: per-group checkpoints, replays that count
//! once, and an operator that loses its lease mid-failover.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use operator::controller::hold_lease;
use operator::crd::FailoverPhase;
use operator::leader::LeaderElector;
use operator::metrics::FailoverLabels;
use operator::reconcile::Context;

use crate::NS;
use crate::broker_flow::pod_host;
use crate::failover_flow::{automatic, master_dies, replicating};

const STATUS: &str = "/brokers/rmq-ha/status";
const MERGE: &str = "application/merge-patch+json";

fn failovers(ctx: &Context, group: i32, outcome: &'static str) -> u64 {
    ctx.metrics
        .failovers
        .get_or_create(&FailoverLabels {
            resource_namespace: NS.to_owned(),
            broker: "rmq-ha".to_owned(),
            broker_name: format!("rmq-ha-{group}"),
            outcome,
        })
        .get()
}

fn promotions(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.starts_with("notify_role_changed") && !c.contains("masterBrokerId=-1"))
        .filter(|c| {
            // A promotion names the broker itself as master.
            let mut parts = c.split(' ');
            let target = parts.nth(1).unwrap_or_default();
            c.ends_with(&format!("masterAddress={target}"))
        })
        .cloned()
        .collect()
}

#[tokio::test]
async fn two_groups_failing_over_in_one_reconcile_keep_their_own_checkpoints() {
    let c = replicating(5000).await;
    automatic(&c);
    master_dies(&c, 0, 60);
    master_dies(&c, 1, 60);
    let ctx = c.ctx();
    // The final whole-status write fails (a crash, a conflict, a lost connection).
    c.api.inject_error_for(Method::PATCH, STATUS, MERGE, 500, 1);
    assert!(c.reconcile_in(&ctx).await.is_err());

    // Each group's own checkpoints hold the outcome; neither reverted the other.
    let status = c.status();
    for g in 0..2 {
        let group = &status.groups[g as usize];
        assert_eq!(
            group.master_pod.as_deref(),
            Some(format!("rmq-ha-{g}-1").as_str())
        );
        assert_eq!(group.epoch, 2);
        assert_eq!(group.failover.phase, FailoverPhase::Completed);
        assert_eq!(failovers(&ctx, g, "clean"), 1);
    }

    // The retry replays nothing: no promotion, no second count.
    c.admin.take_calls();
    c.reconcile_in(&ctx).await.unwrap();
    assert!(promotions(&c.admin.take_calls()).is_empty());
    for g in 0..2 {
        assert_eq!(failovers(&ctx, g, "clean"), 1, "group {g} counted twice");
    }
}

#[tokio::test]
async fn a_crash_between_a_checkpoint_and_the_final_patch_resumes_without_double_counting() {
    let c = replicating(5000).await;
    automatic(&c);
    master_dies(&c, 0, 60);
    let ctx = c.ctx();
    // The promotion went out and the checkpoint of the completed failover is lost, then
    // the final status write too: the record stops at Repointing. (Detected, Fencing,
    // Electing, Promoting and Repointing are checkpointed first.)
    c.api
        .inject_error_after(Method::PATCH, STATUS, "application/json-patch", 5, 500, 1);
    c.api.inject_error_for(Method::PATCH, STATUS, MERGE, 500, 1);
    let first = c.reconcile_in(&ctx).await;
    assert!(first.is_err());
    let recorded = c.status();
    assert_eq!(recorded.groups[0].failover.phase, FailoverPhase::Repointing);
    // Not counted before it is on record.
    assert_eq!(failovers(&ctx, 0, "clean"), 0);

    // Same process retries: the promotion is replayed at the same epoch for the same pod.
    c.reconcile_in(&ctx).await.unwrap();
    let status = c.status();
    assert_eq!(status.groups[0].master_pod.as_deref(), Some("rmq-ha-0-1"));
    assert_eq!(status.groups[0].epoch, 2);
    assert_eq!(failovers(&ctx, 0, "clean"), 1);
    let promoted = promotions(&c.admin.take_calls());
    assert!(
        promoted
            .iter()
            .all(|p| p.contains("epoch=2") && p.contains(&pod_host("rmq-ha-0-1"))),
        "{promoted:?}"
    );

    // A new process finds the failover complete.
    let fresh = c.ctx();
    c.reconcile_in(&fresh).await.unwrap();
    assert!(promotions(&c.admin.take_calls()).is_empty());
    assert_eq!(failovers(&fresh, 0, "clean"), 0);
}

#[tokio::test]
async fn losing_the_lease_mid_failover_stops_the_operator_and_the_next_leader_finishes() {
    let c = replicating(5000).await;
    automatic(&c);
    master_dies(&c, 0, 60);
    let lease = Duration::from_secs(3);
    let deadline = Duration::from_secs(1);
    let a = LeaderElector::new(c.api.client(), NS, "rmq-operator", "operator-a", lease);
    assert!(a.try_lead().await.unwrap());
    let ctx_a = c.ctx();
    // Role changes hang (a slow broker); meanwhile the API server stops answering A.
    c.admin.set_role_change_delay(Duration::from_secs(30));
    c.api
        .inject_error(Method::GET, "/leases/rmq-operator", 503, 1000);
    c.api
        .inject_error(Method::PUT, "/leases/rmq-operator", 503, 1000);
    let cut = Instant::now();
    tokio::select! {
        r = c.reconcile_in(&ctx_a) => panic!("the failover finished under a lost lease: {r:?}"),
        () = hold_lease(&a, deadline) => {}
    }
    assert!(
        cut.elapsed() < lease,
        "stepped down after {:?}, not before the lease ({lease:?}) could pass to another replica",
        cut.elapsed()
    );
    assert_eq!(failovers(&ctx_a, 0, "clean"), 0);
    let cut_at = c.status().groups[0].failover.phase;
    assert!(
        !matches!(cut_at, FailoverPhase::Idle | FailoverPhase::Completed),
        "cut mid-failover, at {cut_at:?}"
    );

    // B takes the lease once it expired, and finishes from the checkpoint.
    c.api.clear_injected();
    c.admin.set_role_change_delay(Duration::ZERO);
    let b = LeaderElector::new(c.api.client(), NS, "rmq-operator", "operator-b", lease);
    let waited = Instant::now();
    while !b.try_lead().await.unwrap() {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "B never got the lease"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ctx_b: Arc<Context> = c.ctx();
    c.admin.take_calls();
    c.reconcile_in(&ctx_b).await.unwrap();
    let status = c.status();
    assert_eq!(status.groups[0].master_pod.as_deref(), Some("rmq-ha-0-1"));
    assert_eq!(status.groups[0].epoch, 2);
    assert_eq!(status.groups[0].failover.phase, FailoverPhase::Completed);
    assert_eq!(failovers(&ctx_b, 0, "clean"), 1);
    let promoted = promotions(&c.admin.take_calls());
    assert!(
        promoted
            .iter()
            .all(|p| p.contains("epoch=2") && p.contains(&pod_host("rmq-ha-0-1"))),
        "{promoted:?}"
    );
}
