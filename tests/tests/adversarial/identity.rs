//! Transactions decided by what the broker stored, not by the client's `UNIQ_KEY`: an
//! attacker deciding many transactions with 30 KB keys pins no key, and the decisions
//! kept stay within `transactionDecisionMaxEntries` (a fixed size each).

#[path = "../support/raw_tx.rs"]
mod raw_tx;

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
