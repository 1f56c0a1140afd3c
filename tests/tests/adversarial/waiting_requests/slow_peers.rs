//! A peer that does not read next to a healthy producer, and a shutdown with waiting
//! requests on every connection.

use super::*;

/// A peer that never reads pipelines fat pulls (its socket and its answer budget fill)
/// and then a thousand SYNC_FLUSH sends that wait for the group commit. A healthy
/// producer next to it keeps its usual latency, before the write deadline closes the
/// stuck connection.
#[test]
fn slow_reader_with_waiting_sends_does_not_delay_a_healthy_producer() {
    let mut b = TempBroker::start(
        None,
        &[
            ("flushDiskType", "SYNC_FLUSH"),
            ("writeTimeoutMillis", "5000"),
        ],
    );
    let (port, http_port) = (b.broker.port, b.broker.http_port);
    runtime().block_on(async {
        let admin = Client::connect(port).await.unwrap();
        create_topics(&admin, &[("Fat", 1), ("Slow", 4), ("Healthy", 1)]).await;
        let big = vec![b'f'; 64 * 1024];
        let fill = (0..32).map(|_| send_v2("Fat", 0, &big, "")).collect();
        for r in admin.pipeline(fill).await.unwrap() {
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        let connections = metric(http_port, CONNECTIONS).await;
        let baseline = b.broker.anon_rss_kib().expect("rss");

        let mut stuck = Raw::connect(port, false, Some(4096)).await;
        // Fat pulls first (16 MiB: the socket is full at once), then sends that wait for
        // the group commit behind them, then more fat pulls (over the answer budget).
        let fat = |i: i32| (i, pull("G_FAT", "Fat", 0, 0, 32, None, "*"));
        let mut requests: Vec<(i32, RemotingCommand)> = (1..=8).map(fat).collect();
        requests.extend((0..1000).map(|i| (1000 + i, send_v2("Slow", i % 4, b"slow", ""))));
        requests.extend((9..=48).map(fat));
        let bytes = encode(&requests);
        let writer = tokio::spawn(async move {
            // The broker stops reading once the answers' budget is full: this write may
            // never finish, which is the point.
            let _ = stuck.write.write_all(&bytes).await;
            stuck
        });

        let producer = Client::connect(port).await.unwrap();
        let started = Instant::now();
        for i in 0..100 {
            let r = producer
                .request(send_v2("Healthy", 0, format!("h{i}").as_bytes(), ""))
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        assert_eq!(
            metric(http_port, WRITE_TIMEOUTS).await,
            0.0,
            "the healthy producer ran into the stuck peer's write deadline ({:?})",
            started.elapsed()
        );
        eventually(Duration::from_secs(15), "the stuck peer cut", || async {
            metric(http_port, WRITE_TIMEOUTS).await >= 1.0
        })
        .await;
        writer.abort();
        let _ = writer.await;
        drop(producer);
        settled(http_port, connections).await;
        assert_memory_within(&b.broker, baseline, 96);
        // The stuck peer's sends were read and stored though their answers went nowhere
        // (at least the 256 `maxInFlightPerConnection` lets wait together).
        let mut stored = 0;
        for q in 0..4 {
            let r = admin.request(max_offset_request("Slow", q)).await.unwrap();
            stored += r
                .ext_fields
                .get("offset")
                .and_then(|o| o.parse::<i64>().ok())
                .unwrap_or(0);
        }
        assert!(
            stored >= 256,
            "only {stored} of the stuck peer's sends were stored"
        );
        // The healthy producer's 100 are all there, in order.
        let r = admin
            .request(pull("G_CHECK", "Healthy", 0, 0, 32, None, "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(decode_records(&r.body)[0].body, b"h0");
        victim_is_served(&mut b.broker).await;
    });
}

/// SIGTERM while eight connections each have pulls parked for a minute and SYNC_FLUSH
/// sends waiting: the broker exits cleanly and promptly (no driver keeps it alive), and
/// after a restart every send it acknowledged is there with its body.
#[test]
fn shutdown_with_waiting_requests_everywhere_exits_cleanly_and_keeps_acked_sends() {
    let mut b = TempBroker::start(
        None,
        &[
            ("flushDiskType", "SYNC_FLUSH"),
            ("maxSuspendTimeoutMillis", "60000"),
        ],
    );
    let (port, http_port) = (b.broker.port, b.broker.http_port);
    let rt = runtime();
    let (mut conns, mut acked) = rt.block_on(async {
        let admin = Client::connect(port).await.unwrap();
        create_topics(&admin, &[("Down", 4), ("DownPark", 2)]).await;
        let mut conns = Vec::new();
        for conn in 0..8i32 {
            let mut c = Raw::connect(port, false, None).await;
            let mut requests: Vec<(i32, RemotingCommand)> = (0..16)
                .map(|i| (-(i + 1), parked_pull("G_DOWN", "DownPark", i % 2, 60_000)))
                .collect();
            requests.extend((1..=400).map(|i| {
                let body = format!("down-{conn}-{i}");
                (i, send_v2("Down", i % 4, body.as_bytes(), ""))
            }));
            c.send(&requests).await;
            conns.push((conn, c));
        }
        eventually(Duration::from_secs(10), "128 parked pulls", || async {
            metric(http_port, PARKED).await == 128.0
        })
        .await;
        // Some sends are acknowledged; the rest may still wait when the signal comes.
        let mut acked = Vec::new();
        for (conn, c) in &mut conns {
            for a in c.answers(50, Duration::from_secs(10), "first acks").await {
                assert!(a.opaque > 0, "a parked pull answered early");
                assert_eq!(a.code, response::SUCCESS, "{:?}", a.remark);
                acked.push((offset_of(&a), format!("down-{conn}-{}", a.opaque)));
            }
        }
        // More sends on every connection, unread: the signal comes while they wait.
        for (conn, c) in &mut conns {
            let more: Vec<(i32, RemotingCommand)> = (401..=800)
                .map(|i| {
                    let body = format!("down-{conn}-{i}");
                    (i, send_v2("Down", i % 4, body.as_bytes(), ""))
                })
                .collect();
            c.send(&more).await;
        }
        (conns, acked)
    });
    b.broker.signal_term();
    // Far below the parked pulls' hold: shutdown does not wait for waiting requests.
    let status = b.broker.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit status {status}");
    // Whatever the broker acknowledged before it went is in the sockets: those sends
    // must survive too.
    let answered_late = rt.block_on(async {
        let mut late = 0;
        for (conn, c) in &mut conns {
            while let Some(a) = c.next_answer(Duration::from_secs(2)).await {
                if a.opaque > 0 && a.code == response::SUCCESS {
                    acked.push((offset_of(&a), format!("down-{conn}-{}", a.opaque)));
                    late += 1;
                }
            }
        }
        late
    });
    assert!(
        answered_late > 0,
        "no send was answered after the first 50 of each"
    );
    drop(conns);
    let log = b.broker.log();
    assert!(!log.contains("panicked"), "a panic during shutdown:\n{log}");
    b.broker.restart();
    rt.block_on(async {
        let c = Client::connect(port).await.unwrap();
        let offsets: Vec<i64> = acked.iter().map(|(o, _)| *o).collect();
        let bodies = bodies_at(&c, &offsets).await;
        for ((_, want), got) in acked.iter().zip(bodies) {
            assert_eq!(
                got.as_deref(),
                Some(want.as_bytes()),
                "an acknowledged send is gone"
            );
        }
        victim_is_served(&mut b.broker).await;
    });
}
