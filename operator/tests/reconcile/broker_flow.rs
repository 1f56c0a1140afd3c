use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodCondition, PodStatus, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;
use operator::conditions;
use operator::crd::{Broker, MemberRole, NameServer};
use operator::names::{ANNOTATION_CONFIG_HASH, LABEL_REVISION, LABEL_ROLE};
use operator::reconcile::broker::reconcile;
use serde_json::json;

use crate::fake_admin::FakeAdmin;
use crate::fake_api::FakeApi;
use crate::{NS, context, example, refetch, seed};

pub fn pod_host(pod: &str) -> String {
    format!("{pod}.rmq-ha-broker-headless.{NS}.svc.cluster.local:10911")
}

/// A pod as the StatefulSet controller would create it from `sts`'s template.
pub fn pod_from(sts: &StatefulSet, ordinal: i32, revision: &str, ready: bool) -> Pod {
    let name = format!("{}-{ordinal}", sts.metadata.name.as_deref().unwrap());
    let template = sts
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .clone()
        .unwrap();
    let mut labels = template.labels.unwrap();
    labels.insert(LABEL_REVISION.to_owned(), revision.to_owned());
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(NS.to_owned()),
            labels: Some(labels),
            annotations: template.annotations,
            // Owned by the StatefulSet, so deleting it without Orphan deletes the pods.
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".to_owned(),
                kind: "StatefulSet".to_owned(),
                name: sts.metadata.name.clone().unwrap(),
                uid: sts.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".to_owned(),
                status: if ready { "True" } else { "False" }.to_owned(),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
    }
}

pub struct Cluster {
    pub api: FakeApi,
    pub admin: FakeAdmin,
    pub broker: Broker,
}

impl Cluster {
    pub async fn started() -> Self {
        let api = FakeApi::new();
        let admin = FakeAdmin::new();
        let nameserver: NameServer = example("ha.yaml", "NameServer", "rmq-ha");
        seed(&api, &nameserver);
        let broker: Broker = example("ha.yaml", "Broker", "rmq-ha");
        let broker = (*seed(&api, &broker)).clone();
        let c = Self { api, admin, broker };
        c.reconcile().await;
        // The StatefulSet controller creates the pods; they become ready.
        for g in 0..2 {
            let sts_name = format!("rmq-ha-{g}");
            c.api
                .set_status::<StatefulSet>(NS, &sts_name, json!({"updateRevision": "rev1"}));
            let sts = c.api.get::<StatefulSet>(NS, &sts_name).unwrap();
            for o in 0..2 {
                c.api.insert(&pod_from(&sts, o, "rev1", true));
                let pod = format!("rmq-ha-{g}-{o}");
                let offset = if o == 0 { 5000 } else { 4096 };
                c.admin.set_runtime(
                    &pod_host(&pod),
                    &[("commitLogMaxOffset", offset), ("dispatchBehindBytes", 7)],
                );
            }
        }
        c
    }

    pub fn ctx(&self) -> std::sync::Arc<operator::reconcile::Context> {
        context(&self.api, &self.admin)
    }

    pub async fn reconcile(&self) -> kube::runtime::controller::Action {
        reconcile(refetch(&self.api, &self.broker), self.ctx())
            .await
            .unwrap()
    }

    /// One reconcile with a given context (one operator process), returning its result.
    pub async fn reconcile_in(
        &self,
        ctx: &std::sync::Arc<operator::reconcile::Context>,
    ) -> Result<kube::runtime::controller::Action, operator::reconcile::Error> {
        reconcile(refetch(&self.api, &self.broker), ctx.clone()).await
    }

    pub fn status(&self) -> operator::crd::BrokerStatus {
        refetch(&self.api, &self.broker).status.clone().unwrap()
    }
}

#[tokio::test]
async fn creates_groups_with_per_member_config() {
    let c = Cluster::started().await;
    for g in 0..2 {
        let sts = c
            .api
            .get::<StatefulSet>(NS, &format!("rmq-ha-{g}"))
            .unwrap();
        let spec = sts.spec.unwrap();
        assert_eq!(
            spec.update_strategy.unwrap().type_.as_deref(),
            Some("OnDelete")
        );
        assert_eq!(spec.replicas, Some(2));
        let svc = c.api.get::<Service>(NS, &format!("rmq-ha-{g}")).unwrap();
        let selector = svc.spec.unwrap().selector.unwrap();
        assert_eq!(selector.get(LABEL_ROLE).map(String::as_str), Some("master"));
    }
    let cm = c.api.get::<ConfigMap>(NS, "rmq-ha-1-config").unwrap();
    let data = cm.data.unwrap();
    let slave = &data["rmq-ha-1-1.conf"];
    assert!(slave.contains("brokerName=rmq-ha-1\n"));
    assert!(slave.contains("brokerId=1\n"));
    assert!(slave.contains("brokerRole=SLAVE\n"));
    assert!(data["rmq-ha-1-0.conf"].contains("brokerRole=SYNC_MASTER\n"));
    assert!(slave.contains(
        "namesrvAddr=rmq-ha-nameserver-0.rmq-ha-nameserver-headless.team-a.svc.cluster.local:9876;"
    ));
    assert!(slave.contains("maxMessageSize=4194304\n"));
    assert!(c.api.get::<Service>(NS, "rmq-ha-broker-headless").is_some());
}

#[tokio::test]
async fn status_from_pods_and_runtime_info_then_steady_state() {
    let c = Cluster::started().await;
    c.reconcile().await;

    let pod = c.api.get::<Pod>(NS, "rmq-ha-0-0").unwrap();
    assert_eq!(pod.metadata.labels.unwrap()[LABEL_ROLE], "master");
    let pod = c.api.get::<Pod>(NS, "rmq-ha-0-1").unwrap();
    assert_eq!(pod.metadata.labels.unwrap()[LABEL_ROLE], "slave");

    let status = c.status();
    assert!(conditions::is_true(&status.conditions, conditions::READY));
    assert!(!conditions::is_true(
        &status.conditions,
        conditions::DEGRADED
    ));
    let group = &status.groups[1];
    assert_eq!(group.master_pod.as_deref(), Some("rmq-ha-1-0"));
    let slave = &group.members[1];
    assert_eq!(
        (slave.role, slave.broker_id, slave.ready),
        (MemberRole::Slave, 1, true)
    );
    assert_eq!(slave.replication_lag_bytes, Some(5000 - 4096));
    assert_eq!(slave.dispatch_behind_bytes, Some(7));
    assert!(slave.config_hash.is_some());

    c.api.take_mutations();
    c.admin.take_calls();
    c.reconcile().await;
    assert_eq!(
        c.api.take_mutations(),
        0,
        "second reconcile must change nothing"
    );
}

#[tokio::test]
async fn config_change_rolls_pods_one_at_a_time_slaves_first() {
    let c = Cluster::started().await;
    c.reconcile().await;
    let hash_before = template_hash(&c.api, 0);

    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"config": {"fileReservedTime": "48"}}}),
    );
    c.reconcile().await;
    assert_ne!(template_hash(&c.api, 0), hash_before);
    let cm = c.api.get::<ConfigMap>(NS, "rmq-ha-0-config").unwrap();
    assert!(cm.data.unwrap()["rmq-ha-0-0.conf"].contains("fileReservedTime=48\n"));

    // The StatefulSet controller computes a new revision; the operator restarts pods.
    for g in 0..2 {
        c.api.set_status::<StatefulSet>(
            NS,
            &format!("rmq-ha-{g}"),
            json!({"updateRevision": "rev2"}),
        );
    }
    let mut restarted = Vec::new();
    for _ in 0..10 {
        let before: BTreeMap<String, ()> = c
            .api
            .list::<Pod>(NS)
            .into_iter()
            .map(|p| (p.metadata.name.unwrap(), ()))
            .collect();
        c.reconcile().await;
        let after: Vec<String> = c
            .api
            .list::<Pod>(NS)
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
        let gone: Vec<String> = before
            .keys()
            .filter(|p| !after.contains(p))
            .cloned()
            .collect();
        assert!(gone.len() <= 1, "one pod at a time, got {gone:?}");
        let Some(pod) = gone.into_iter().next() else {
            break;
        };
        let status = c.status();
        assert!(conditions::is_true(
            &status.conditions,
            conditions::PROGRESSING
        ));
        // Recreated from the new template, and ready again.
        let (g, o) = (pod.as_bytes()[7] - b'0', pod.as_bytes()[9] - b'0');
        let sts = c
            .api
            .get::<StatefulSet>(NS, &format!("rmq-ha-{g}"))
            .unwrap();
        c.api.insert(&pod_from(&sts, i32::from(o), "rev2", true));
        restarted.push(pod);
    }
    assert_eq!(
        restarted,
        ["rmq-ha-0-1", "rmq-ha-0-0", "rmq-ha-1-1", "rmq-ha-1-0"]
    );
    let events = c.api.events();
    assert_eq!(
        events
            .iter()
            .filter(|(_, r, _)| r == "RollingRestart")
            .count(),
        4
    );
    assert!(conditions::is_true(
        &c.status().conditions,
        conditions::READY
    ));
}

#[tokio::test]
async fn waits_for_a_restarted_pod_before_the_next() {
    let c = Cluster::started().await;
    c.reconcile().await;
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"metadata": {"annotations": {"rmq-rs.dev/restart": "1"}}}),
    );
    c.reconcile().await;
    c.api
        .set_status::<StatefulSet>(NS, "rmq-ha-0", json!({"updateRevision": "rev2"}));
    c.reconcile().await;
    assert!(c.api.get::<Pod>(NS, "rmq-ha-0-1").is_none());
    // Recreated but not ready yet: nothing else is touched.
    let sts = c.api.get::<StatefulSet>(NS, "rmq-ha-0").unwrap();
    c.api.insert(&pod_from(&sts, 1, "rev2", false));
    c.reconcile().await;
    assert!(c.api.get::<Pod>(NS, "rmq-ha-0-0").is_some());
    let progressing = conditions::find(&c.status().conditions, conditions::PROGRESSING)
        .unwrap()
        .clone();
    assert_eq!(progressing.reason, "Waiting");
}

#[tokio::test]
async fn nameserver_scale_is_pushed_live_without_restarts() {
    let c = Cluster::started().await;
    c.reconcile().await;
    let hash_before = template_hash(&c.api, 1);
    c.admin.take_calls();

    c.api
        .edit::<NameServer>(NS, "rmq-ha", json!({"spec": {"replicas": 4}}));
    c.reconcile().await;
    assert_eq!(template_hash(&c.api, 1), hash_before, "no rolling restart");
    let pushes: Vec<String> = c
        .admin
        .take_calls()
        .into_iter()
        .filter(|call| call.starts_with("update_broker_config"))
        .collect();
    assert_eq!(pushes.len(), 4);
    assert!(pushes[0].contains("rmq-ha-nameserver-3.rmq-ha-nameserver-headless"));
    assert!(c.status().namesrv_addr.unwrap().matches(';').count() == 3);
    assert!(
        c.api
            .events()
            .iter()
            .any(|(_, r, _)| r == "NameServersChanged")
    );
}

#[tokio::test]
async fn missing_nameserver_is_a_condition_not_a_crash() {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    let broker: Broker = example("minimal.yaml", "Broker", "rmq");
    let broker = seed(&api, &broker);
    reconcile(broker.clone(), context(&api, &admin))
        .await
        .unwrap();
    let status = refetch(&api, &*broker).status.clone().unwrap();
    let ready = conditions::find(&status.conditions, conditions::READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NameServerNotFound")
    );
    assert!(api.get::<StatefulSet>(NS, "rmq-0").is_none());
}

#[tokio::test]
async fn unready_master_degrades() {
    let c = Cluster::started().await;
    let sts = c.api.get::<StatefulSet>(NS, "rmq-ha-1").unwrap();
    c.api.insert(&pod_from(&sts, 0, "rev1", false));
    c.reconcile().await;
    let degraded = conditions::find(&c.status().conditions, conditions::DEGRADED)
        .unwrap()
        .clone();
    assert_eq!(degraded.status, "True");
    assert!(degraded.message.contains("rmq-ha-1"));
}

pub fn template_hash(api: &FakeApi, group: i32) -> String {
    let sts = api
        .get::<StatefulSet>(NS, &format!("rmq-ha-{group}"))
        .unwrap();
    sts.spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .annotations
        .unwrap()[ANNOTATION_CONFIG_HASH]
        .clone()
}
