//! Failover through the Broker reconciler: the in-memory API server plays Kubernetes, the
//! scripted admin plays the brokers (it applies NOTIFY_BROKER_ROLE_CHANGED like a broker).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{Timestamp, ToSpan};
use operator::admin::HaStatus;
use operator::admin::ha::{HaConnection, HaRole};
use operator::conditions;
use operator::crd::{Broker, FailoverPhase, FailoverTrigger, MemberRole};
use operator::names::{ANNOTATION_SWITCHOVER, LABEL_ROLE};
use serde_json::json;

use crate::NS;
use crate::broker_flow::{Cluster, pod_from, pod_host, template_hash};

pub fn ha(master: bool, broker_id: i64, max_offset: i64, slave: Option<&str>) -> HaStatus {
    HaStatus {
        master,
        role: if master {
            HaRole::SyncMaster
        } else {
            HaRole::Slave
        },
        epoch: 1,
        broker_id,
        master_commit_log_max_offset: max_offset,
        max_offset,
        confirm_offset: max_offset,
        in_sync_slave_nums: i32::from(slave.is_some()),
        ha_connection_info: slave
            .map(|s| {
                vec![HaConnection {
                    addr: format!("{}:40000", pod_host(s).trim_end_matches(":10911")),
                    slave_ack_offset: max_offset,
                    diff: 0,
                    in_sync: true,
                }]
            })
            .into_iter()
            .flatten()
            .collect(),
        ha_client_runtime_info: None,
    }
}

/// The started cluster with every group replicating in sync at `offset`.
pub async fn replicating(offset: i64) -> Cluster {
    let c = Cluster::started().await;
    for g in 0..2 {
        let (m, s) = (format!("rmq-ha-{g}-0"), format!("rmq-ha-{g}-1"));
        c.admin.set_ha(&pod_host(&m), ha(true, 0, offset, Some(&s)));
        c.admin.set_ha(&pod_host(&s), ha(false, 1, offset, None));
    }
    c.reconcile().await;
    c
}

pub fn automatic(c: &Cluster) {
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"failover": {"policy": "Automatic", "unavailableFor": "5s"}}}),
    );
}

/// The master pod's Ready condition turned false `ago` seconds back; it stops answering.
pub fn master_dies(c: &Cluster, group: i32, ago: i64) {
    let sts = c
        .api
        .get::<StatefulSet>(NS, &format!("rmq-ha-{group}"))
        .unwrap();
    let mut pod = pod_from(&sts, 0, "rev1", false);
    let cond = &mut pod.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    cond.last_transition_time = Some(Time(Timestamp::now() - ago.seconds()));
    c.api.insert(&pod);
    c.admin
        .set_down(&pod_host(&format!("rmq-ha-{group}-0")), true);
}

#[tokio::test]
async fn automatic_failover_fences_promotes_and_repoints_in_one_reconcile() {
    let c = replicating(5000).await;
    assert_eq!(c.status().groups[0].master_max_offset, Some(5000));
    assert_eq!(c.status().groups[0].members[1].in_sync, Some(true));
    automatic(&c);
    let hash_before = template_hash(&c.api, 0);
    master_dies(&c, 0, 60);
    c.admin.take_calls();
    c.reconcile().await;

    let status = c.status();
    let g = &status.groups[0];
    assert_eq!(g.master_pod.as_deref(), Some("rmq-ha-0-1"));
    assert_eq!(g.epoch, 2);
    assert_eq!(g.failover.phase, FailoverPhase::Completed);
    assert_eq!(g.failover.trigger, Some(FailoverTrigger::MasterUnavailable));
    assert_eq!(g.failover.fenced, ["rmq-ha-0-0"]);
    assert_eq!(
        (g.members[1].role, g.members[1].broker_id),
        (MemberRole::Master, 0)
    );
    // Unreachable: fenced by deleting its pod (recreated by the StatefulSet as a slave).
    assert!(c.api.get::<Pod>(NS, "rmq-ha-0-0").is_none());
    let cm = c.api.get::<ConfigMap>(NS, "rmq-ha-0-config").unwrap();
    let data = cm.data.unwrap();
    assert!(data["rmq-ha-0-1.conf"].contains("brokerId=0\n"));
    assert!(data["rmq-ha-0-1.conf"].contains("brokerRole=SYNC_MASTER\n"));
    assert!(data["rmq-ha-0-0.conf"].contains("brokerId=1\n"));
    assert!(data["rmq-ha-0-0.conf"].contains("brokerRole=SLAVE\n"));
    let label =
        |pod: &str| c.api.get::<Pod>(NS, pod).unwrap().metadata.labels.unwrap()[LABEL_ROLE].clone();
    assert_eq!(label("rmq-ha-0-1"), "master");
    // The role change is live: no rolling restart.
    assert_eq!(template_hash(&c.api, 0), hash_before);
    let calls = c.admin.take_calls();
    assert!(calls.iter().any(|call| call
        == &format!(
            "notify_role_changed {} epoch=2 masterBrokerId=1 masterAddress={}",
            pod_host("rmq-ha-0-1"),
            pod_host("rmq-ha-0-1")
        )));
    assert!(c.admin.ha(&pod_host("rmq-ha-0-1")).unwrap().master);
    let reasons: Vec<String> = c.api.events().into_iter().map(|(_, r, _)| r).collect();
    for phase in [
        "MasterUnavailable",
        "FailoverFencing",
        "FailoverElecting",
        "FailoverPromoting",
        "FailoverRepointing",
        "FailoverCompleted",
    ] {
        assert!(reasons.iter().any(|r| r == phase), "{phase} in {reasons:?}");
    }
    // Group 1 was untouched: same master, no failover; its epoch is the one its master
    // reports (the brokers are the source of truth, status records what they say).
    assert_eq!(status.groups[1].master_pod.as_deref(), Some("rmq-ha-1-0"));
    assert_eq!(status.groups[1].epoch, 1);
    assert!(status.groups[1].failover.fenced.is_empty());
    assert!(
        !calls
            .iter()
            .any(|call| call.starts_with("notify_role_changed rmq-ha-1-")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn manual_policy_reports_detected_and_waits() {
    let c = replicating(5000).await;
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"failover": {"policy": "Manual"}}}),
    );
    master_dies(&c, 1, 600);
    c.reconcile().await;
    let status = c.status();
    assert_eq!(status.groups[1].failover.phase, FailoverPhase::Detected);
    assert_eq!(status.groups[1].master_pod.as_deref(), Some("rmq-ha-1-0"));
    assert!(conditions::is_true(
        &status.conditions,
        conditions::FAILOVER_IN_PROGRESS
    ));
    assert!(
        c.api.get::<Pod>(NS, "rmq-ha-1-0").is_some(),
        "nothing deleted"
    );
}

#[tokio::test]
async fn switchover_annotation_hands_over_cleanly_and_is_removed() {
    let c = replicating(7000).await;
    c.admin.take_calls();
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"metadata": {"annotations": {ANNOTATION_SWITCHOVER: "rmq-ha-1-1"}}}),
    );
    c.reconcile().await;
    let status = c.status();
    let g = &status.groups[1];
    assert_eq!(g.master_pod.as_deref(), Some("rmq-ha-1-1"));
    assert_eq!(g.failover.phase, FailoverPhase::Completed);
    assert_eq!(g.failover.trigger, Some(FailoverTrigger::Switchover));
    // The old master was demoted through the admin protocol, not deleted, and follows.
    assert!(c.api.get::<Pod>(NS, "rmq-ha-1-0").is_some());
    let old = c.admin.ha(&pod_host("rmq-ha-1-0")).unwrap();
    assert!(!old.master && old.epoch == 2);
    let calls = c.admin.take_calls();
    assert!(calls.iter().any(|call| call.starts_with(&format!(
        "notify_role_changed {} epoch=2 masterBrokerId=-1",
        pod_host("rmq-ha-1-0")
    ))));
    let broker = c.api.get::<Broker>(NS, "rmq-ha").unwrap();
    assert!(
        !broker
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ANNOTATION_SWITCHOVER)
    );
}

#[tokio::test]
async fn an_annotation_naming_a_foreign_pod_is_rejected() {
    let c = replicating(10).await;
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"metadata": {"annotations": {ANNOTATION_SWITCHOVER: "other-0-1"}}}),
    );
    c.reconcile().await;
    let broker = c.api.get::<Broker>(NS, "rmq-ha").unwrap();
    assert!(
        !broker
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ANNOTATION_SWITCHOVER)
    );
    assert!(
        c.api
            .events()
            .iter()
            .any(|(t, r, _)| t == "Warning" && r == "SwitchoverRejected")
    );
}

#[tokio::test]
async fn rolling_restart_switches_the_master_over_before_restarting_it() {
    let c = replicating(3000).await;
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"metadata": {"annotations": {"rmq-rs.dev/restart": "1"}}}),
    );
    c.reconcile().await;
    c.api
        .set_status::<StatefulSet>(NS, "rmq-ha-0", json!({"updateRevision": "rev2"}));
    let mut deleted = Vec::new();
    for _ in 0..6 {
        let before: Vec<String> = c
            .api
            .list::<Pod>(NS)
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
        c.reconcile().await;
        let sts = c.api.get::<StatefulSet>(NS, "rmq-ha-0").unwrap();
        for name in before {
            if c.api.get::<Pod>(NS, &name).is_none() {
                let ordinal: i32 = name.rsplit('-').next().unwrap().parse().unwrap();
                c.api.insert(&pod_from(&sts, ordinal, "rev2", true));
                deleted.push(format!(
                    "{name} (master {})",
                    c.status().groups[0].master_pod.clone().unwrap()
                ));
            }
        }
    }
    // The slave first; then the master hands over to it and restarts as a slave.
    assert_eq!(
        deleted,
        [
            "rmq-ha-0-1 (master rmq-ha-0-0)",
            "rmq-ha-0-0 (master rmq-ha-0-1)"
        ]
    );
    let g = &c.status().groups[0];
    assert_eq!(
        g.failover.trigger,
        Some(FailoverTrigger::RollingRestart),
        "{g:#?}"
    );
    assert_eq!(g.epoch, 2);
}
