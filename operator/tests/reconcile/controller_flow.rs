//! The real controller wiring (`run_controllers`: watches, predicates, requeues) against
//! the fake API server's watch streams, under broker write traffic.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use operator::controller::run_controllers;
use operator::crd::{Broker, NameServer, Topic};
use operator::metrics::KindLabels;
use serde_json::json;

use crate::broker_flow::{pod_from, pod_host};
use crate::failover_flow::ha;
use crate::fake_admin::FakeAdmin;
use crate::fake_api::FakeApi;
use crate::{NS, context, example, seed};

fn reconciles(ctx: &operator::reconcile::Context, kind: &'static str) -> u64 {
    ctx.metrics
        .reconciliations
        .get_or_create(&KindLabels { kind })
        .get()
}

/// Offsets of a cluster taking writes: every member moves, the slave a little behind.
fn traffic(admin: &FakeAdmin, offset: i64) {
    for g in 0..2 {
        let (m, s) = (format!("rmq-ha-{g}-0"), format!("rmq-ha-{g}-1"));
        admin.set_runtime(
            &pod_host(&m),
            &[
                ("commitLogMaxOffset", offset),
                ("dispatchBehindBytes", offset % 997),
            ],
        );
        admin.set_runtime(
            &pod_host(&s),
            &[
                ("commitLogMaxOffset", offset - 512),
                ("dispatchBehindBytes", 0),
            ],
        );
        admin.set_ha(&pod_host(&m), ha(true, 0, offset, Some(&s)));
        admin.set_ha(&pod_host(&s), ha(false, 1, offset - 512, None));
    }
}

#[tokio::test(start_paused = true)]
async fn under_changing_offsets_reconciles_are_bounded_and_no_topic_is_rewritten() {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    seed(&api, &example::<Broker>("ha.yaml", "Broker", "rmq-ha"));
    for t in ["payments", "order-events", "audit-log"] {
        seed(&api, &example::<Topic>("topics.yaml", "Topic", t));
    }
    admin.register_master("rmq-ha", "rmq-ha-0", &pod_host("rmq-ha-0-0"));
    admin.register_master("rmq-ha", "rmq-ha-1", &pod_host("rmq-ha-1-0"));
    let ctx = context(&api, &admin);
    let controllers = tokio::spawn(run_controllers(
        api.client(),
        Some(NS.to_owned()),
        ctx.clone(),
    ));

    // The StatefulSets appear through the watch-driven reconcile; then their pods.
    let mut waited = 0;
    while api.get::<StatefulSet>(NS, "rmq-ha-1").is_none() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        waited += 1;
        assert!(
            waited < 120,
            "the Broker controller never created its StatefulSets"
        );
    }
    traffic(&admin, 10_000);
    for g in 0..2 {
        let name = format!("rmq-ha-{g}");
        api.set_status::<StatefulSet>(NS, &name, json!({"updateRevision": "rev1"}));
        let sts = api.get::<StatefulSet>(NS, &name).unwrap();
        for o in 0..2 {
            api.insert(&pod_from(&sts, o, "rev1", true));
        }
    }
    // Settle: Ready, topics created once. Virtual time (the runtime starts paused): two
    // minutes of the controllers' requeues and timers is what is asked of them here.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let broker = api.get::<Broker>(NS, "rmq-ha").unwrap();
    assert!(
        operator::conditions::is_true(
            &broker.status.unwrap().conditions,
            operator::conditions::READY
        ),
        "the cluster settled"
    );
    let creates = |calls: &[String]| {
        calls
            .iter()
            .filter(|c| c.starts_with("create_topic"))
            .count()
    };
    assert_eq!(creates(&admin.calls()), 6, "3 topics on 2 masters, once");

    // Ten minutes of write traffic: offsets move every second.
    let broker_before = reconciles(&ctx, "Broker");
    let topic_before = reconciles(&ctx, "Topic");
    let writes_before = ctx.metrics.status_writes.get();
    let topic_writes_before = ctx.metrics.topic_writes.get();
    admin.take_calls();
    for second in 1..=600 {
        traffic(&admin, 10_000 + second * 4096);
        // Virtual time: one second of traffic per step, the window the bound is for.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let broker_reconciles = reconciles(&ctx, "Broker") - broker_before;
    let topic_reconciles = reconciles(&ctx, "Topic") - topic_before;
    let status_writes = ctx.metrics.status_writes.get() - writes_before;
    // The steady timer (RESYNC, 5 min) and nothing else: two per Broker, two per Topic,
    // with slack for timer alignment. Before the fix every status write triggered the
    // next reconcile and every Broker event requeued every Topic.
    assert!(
        broker_reconciles <= 4,
        "{broker_reconciles} Broker reconciles in 10 min"
    );
    assert!(
        topic_reconciles <= 3 * 4,
        "{topic_reconciles} Topic reconciles in 10 min"
    );
    assert!(
        status_writes <= 4,
        "{status_writes} status writes in 10 min"
    );
    assert_eq!(ctx.metrics.topic_writes.get() - topic_writes_before, 0);
    assert_eq!(
        creates(&admin.take_calls()),
        0,
        "no topic rewritten without drift"
    );

    controllers.abort();
}
