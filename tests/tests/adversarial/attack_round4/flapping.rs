//! Role flapping: a master demoted and promoted again and again (NOTIFY_BROKER_ROLE_CHANGED
//! with rising epochs) while delayed messages fall due. The level tasks stop while the
//! broker is a slave and resume from their offsets when it is master again
//! (`Broker::until_master`); every delayed message is delivered exactly once, though
//! the demotions land between deliveries.

use std::collections::BTreeMap;
use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, ha_status, pull_queue, send_v2, with_fields};
use e2e::wait::{eventually, runtime};
use protocol::RemotingCommand;
use protocol::code::{request, response};

use crate::common::victim_is_served;

fn role_change(master_addr: &str, master_id: i64, epoch: i32) -> RemotingCommand {
    with_fields(
        request::NOTIFY_BROKER_ROLE_CHANGED,
        &[
            ("masterAddress", master_addr.to_owned()),
            ("masterHaAddress", "127.0.0.1:2".to_owned()),
            ("masterEpoch", epoch.to_string()),
            ("syncStateSetEpoch", epoch.to_string()),
            ("masterBrokerId", master_id.to_string()),
        ],
    )
}

async fn send_delayed(c: &Client, body: &str) {
    let r = c
        .request(send_v2("Flapped", 0, body.as_bytes(), "DELAY\u{1}1\u{2}"))
        .await
        .expect("send answered");
    assert_eq!(r.code, response::SUCCESS, "{body}: {:?}", r.remark);
}

#[test]
fn delayed_messages_are_delivered_once_across_role_flapping() {
    let mut b = TempBroker::start(None, &[("messageDelayLevel", "1s 2s")]);
    runtime().block_on(async {
        let admin = Client::connect(b.broker.port)
            .await
            .expect("admin connects");
        let own = b.broker.addr();
        let mut sent = 0;
        for _ in 0..30 {
            send_delayed(&admin, &format!("m{sent}")).await;
            sent += 1;
        }
        let mut epoch = ha_status(&admin).await["epoch"].as_i64().expect("epoch") as i32;
        let mut delivered = 0;
        for cycle in 0..8 {
            epoch += 1;
            let r = admin
                .request(role_change("127.0.0.1:1", 99, epoch))
                .await
                .expect("demotion answered");
            assert_eq!(r.code, response::SUCCESS, "demote {cycle}: {:?}", r.remark);
            // The id the demoted broker registers with: a promotion names it by that.
            let me = ha_status(&admin).await["brokerId"]
                .as_i64()
                .expect("brokerId");
            epoch += 1;
            let r = admin
                .request(role_change(&own, me, epoch))
                .await
                .expect("promotion answered");
            assert_eq!(r.code, response::SUCCESS, "promote {cycle}: {:?}", r.remark);
            eventually(Duration::from_secs(20), "master again", || async {
                let s = ha_status(&admin).await;
                s["master"].as_bool() == Some(true)
            })
            .await;
            for _ in 0..2 {
                send_delayed(&admin, &format!("m{sent}")).await;
                sent += 1;
            }
            // Each master phase delivers something before the next demotion, so the
            // demotions land while the level task is delivering.
            eventually(
                Duration::from_secs(20),
                "a delivery in this phase",
                || async { pull_queue(&admin, "reader", "Flapped", 0).await.len() > delivered },
            )
            .await;
            delivered = pull_queue(&admin, "reader", "Flapped", 0).await.len();
        }
        eventually(
            Duration::from_secs(30),
            "every delayed message is delivered",
            || async { pull_queue(&admin, "reader", "Flapped", 0).await.len() >= sent },
        )
        .await;
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for m in pull_queue(&admin, "reader", "Flapped", 0).await {
            *seen
                .entry(String::from_utf8_lossy(&m.body).into_owned())
                .or_default() += 1;
        }
        let duplicated: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            duplicated.is_empty(),
            "delivered more than once: {duplicated:?}"
        );
        assert_eq!(seen.len(), sent, "{seen:?}");
        victim_is_served(&mut b.broker).await;
    });
}
