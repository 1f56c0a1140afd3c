use operator::conditions;
use operator::crd::{Broker, NameServer, Topic};
use operator::names::TOPIC_FINALIZER;
use operator::reconcile::topic::reconcile;
use serde_json::json;

use crate::fake_admin::FakeAdmin;
use crate::fake_api::FakeApi;
use crate::{NS, context, example, refetch, seed};

const NAMESRV: &str =
    "rmq-ha-nameserver-0.rmq-ha-nameserver-headless.team-a.svc.cluster.local:9876";
const MASTER_0: &str = "10.0.0.1:10911";
const MASTER_1: &str = "10.0.0.2:10911";

pub fn cluster() -> (FakeApi, FakeAdmin) {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    seed(&api, &example::<Broker>("ha.yaml", "Broker", "rmq-ha"));
    admin.register_master("rmq-ha", "rmq-ha-0", MASTER_0);
    admin.register_master("rmq-ha", "rmq-ha-1", MASTER_1);
    (api, admin)
}

fn ready(topic: &Topic) -> (String, String) {
    let c = conditions::find(
        &topic.status.as_ref().unwrap().conditions,
        conditions::READY,
    )
    .unwrap();
    (c.status.clone(), c.reason.clone())
}

#[tokio::test]
async fn creates_on_every_master_and_reapplies_idempotently() {
    let (api, admin) = cluster();
    let ctx = context(&api, &admin);
    let topic = seed(
        &api,
        &example::<Topic>("topics.yaml", "Topic", "order-events"),
    );

    reconcile(topic.clone(), ctx.clone()).await.unwrap();
    let stored = refetch(&api, &*topic);
    assert!(
        stored
            .metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&TOPIC_FINALIZER.to_owned())
    );
    assert_eq!(ready(&stored), ("True".to_owned(), "Applied".to_owned()));
    let status = stored.status.clone().unwrap();
    assert_eq!(status.topic_name.as_deref(), Some("ORDER_EVENTS"));
    assert_eq!(status.placements.len(), 2);
    for addr in [MASTER_0, MASTER_1] {
        let t = admin.topic(addr, "ORDER_EVENTS").unwrap();
        assert_eq!(
            (t.read_queues, t.write_queues, t.perm, t.order),
            (16, 16, 6, true)
        );
    }
    assert!(api.events().iter().any(|(_, r, _)| r == "TopicApplied"));

    // Nothing drifted: the next reconcile reads the brokers' topic config, writes nothing
    // to them (UPDATE_AND_CREATE_TOPIC rewrites topics.json and re-registers) and nothing
    // to Kubernetes.
    admin.take_calls();
    api.take_mutations();
    reconcile(refetch(&api, &*topic), ctx.clone())
        .await
        .unwrap();
    assert_eq!(api.take_mutations(), 0);
    let calls = admin.take_calls();
    assert!(
        !calls.iter().any(|c| c.starts_with("create_topic")),
        "{calls:?}"
    );

    // Drift: the topic vanished from one broker and was changed on the other; the next
    // reconcile puts both back, reports the drift in status and as an Event.
    admin.remove_topic(MASTER_1, "ORDER_EVENTS");
    let mut changed = admin.topic(MASTER_0, "ORDER_EVENTS").unwrap();
    changed.perm = 4;
    admin.put_topic(MASTER_0, changed);
    reconcile(refetch(&api, &*topic), ctx).await.unwrap();
    let calls = admin.take_calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("create_topic"))
            .count(),
        2
    );
    for addr in [MASTER_0, MASTER_1] {
        assert_eq!(admin.topic(addr, "ORDER_EVENTS").unwrap().perm, 6);
    }
    let drift = refetch(&api, &*topic)
        .status
        .clone()
        .unwrap()
        .last_drift
        .unwrap();
    assert_eq!(drift.details.len(), 2, "{drift:?}");
    assert!(drift.details.iter().any(|d| d.contains("missing")));
    assert!(drift.details.iter().any(|d| d.contains("perm")));
    assert!(api.events().iter().any(|(_, r, _)| r == "DriftRepaired"));
}

#[tokio::test]
async fn growing_is_applied_and_shrinking_is_refused() {
    let (api, admin) = cluster();
    let ctx = context(&api, &admin);
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    reconcile(topic.clone(), ctx.clone()).await.unwrap();

    api.edit::<Topic>(
        NS,
        "payments",
        json!({"spec": {"readQueues": 12, "writeQueues": 12}}),
    );
    reconcile(refetch(&api, &*topic), ctx.clone())
        .await
        .unwrap();
    assert_eq!(admin.topic(MASTER_1, "payments").unwrap().write_queues, 12);

    api.edit::<Topic>(NS, "payments", json!({"spec": {"writeQueues": 4}}));
    admin.take_calls();
    reconcile(refetch(&api, &*topic), ctx).await.unwrap();
    let stored = refetch(&api, &*topic);
    assert_eq!(
        ready(&stored),
        ("False".to_owned(), "QueueShrinkRefused".to_owned())
    );
    assert!(
        admin
            .take_calls()
            .iter()
            .all(|c| !c.starts_with("create_topic"))
    );
    assert_eq!(admin.topic(MASTER_1, "payments").unwrap().write_queues, 12);
}

#[tokio::test]
async fn two_topics_claiming_one_name_conflict() {
    let (api, admin) = cluster();
    let ctx = context(&api, &admin);
    let first = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    let mut second = example::<Topic>("topics.yaml", "Topic", "payments");
    second.metadata.name = Some("payments-copy".to_owned());
    second.spec.topic_name = Some("payments".to_owned());
    second.spec.write_queues = 2;
    let second = seed(&api, &second);

    reconcile(first.clone(), ctx.clone()).await.unwrap();
    reconcile(second.clone(), ctx.clone()).await.unwrap();
    let loser = refetch(&api, &*second);
    assert_eq!(
        ready(&loser),
        ("False".to_owned(), "ResourceConflict".to_owned())
    );
    assert_eq!(admin.topic(MASTER_0, "payments").unwrap().write_queues, 8);
    assert!(
        api.events()
            .iter()
            .any(|(t, r, _)| t == "Warning" && r == "ResourceConflict")
    );

    // Deleting the loser must not delete the winner's topic.
    let client = api.client();
    kube::Api::<Topic>::namespaced(client, NS)
        .delete("payments-copy", &Default::default())
        .await
        .unwrap();
    admin.take_calls();
    reconcile(refetch(&api, &*second), ctx).await.unwrap();
    assert!(api.get::<Topic>(NS, "payments-copy").is_none());
    assert!(
        admin
            .take_calls()
            .iter()
            .all(|c| !c.starts_with("delete_topic"))
    );
    assert!(admin.topic(MASTER_0, "payments").is_some());
}

#[tokio::test]
async fn finalizer_deletes_from_brokers_and_nameservers() {
    let (api, admin) = cluster();
    let ctx = context(&api, &admin);
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    reconcile(topic.clone(), ctx.clone()).await.unwrap();

    kube::Api::<Topic>::namespaced(api.client(), NS)
        .delete("payments", &Default::default())
        .await
        .unwrap();
    let deleting = refetch(&api, &*topic);
    assert!(
        deleting.metadata.deletion_timestamp.is_some(),
        "finalizer holds the object"
    );
    admin.take_calls();
    reconcile(deleting, ctx).await.unwrap();
    assert!(api.get::<Topic>(NS, "payments").is_none());
    let calls = admin.take_calls();
    assert!(calls.contains(&format!("delete_topic_in_broker {MASTER_0} payments")));
    assert!(calls.contains(&format!("delete_topic_in_broker {MASTER_1} payments")));
    assert!(
        calls
            .iter()
            .any(|c| c.starts_with("delete_topic_in_namesrv") && c.ends_with("payments rmq-ha"))
    );
    assert!(admin.topic(MASTER_0, "payments").is_none());
}

#[tokio::test]
async fn finalizer_never_blocks_forever() {
    let (api, admin) = cluster();
    let ctx = context(&api, &admin);
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    reconcile(topic.clone(), ctx.clone()).await.unwrap();
    kube::Api::<Topic>::namespaced(api.client(), NS)
        .delete("payments", &Default::default())
        .await
        .unwrap();

    // Nameservers unreachable: within the grace period the deletion is retried (error →
    // backoff); the fake deletionTimestamp lies in the past, beyond the grace period, so
    // the finalizer is released with a Warning.
    admin.set_down(NAMESRV, true);
    for i in 1..3 {
        admin.set_down(&NAMESRV.replace("-0.", &format!("-{i}.")), true);
    }
    reconcile(refetch(&api, &*topic), ctx).await.unwrap();
    assert!(api.get::<Topic>(NS, "payments").is_none());
    assert!(
        api.events()
            .iter()
            .any(|(t, r, _)| t == "Warning" && r == "DeletionAbandoned")
    );
}

#[tokio::test]
async fn cluster_gone_releases_the_finalizer() {
    let (api, admin) = cluster();
    let ctx = context(&api, &admin);
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    reconcile(topic.clone(), ctx.clone()).await.unwrap();
    api.remove::<Broker>(NS, "rmq-ha");
    kube::Api::<Topic>::namespaced(api.client(), NS)
        .delete("payments", &Default::default())
        .await
        .unwrap();
    admin.take_calls();
    reconcile(refetch(&api, &*topic), ctx).await.unwrap();
    assert!(api.get::<Topic>(NS, "payments").is_none());
    assert!(admin.take_calls().is_empty());
}

#[tokio::test]
async fn pause_and_unmanaged_annotations() {
    let (api, admin) = cluster();
    let ctx = context(&api, &admin);
    let mut paused = example::<Topic>("topics.yaml", "Topic", "payments");
    paused.metadata.annotations = Some(
        [(
            "rmq-rs.dev/pause-reconciliation".to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    let paused = seed(&api, &paused);
    reconcile(paused.clone(), ctx.clone()).await.unwrap();
    let stored = refetch(&api, &*paused);
    let status = stored.status.clone().unwrap();
    assert!(conditions::is_true(
        &status.conditions,
        conditions::RECONCILIATION_PAUSED
    ));
    assert!(admin.take_calls().is_empty());

    // Managed → unmanaged: the finalizer goes, deletion leaves the topic on the brokers.
    let topic = seed(
        &api,
        &example::<Topic>("topics.yaml", "Topic", "order-events"),
    );
    reconcile(topic.clone(), ctx.clone()).await.unwrap();
    api.edit::<Topic>(
        NS,
        "order-events",
        json!({"metadata": {"annotations": {"rmq-rs.dev/managed": "false"}}}),
    );
    reconcile(refetch(&api, &*topic), ctx.clone())
        .await
        .unwrap();
    let stored = refetch(&api, &*topic);
    assert!(
        stored
            .metadata
            .finalizers
            .as_ref()
            .is_none_or(|f| f.is_empty())
    );
    assert_eq!(ready(&stored), ("False".to_owned(), "Unmanaged".to_owned()));
    admin.take_calls();
    kube::Api::<Topic>::namespaced(api.client(), NS)
        .delete("order-events", &Default::default())
        .await
        .unwrap();
    assert!(api.get::<Topic>(NS, "order-events").is_none());
    assert!(admin.topic(MASTER_0, "ORDER_EVENTS").is_some());
}

#[tokio::test]
async fn no_registered_master_waits() {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    seed(&api, &example::<Broker>("ha.yaml", "Broker", "rmq-ha"));
    let topic = seed(&api, &example::<Topic>("topics.yaml", "Topic", "payments"));
    reconcile(topic.clone(), context(&api, &admin))
        .await
        .unwrap();
    assert_eq!(
        ready(&refetch(&api, &*topic)),
        ("False".to_owned(), "NoMasters".to_owned())
    );
}
