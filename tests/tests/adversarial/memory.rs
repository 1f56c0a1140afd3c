//! Memory one connection can pin with requests in progress: every request holds its
//! frame until answered, and a parked pull is held for up to `maxSuspendTimeoutMillis`.
//! `maxInFlightBytesPerConnection` bounds the bytes, not just the count.

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, pull, send_v2};
use e2e::wait::runtime;
use protocol::code::response;

use crate::common::{refusals, victim_is_served};

#[test]
fn parked_pulls_with_huge_frames_are_bounded_in_bytes() {
    let mut b = TempBroker::start(None, &[("maxInFlightBytesPerConnection", "8388608")]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c.request(send_v2("Pinned", 0, b"x", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let baseline = b.broker.anon_rss_kib().expect("rss");
        // 1 MiB tag expressions matching nothing, parked for a minute: 8 fit in 8 MiB.
        let tags = vec!["never"; 170_000].join("||");
        let pulls = (0..32).map(|_| {
            let mut p = pull("pin-group", "Pinned", 0, 1, 32, Some(60_000), &tags);
            p.ext_fields.insert("suspendTimeoutMillis", "60000");
            p
        });
        let answers: Vec<_> = futures::future::join_all(pulls.map(|p| {
            let c = &c;
            async move { tokio::time::timeout(Duration::from_secs(5), c.request(p)).await }
        }))
        .await;
        // Parked ones do not answer within the 5 s; the refused ones answered at once.
        let busy = answers
            .iter()
            .filter(|a| matches!(a, Ok(Ok(r)) if r.code == response::SYSTEM_BUSY))
            .count();
        assert!(busy >= 24, "{busy} of 32 refused");
        assert!(refusals(b.broker.http_port, "maxInFlightBytes").await >= 24.0);
        let grown_mib = b
            .broker
            .anon_rss_kib()
            .expect("rss")
            .saturating_sub(baseline)
            / 1024;
        assert!(grown_mib < 64, "resident memory grew {grown_mib} MiB");
        victim_is_served(&mut b.broker).await;
    });
}

/// The broker-wide byte budget holds across connections: two connections each within
/// their own budget together meet `maxInFlightBytesTotal`.
#[test]
fn in_flight_bytes_are_bounded_across_connections() {
    let mut b = TempBroker::start(
        None,
        &[
            ("maxInFlightBytesPerConnection", "67108864"),
            ("maxInFlightBytesTotal", "8388608"),
        ],
    );
    runtime().block_on(async {
        let setup = Client::connect(b.broker.port).await.expect("connect");
        let r = setup.request(send_v2("Pinned", 0, b"x", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let tags = vec!["never"; 170_000].join("||");
        let conns = [
            Client::connect(b.broker.port).await.expect("a"),
            Client::connect(b.broker.port).await.expect("b"),
        ];
        let mut busy = 0;
        for c in &conns {
            let answers = futures::future::join_all((0..8).map(|_| {
                let p = pull("pin-group", "Pinned", 0, 1, 32, Some(60_000), &tags);
                async move { tokio::time::timeout(Duration::from_secs(3), c.request(p)).await }
            }))
            .await;
            busy += answers
                .iter()
                .filter(|a| matches!(a, Ok(Ok(r)) if r.code == response::SYSTEM_BUSY))
                .count();
        }
        assert!(
            busy >= 8,
            "only {busy} of 16 refused by the broker-wide budget"
        );
        victim_is_served(&mut b.broker).await;
    });
}
