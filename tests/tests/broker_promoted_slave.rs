//! A broker started as a slave and promoted at runtime (NOTIFY_BROKER_ROLE_CHANGED, what
//! the operator sends on failover) runs what only a master runs: the transaction
//! checker asks producers about halves left undecided, and delayed messages are
//! delivered. Before, both services looked only at the configured role and never
//! started on a promoted slave: its pending transactions stayed pending and its
//! delayed messages were never delivered.
#![allow(clippy::unwrap_used)]

#[path = "support/raw_tx.rs"]
mod raw_tx;

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, pull_queue, send_v2, with_fields};
use e2e::wait::{eventually, runtime};
use protocol::code::{request, response};

const SLAVE: &[(&str, &str)] = &[
    ("brokerRole", "SLAVE"),
    ("brokerId", "1"),
    // Promoted without a slave to follow it: ASYNC_MASTER, so what it stores is visible
    // at once (a SYNC_MASTER hides what no slave has confirmed).
    ("haMasterRole", "ASYNC_MASTER"),
    ("transactionCheckInterval", "500"),
    ("transactionTimeOut", "500"),
    ("messageDelayLevel", "1s 2s"),
];

async fn promote(c: &Client, addr: String) {
    let r = c
        .request(with_fields(
            request::NOTIFY_BROKER_ROLE_CHANGED,
            &[
                ("masterAddress", addr),
                ("masterEpoch", "1".to_owned()),
                ("syncStateSetEpoch", "1".to_owned()),
                ("masterBrokerId", "1".to_owned()),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
}

#[test]
fn a_promoted_slave_checks_transactions_and_delivers_delayed_messages() {
    let b = TempBroker::start(None, SLAVE);
    runtime().block_on(async {
        let admin = Client::connect(b.broker.port).await.unwrap();
        // As a slave it refuses writes.
        let r = admin
            .request(send_v2("Promoted", 0, b"early", ""))
            .await
            .unwrap();
        assert_ne!(r.code, response::SUCCESS, "a slave took a write");
        promote(&admin, b.broker.addr()).await;

        // A half whose END_TRANSACTION never comes: the checker must ask its producer.
        let mut producer =
            raw_tx::RawTx::connect(b.broker.port, [127, 0, 0, 1].into(), "PG_PROMOTED", None)
                .await
                .unwrap();
        let r = producer
            .send_half_answer("PromotedTx", "pending", "K1")
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "half: {:?}", r.remark);
        let asked = producer.check_back(Duration::from_secs(20)).await.unwrap();
        let Some(asked) = asked else {
            let (_, metrics) = e2e::http::get(b.broker.http_port, "/metrics")
                .await
                .unwrap();
            let tx: Vec<&str> = metrics
                .lines()
                .filter(|l| l.contains("transaction") && !l.starts_with('#'))
                .collect();
            panic!(
                "the promoted broker never asked the producer; transaction metrics:\n{}\nlog:\n{}",
                tx.join("\n"),
                b.broker.log()
            )
        };
        assert_eq!(asked.body, "pending");

        // A message delayed by level 1 (1 s) reaches its topic.
        let r = admin
            .request(send_v2("PromotedDelay", 0, b"later", "DELAY\u{1}1\u{2}"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "delayed: {:?}", r.remark);
        eventually(
            Duration::from_secs(20),
            "the delayed message is delivered",
            || async {
                pull_queue(&admin, "reader", "PromotedDelay", 0)
                    .await
                    .iter()
                    .any(|m| m.body == b"later")
            },
        )
        .await;
    });
}
