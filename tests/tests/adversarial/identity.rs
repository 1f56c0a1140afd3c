//! Transactions decided by what the broker stored, not by the client's `UNIQ_KEY`: an
//! attacker deciding many transactions with 30 KB keys pins no key, and the decisions
//! kept stay within `transactionDecisionMaxEntries` (a fixed size each); check-backs,
//! which carry a pending half's body, go only to an account allowed its topic.

#[path = "../support/raw_tx.rs"]
pub(crate) mod raw_tx;

use std::time::Duration;

use e2e::broker_harness::TempBroker;
use e2e::wait::runtime;
use protocol::code::response;

use crate::common::{metric, victim_is_served};

/// Decisions the attacker makes; the bound below holds per entry, whatever the count:
/// an entry keeps no key, so 100,000 decisions take 100,000 × 65 bytes (≈ 6.5 MB).
const DECISIONS: usize = 1_500;
const MAX_ENTRIES: usize = 500;
const KEY_BYTES: usize = 30 * 1024;
/// Anonymous memory the broker may grow by over the attack: with keys pinned, 1,500 ×
/// 30 KB (twice: map and expiry order) would be about 90 MiB.
const RSS_GROWTH_BOUND_KIB: u64 = 48 * 1024;

#[test]
fn decisions_with_30kb_keys_pin_no_key_and_stay_bounded() {
    let max_entries = MAX_ENTRIES.to_string();
    let mut b = TempBroker::start(
        None,
        &[
            ("transactionDecisionMaxEntries", &max_entries),
            ("transactionTimeOut", "600000"),
        ],
    );
    runtime().block_on(async {
        let attacker_ip = std::net::IpAddr::from([127, 0, 0, 2]);
        let mut attacker = raw_tx::RawTx::connect(b.broker.port, attacker_ip, "PG_BIGKEYS", None)
            .await
            .expect("attacker connects");
        // Warm-up: the first transaction allocates the broker's steady-state buffers.
        let warm = attacker
            .send_half("BigKeys", "warm", "WARM")
            .await
            .expect("half");
        let r = attacker
            .end(warm, raw_tx::ROLLBACK, false)
            .await
            .expect("end");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let baseline = b.broker.anon_rss_kib().expect("rss");
        for i in 0..DECISIONS {
            let key = format!("{i:08}{}", "k".repeat(KEY_BYTES));
            let half = attacker
                .send_half("BigKeys", "x", &key)
                .await
                .expect("half");
            let r = attacker
                .end(half, raw_tx::ROLLBACK, false)
                .await
                .expect("end");
            assert_eq!(r.code, response::SUCCESS, "{i}: {:?}", r.remark);
        }
        let port = b.broker.http_port;
        let tracked = metric(port, "rocketmq_transaction_decisions_tracked").await;
        assert!(tracked <= MAX_ENTRIES as f64, "{tracked} decisions tracked");
        let evicted = metric(port, "rocketmq_transaction_decisions_evicted_total").await;
        assert!(
            evicted >= (DECISIONS + 1 - MAX_ENTRIES) as f64,
            "{evicted} evicted"
        );
        let bytes = metric(port, "rocketmq_transaction_decisions_bytes").await;
        assert!(bytes <= (MAX_ENTRIES * 65 * 4) as f64, "{bytes} bytes held");
        let grown = b
            .broker
            .anon_rss_kib()
            .expect("rss")
            .saturating_sub(baseline);
        println!("anon RSS grew by {grown} KiB over {DECISIONS} decisions with 30 KB keys");
        assert!(
            grown <= RSS_GROWTH_BOUND_KIB,
            "anon RSS grew by {grown} KiB (bound {RSS_GROWTH_BOUND_KIB} KiB)"
        );
        victim_is_served(&mut b.broker).await;
    });
}

/// With the ACL on, a check-back (which carries the pending half's body) goes only to a
/// producer connection whose account may publish to the half's topic. Another account
/// heart-beating under the same producer group, later (so the most recent member),
/// never receives it; the owner does, every round.
#[test]
fn check_backs_go_only_to_accounts_that_may_publish_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let acl_path = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl_path,
        "accounts:\n  - accessKey: owner01\n    secretKey: ownerSecret1\n    defaultTopicPerm: DENY\n    \
         defaultGroupPerm: PUB|SUB\n    topicPerms: [TxSecret=PUB|SUB]\n  \
         - accessKey: snoop001\n    secretKey: snoopSecret1\n    defaultTopicPerm: DENY\n    \
         defaultGroupPerm: PUB|SUB\n    topicPerms: [Other=PUB|SUB]\n",
    )
    .unwrap();
    let acl = acl_path.display().to_string();
    let mut b = TempBroker::start(
        None,
        &[
            ("aclEnable", "true"),
            ("aclFile", &acl),
            ("transactionCheckInterval", "500"),
            ("transactionTimeOut", "500"),
        ],
    );
    runtime().block_on(async {
        let mut owner = raw_tx::RawTx::connect(
            b.broker.port,
            [127, 0, 0, 1].into(),
            "PG_SHARED",
            Some(("owner01", "ownerSecret1")),
        )
        .await
        .unwrap();
        owner
            .send_half("TxSecret", "the-secret-body", "K-SECRET")
            .await
            .expect("owner's half");
        let mut snoop = raw_tx::RawTx::connect(
            b.broker.port,
            [127, 0, 0, 2].into(),
            "PG_SHARED",
            Some(("snoop001", "snoopSecret1")),
        )
        .await
        .unwrap();
        for round in 0..2 {
            let asked = owner.check_back(Duration::from_secs(20)).await.unwrap();
            assert_eq!(
                asked.map(|c| c.body).as_deref(),
                Some("the-secret-body"),
                "round {round}: the owner was not asked; log:\n{}",
                b.broker.log()
            );
            let leaked = snoop.check_back(Duration::from_millis(1)).await.unwrap();
            assert!(
                leaked.is_none(),
                "round {round}: the snoop received the pending half's body"
            );
        }
        assert!(
            b.broker.running(),
            "the broker died; log:\n{}",
            b.broker.log()
        );
    });
}
