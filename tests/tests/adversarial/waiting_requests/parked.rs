//! Parked pulls woken all at once: toward a peer that never reads, and by a send on
//! their own connection.

use super::*;

/// 1,000 pulls parked on one connection whose peer never reads, plus one healthy
/// consumer's pull on the same queue: one send wakes them all. The healthy consumer gets
/// its message at once (not after the stuck connection is closed), the stuck one is
/// closed by the write deadline, and everything it parked is freed.
#[test]
fn parked_pulls_woken_together_toward_a_peer_that_never_reads() {
    let mut b = TempBroker::start(
        None,
        &[
            ("flushDiskType", "SYNC_FLUSH"),
            ("maxSuspendTimeoutMillis", "60000"),
            ("writeTimeoutMillis", "4000"),
        ],
    );
    let (port, http_port) = (b.broker.port, b.broker.http_port);
    runtime().block_on(async {
        let admin = Client::connect(port).await.unwrap();
        create_topics(&admin, &[("Wake", 1)]).await;
        let connections = metric(http_port, CONNECTIONS).await;
        let baseline = b.broker.anon_rss_kib().expect("rss");

        let mut stuck = Raw::connect(port, false, Some(4096)).await;
        let pulls: Vec<(i32, RemotingCommand)> = (1..=1000)
            .map(|i| (i, parked_pull("G_STUCK", "Wake", 0, 60_000)))
            .collect();
        stuck.send(&pulls).await;
        let healthy = Client::connect(port).await.unwrap();
        let healthy_pull = tokio::spawn(async move {
            let r = healthy
                .request(parked_pull("G_HEALTHY", "Wake", 0, 60_000))
                .await;
            (r, Instant::now(), healthy)
        });
        eventually(Duration::from_secs(15), "1001 parked pulls", || async {
            metric(http_port, PARKED).await == 1001.0
        })
        .await;

        // One send of 64 KiB wakes all 1001: the stuck peer's answers alone are ~64 MiB.
        let body = vec![b'w'; 64 * 1024];
        let sent_at = Instant::now();
        let r = admin.request(send_v2("Wake", 0, &body, "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let (answer, answered_at, healthy) = healthy_pull.await.unwrap();
        let answer = answer.expect("the healthy consumer's pull is answered");
        assert_eq!(answer.code, response::SUCCESS, "{:?}", answer.remark);
        assert_eq!(decode_records(&answer.body)[0].body, body);
        assert_eq!(
            metric(http_port, WRITE_TIMEOUTS).await,
            0.0,
            "the healthy pull was answered only after the stuck peer was cut"
        );
        let waited = answered_at.duration_since(sent_at);
        assert!(
            waited < Duration::from_secs(3),
            "the healthy consumer waited {waited:?} behind the stuck one"
        );
        // The healthy consumer goes on being served while the stuck one is still open.
        let r = healthy
            .request(pull("G_HEALTHY", "Wake", 0, 1, 32, Some(200), "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_NOT_FOUND);

        // The write deadline closes the stuck connection: draining it ends.
        let mut sink = vec![0u8; 1 << 16];
        let Raw { read, write } = stuck;
        let mut stream = read.into_inner().reunite(write).unwrap();
        eventually(Duration::from_secs(15), "a write timeout", || async {
            metric(http_port, WRITE_TIMEOUTS).await >= 1.0
        })
        .await;
        let drained = tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(drained.is_ok(), "the stuck connection was never closed");
        drop(stream);
        drop(healthy);
        settled(http_port, connections).await;
        assert_memory_within(&b.broker, baseline, 64);
        victim_is_served(&mut b.broker).await;
    });
}

/// One connection parks 1,024 pulls (`maxParkedPullsPerConnection`; the 1,025th is
/// refused SYSTEM_BUSY at once), then one send on the same connection wakes them all.
/// Under SYNC_FLUSH the message is dispatched after its group commit; every pull is
/// answered exactly once, with the message, promptly after the send's ack.
#[test]
fn a_thousand_pulls_woken_by_their_own_connection_are_each_answered_once() {
    let mut b = TempBroker::start(
        None,
        &[
            ("flushDiskType", "SYNC_FLUSH"),
            ("maxSuspendTimeoutMillis", "60000"),
        ],
    );
    let (port, http_port) = (b.broker.port, b.broker.http_port);
    runtime().block_on(async {
        let admin = Client::connect(port).await.unwrap();
        create_topics(&admin, &[("SelfWake", 1)]).await;
        let connections = metric(http_port, CONNECTIONS).await;
        let baseline = b.broker.anon_rss_kib().expect("rss");
        let refused_before = metric(http_port, "rocketmq_broker_parked_pulls_refused_total").await;

        let mut c = Raw::connect(port, false, None).await;
        let pulls: Vec<(i32, RemotingCommand)> = (1..=1025)
            .map(|i| (-i, parked_pull("G_SELF", "SelfWake", 0, 60_000)))
            .collect();
        c.send(&pulls).await;
        let refused = c
            .answers(1, Duration::from_secs(15), "the pull over the bound")
            .await;
        assert_eq!(
            refused[0].code,
            response::SYSTEM_BUSY,
            "{:?}",
            refused[0].remark
        );
        eventually(Duration::from_secs(15), "1024 parked pulls", || async {
            metric(http_port, PARKED).await == 1024.0
        })
        .await;
        assert_eq!(
            metric(http_port, "rocketmq_broker_parked_pulls_refused_total").await - refused_before,
            1.0
        );
        let refused_opaque = refused[0].opaque;
        assert!((-1025..=-1).contains(&refused_opaque));

        let body = b"wake everyone".to_vec();
        c.send(&[(1, send_v2("SelfWake", 0, &body, ""))]).await;
        let mut send_answered = false;
        let mut pulled = HashSet::new();
        // Well inside the pulls' 60 s hold: every answer must come from the wake-up by
        // the send's dispatch (after its group commit), none from the hold running out.
        let deadline = Instant::now() + Duration::from_secs(15);
        while pulled.len() < 1024 || !send_answered {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(a) = c.next_answer(left).await else {
                panic!("{} of 1024 woken pulls answered", pulled.len());
            };
            if a.opaque == 1 {
                assert_eq!(a.code, response::SUCCESS, "{:?}", a.remark);
                assert!(!send_answered, "the send answered twice");
                send_answered = true;
                continue;
            }
            assert!(
                (-1025..=-1).contains(&a.opaque) && a.opaque != refused_opaque,
                "opaque {}",
                a.opaque
            );
            assert!(pulled.insert(a.opaque), "pull {} answered twice", a.opaque);
            assert_eq!(a.code, response::SUCCESS, "{:?}", a.remark);
            let records = decode_records(&a.body);
            assert_eq!(records.len(), 1);
            assert_eq!(records[0].body, body);
        }
        assert!(
            c.next_answer(Duration::from_millis(300)).await.is_none(),
            "an extra answer"
        );
        assert_eq!(metric(http_port, PARKED).await, 0.0);
        drop(c);
        settled(http_port, connections).await;
        assert_memory_within(&b.broker, baseline, 64);
        victim_is_served(&mut b.broker).await;
    });
}
