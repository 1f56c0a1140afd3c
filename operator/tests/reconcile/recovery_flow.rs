//! The brokers are the source of truth for the master: status lost (a Broker re-created
//! over retained PVCs) or disagreeing with what the members report.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod,
};
use kube::api::ObjectMeta;
use operator::admin::HaStatus;
use operator::admin::ha::HaRole;
use operator::crd::{Broker, FailoverPhase, FailoverTrigger, NameServer};
use operator::names::LABEL_ROLE;
use serde_json::json;

use crate::broker_flow::{Cluster, pod_from, pod_host};
use crate::fake_admin::FakeAdmin;
use crate::fake_api::FakeApi;
use crate::{NS, example, seed};

fn ha(master: bool, broker_id: i64, epoch: i64, max_offset: i64) -> HaStatus {
    HaStatus {
        master,
        role: if master {
            HaRole::SyncMaster
        } else {
            HaRole::Slave
        },
        epoch,
        broker_id,
        master_commit_log_max_offset: 0,
        max_offset,
        confirm_offset: 0,
        in_sync_slave_nums: 0,
        ha_connection_info: Vec::new(),
        ha_client_runtime_info: None,
    }
}

fn retained_claim(name: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NS.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec::default()),
        status: None,
    }
}

/// A Broker created where an earlier one (same name) left its volumes.
fn recreated_over_retained_volumes() -> Cluster {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    let broker: Broker = example("ha.yaml", "Broker", "rmq-ha");
    let broker = (*seed(&api, &broker)).clone();
    for g in 0..2 {
        for o in 0..2 {
            api.insert(&retained_claim(&format!("store-rmq-ha-{g}-{o}")));
        }
    }
    Cluster { api, admin, broker }
}

fn pods_start(c: &Cluster) {
    for g in 0..2 {
        let sts_name = format!("rmq-ha-{g}");
        c.api
            .set_status::<StatefulSet>(NS, &sts_name, json!({"updateRevision": "rev1"}));
        let sts = c.api.get::<StatefulSet>(NS, &sts_name).unwrap();
        for o in 0..2 {
            c.api.insert(&pod_from(&sts, o, "rev1", true));
        }
    }
}

fn master_in_config(c: &Cluster, group: i32) -> Vec<String> {
    let cm = c
        .api
        .get::<ConfigMap>(NS, &format!("rmq-ha-{group}-config"))
        .unwrap();
    cm.data
        .unwrap()
        .into_iter()
        .filter(|(_, conf)| conf.contains("brokerId=0\n"))
        .map(|(file, _)| file)
        .collect()
}

#[tokio::test]
async fn a_broker_recreated_over_retained_volumes_promotes_the_newest_member_not_ordinal_0() {
    let c = recreated_over_retained_volumes();
    c.reconcile().await;
    // Nobody may start as master before the members have told their epochs.
    for g in 0..2 {
        assert!(
            master_in_config(&c, g).is_empty(),
            "group {g} renders a master"
        );
    }
    let status = c.status();
    assert_eq!(
        status.groups[0].failover.trigger,
        Some(FailoverTrigger::StatusLost)
    );

    // The pods start as slaves; their epoch files say pod 1 of group 0 led last.
    pods_start(&c);
    c.admin
        .set_ha(&pod_host("rmq-ha-0-0"), ha(false, 1, 2, 9000));
    c.admin
        .set_ha(&pod_host("rmq-ha-0-1"), ha(false, 2, 3, 8000));
    c.admin
        .set_ha(&pod_host("rmq-ha-1-0"), ha(false, 1, 3, 7000));
    c.admin
        .set_ha(&pod_host("rmq-ha-1-1"), ha(false, 2, 3, 6000));
    c.admin.take_calls();
    c.reconcile().await;

    let status = c.status();
    let g0 = &status.groups[0];
    assert_eq!(g0.master_pod.as_deref(), Some("rmq-ha-0-1"));
    assert_eq!((g0.epoch, g0.failover.phase), (4, FailoverPhase::Completed));
    let g1 = &status.groups[1];
    assert_eq!(g1.master_pod.as_deref(), Some("rmq-ha-1-0"));
    assert_eq!(g1.epoch, 4);
    assert_eq!(master_in_config(&c, 0), ["rmq-ha-0-1.conf"]);
    let calls = c.admin.take_calls();
    let own = pod_host("rmq-ha-0-0");
    assert!(
        !calls
            .iter()
            .any(|call| call.contains(&format!("masterAddress={own}"))),
        "rmq-ha-0-0 (older epoch) was named master: {calls:?}"
    );
    assert!(c.admin.ha(&pod_host("rmq-ha-0-1")).unwrap().master);
}

#[tokio::test]
async fn lost_status_with_a_running_master_adopts_it_without_role_changes() {
    let c = Cluster::started().await;
    c.admin
        .set_ha(&pod_host("rmq-ha-0-0"), ha(false, 1, 5, 100));
    c.admin.set_ha(&pod_host("rmq-ha-0-1"), ha(true, 0, 5, 100));
    c.admin.set_ha(&pod_host("rmq-ha-1-0"), ha(true, 0, 1, 100));
    c.admin
        .set_ha(&pod_host("rmq-ha-1-1"), ha(false, 1, 1, 100));
    // Restored from a backup without status.
    c.api.set_status::<Broker>(NS, "rmq-ha", json!(null));
    c.admin.take_calls();
    c.reconcile().await;
    let status = c.status();
    assert_eq!(status.groups[0].master_pod.as_deref(), Some("rmq-ha-0-1"));
    assert_eq!(status.groups[0].epoch, 5);
    assert_eq!(status.groups[1].master_pod.as_deref(), Some("rmq-ha-1-0"));
    assert!(
        !c.admin
            .take_calls()
            .iter()
            .any(|call| call.starts_with("notify_role_changed"))
    );
    let pod = c.api.get::<Pod>(NS, "rmq-ha-0-1").unwrap();
    assert_eq!(pod.metadata.labels.unwrap()[LABEL_ROLE], "master");
    assert_eq!(master_in_config(&c, 0), ["rmq-ha-0-1.conf"]);
}

#[tokio::test]
async fn a_status_that_disagrees_with_the_brokers_at_rest_follows_the_brokers() {
    let c = Cluster::started().await;
    c.reconcile().await;
    assert_eq!(
        c.status().groups[0].master_pod.as_deref(),
        Some("rmq-ha-0-0")
    );
    // A failover finished on the brokers, but its status write was lost.
    c.admin
        .set_ha(&pod_host("rmq-ha-0-0"), ha(false, 1, 2, 100));
    c.admin.set_ha(&pod_host("rmq-ha-0-1"), ha(true, 0, 2, 100));
    c.reconcile().await;
    let status = c.status();
    assert_eq!(status.groups[0].master_pod.as_deref(), Some("rmq-ha-0-1"));
    assert_eq!(status.groups[0].epoch, 2);
    assert!(
        c.api
            .events()
            .iter()
            .any(|(_, r, _)| r == "MasterFromBrokers")
    );
}
