//! Pipelines of waiting and instant requests cut mid-flight, mixed under hostile
//! opaques, and oneway requests that wait.

use super::*;

/// Thousands of pipelined SYNC_FLUSH sends next to parked pulls, cut mid-flight by a
/// reset or a close, again and again from four connections at once: every waiting
/// request goes with its connection (parked-pull gauge and connection gauge back where
/// they were, memory flat), and afterwards a fresh pipeline is answered exactly once per
/// opaque with the message it sent.
#[test]
fn sync_flush_pipelines_cut_mid_flight_leave_nothing_behind() {
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
        create_topics(&admin, &[("CutMid", 4), ("CutPark", 1)]).await;
        let connections = metric(http_port, CONNECTIONS).await;
        // A first round warms the allocator; memory is measured from there.
        cut_mid_flight(port, 10, true).await;
        settled(http_port, connections).await;
        let baseline = b.broker.anon_rss_kib().expect("rss");

        for round in 0..6usize {
            let attackers: Vec<_> = (0..4usize)
                .map(|i| {
                    // Cut before any answer, after a few, after many; by reset or close.
                    let read = [0, 1, 64, 700][(round + i) % 4];
                    tokio::spawn(cut_mid_flight(port, read, (round + i) % 2 == 0))
                })
                .collect();
            for a in attackers {
                a.await.unwrap();
            }
        }
        settled(http_port, connections).await;
        assert_memory_within(&b.broker, baseline, 64);

        // A fresh pipeline: every opaque once, each answer naming its own message.
        let mut c = Raw::connect(port, false, None).await;
        let sends: Vec<(i32, RemotingCommand)> = (0..200)
            .map(|i| {
                let opaque = 7 * i - 500;
                let body = format!("fresh-{opaque}");
                (opaque, send_v2("CutMid", i % 4, body.as_bytes(), ""))
            })
            .collect();
        c.send(&sends).await;
        let answers = c
            .answers(200, Duration::from_secs(10), "the fresh pipeline")
            .await;
        let expected: HashSet<i32> = sends.iter().map(|(o, _)| *o).collect();
        assert_each_once(&answers, &expected, "fresh pipeline");
        for a in &answers {
            assert_eq!(a.code, response::SUCCESS, "{:?}", a.remark);
        }
        let offsets: Vec<i64> = answers.iter().map(offset_of).collect();
        let bodies = bodies_at(&admin, &offsets).await;
        for (a, body) in answers.iter().zip(bodies) {
            assert_eq!(
                body.as_deref(),
                Some(format!("fresh-{}", a.opaque).as_bytes()),
                "the answer to opaque {} names another message",
                a.opaque
            );
        }
        assert!(
            c.next_answer(Duration::from_millis(300)).await.is_none(),
            "an extra answer"
        );
        victim_is_served(&mut b.broker).await;
    });
}

/// What a request of the mixed pipeline is, and what its answer must say.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// A SYNC_FLUSH send: SUCCESS once durable.
    Send,
    /// The same, oneway: never answered.
    OnewaySend,
    /// A pull parked for 300 ms on an empty queue: PULL_NOT_FOUND when the hold ends.
    ShortPark,
    /// Answered at once.
    MaxOffset,
    Heartbeat,
    /// A pull that may not suspend: at once, whatever it finds.
    Peek,
}

fn mixed_requests(conn: usize) -> Vec<(i32, Kind, RemotingCommand)> {
    // Hostile opaques: extremes, negatives, zero, scattered; distinct per connection.
    let mut opaques: Vec<i32> = vec![i32::MIN, i32::MAX, 0, -1, 1];
    let mut x: u32 = 0x9e37_79b9 ^ (conn as u32).wrapping_mul(0x85eb_ca6b);
    while opaques.len() < 600 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let o = x as i32;
        if !opaques.contains(&o) {
            opaques.push(o);
        }
    }
    opaques
        .into_iter()
        .enumerate()
        .map(|(i, opaque)| {
            let kind = match (i * 7 + conn) % 10 {
                0..=3 => Kind::Send,
                4 => Kind::OnewaySend,
                5 => Kind::ShortPark,
                6 => Kind::MaxOffset,
                7 => Kind::Heartbeat,
                _ => Kind::Peek,
            };
            let body = format!("mixed-{conn}-{opaque}");
            let r = match kind {
                Kind::Send => send_v2("Mixed", (i % 4) as i32, body.as_bytes(), ""),
                Kind::OnewaySend => oneway(send_v2("Mixed", (i % 4) as i32, body.as_bytes(), "")),
                Kind::ShortPark => parked_pull("G_MIXED", "MixedPark", 0, 300),
                Kind::MaxOffset => max_offset_request("Mixed", (i % 4) as i32),
                Kind::Heartbeat => heartbeat(&format!("mixed@{conn}"), "G_MIXED_HB", Vec::new()),
                Kind::Peek => pull("G_PEEK", "Mixed", (i % 4) as i32, 0, 4, None, "*"),
            };
            (opaque, kind, r)
        })
        .collect()
}

/// Instant and waiting requests mixed on three connections at once, under extreme and
/// scattered opaques: every two-way request is answered exactly once with the result of
/// its own kind, no oneway request is answered, every acknowledged send names its own
/// message, and every acknowledged SYNC_FLUSH send survives a kill -9 right after its
/// answer (it was in the log, not only staged, when acknowledged).
#[test]
fn mixed_instant_and_waiting_requests_are_answered_once_and_acks_survive_kill9() {
    let mut b = TempBroker::start(None, &[("flushDiskType", "SYNC_FLUSH")]);
    let port = b.broker.port;
    let rt = runtime();
    let acked: Vec<(i64, String)> = rt.block_on(async {
        let admin = Client::connect(port).await.unwrap();
        create_topics(&admin, &[("Mixed", 4), ("MixedPark", 1)]).await;
        let conns: Vec<_> = (0..3usize)
            .map(|conn| {
                tokio::spawn(async move {
                    let requests = mixed_requests(conn);
                    let kinds: HashMap<i32, Kind> =
                        requests.iter().map(|(o, k, _)| (*o, *k)).collect();
                    let two_way: HashSet<i32> = requests
                        .iter()
                        .filter(|(_, k, _)| *k != Kind::OnewaySend)
                        .map(|(o, _, _)| *o)
                        .collect();
                    let frames: Vec<(i32, RemotingCommand)> =
                        requests.into_iter().map(|(o, _, r)| (o, r)).collect();
                    let mut c = Raw::connect(port, false, None).await;
                    // In three writes, so the reader meets frames split across reads.
                    for part in frames.chunks(211) {
                        c.send(part).await;
                    }
                    let answers = c
                        .answers(two_way.len(), Duration::from_secs(15), "mixed pipeline")
                        .await;
                    assert_each_once(&answers, &two_way, "mixed pipeline");
                    // Nothing more: a sentinel sent last is the next answer.
                    c.send(&[(424_242, max_offset_request("Mixed", 0))]).await;
                    let next = c
                        .next_answer(Duration::from_secs(5))
                        .await
                        .expect("sentinel");
                    assert_eq!(next.opaque, 424_242, "an extra answer after all were in");
                    let mut acked = Vec::new();
                    for a in answers {
                        let kind = kinds[&a.opaque];
                        match kind {
                            Kind::Send => {
                                assert_eq!(a.code, response::SUCCESS, "send: {:?}", a.remark);
                                acked.push((offset_of(&a), format!("mixed-{conn}-{}", a.opaque)));
                            }
                            Kind::ShortPark => assert_eq!(a.code, response::PULL_NOT_FOUND),
                            Kind::MaxOffset | Kind::Heartbeat => {
                                assert_eq!(a.code, response::SUCCESS, "{kind:?}: {:?}", a.remark)
                            }
                            Kind::Peek => assert!(
                                [response::SUCCESS, response::PULL_NOT_FOUND].contains(&a.code),
                                "peek: {} {:?}",
                                a.code,
                                a.remark
                            ),
                            Kind::OnewaySend => unreachable!("checked by assert_each_once"),
                        }
                    }
                    acked
                })
            })
            .collect();
        let mut acked = Vec::new();
        for c in conns {
            acked.extend(c.await.unwrap());
        }
        let offsets: HashSet<i64> = acked.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets.len(), acked.len(), "two acks name one offset");
        acked
    });
    // Every answer is in: kill at once, no flush, no shutdown hook.
    b.broker.kill9();
    b.broker.restart();
    rt.block_on(async {
        let c = Client::connect(port).await.unwrap();
        let offsets: Vec<i64> = acked.iter().map(|(o, _)| *o).collect();
        let bodies = bodies_at(&c, &offsets).await;
        let lost: Vec<&String> = acked
            .iter()
            .zip(&bodies)
            .filter(|((_, want), got)| got.as_deref() != Some(want.as_bytes()))
            .map(|((_, want), _)| want)
            .collect();
        assert!(
            lost.is_empty(),
            "{} of {} acknowledged sends lost or wrong after kill -9: {:?}",
            lost.len(),
            acked.len(),
            &lost[..lost.len().min(5)]
        );
        // The queues hold every acknowledged send and the oneway ones that were admitted
        // (a oneway send over `maxInFlightPerConnection` is dropped unanswered).
        let mut stored = 0;
        for q in 0..4 {
            let r = c.request(max_offset_request("Mixed", q)).await.unwrap();
            assert_eq!(r.code, response::SUCCESS);
            stored += r
                .ext_fields
                .get("offset")
                .and_then(|o| o.parse::<usize>().ok())
                .unwrap_or(0);
        }
        assert!(
            stored > acked.len(),
            "{stored} stored for {} acknowledged sends and 180 oneway ones",
            acked.len()
        );
        victim_is_served(&mut b.broker).await;
    });
}

/// Oneway requests that wait (SYNC_FLUSH sends, parked pulls) next to two-way ones on
/// one connection: no oneway request is ever answered, every two-way one is answered
/// once, and the oneway ones give their permits back (the connection's 64 are all free
/// again: 64 pipelined sends are all accepted afterwards).
#[test]
fn oneway_waiting_requests_are_never_answered_and_give_their_permits_back() {
    let mut b = TempBroker::start(
        None,
        &[
            ("flushDiskType", "SYNC_FLUSH"),
            ("maxInFlightPerConnection", "64"),
        ],
    );
    let (port, http_port) = (b.broker.port, b.broker.http_port);
    runtime().block_on(async {
        let admin = Client::connect(port).await.unwrap();
        create_topics(&admin, &[("Oneway", 4), ("OnewayPark", 1)]).await;
        let baseline = b.broker.anon_rss_kib().expect("rss");
        let mut c = Raw::connect(port, false, None).await;
        let mut requests = Vec::new();
        for i in 0..600i32 {
            let r = match i % 12 {
                // Parked for 500 ms, then answered into the void.
                0 => oneway(parked_pull("G_ONEWAY", "OnewayPark", 0, 500)),
                _ => oneway(send_v2("Oneway", i % 4, b"oneway", "")),
            };
            requests.push((-(i + 1), r));
        }
        // Two-way requests between them (positive opaques).
        for i in 0..20i32 {
            let at = (i as usize) * 30;
            requests.insert(at, (i + 1, max_offset_request("Oneway", i % 4)));
        }
        c.send(&requests).await;
        let answers = c
            .answers(20, Duration::from_secs(10), "the two-way requests")
            .await;
        assert_each_once(&answers, &(1..=20).collect(), "two-way among oneway");
        eventually(
            Duration::from_secs(10),
            "the oneway pulls' holds end",
            || async { metric(http_port, PARKED).await == 0.0 },
        )
        .await;
        // Whatever the oneway requests did, none of them answers.
        c.send(&[(777, max_offset_request("Oneway", 0))]).await;
        let next = c
            .next_answer(Duration::from_secs(5))
            .await
            .expect("sentinel");
        assert_eq!(next.opaque, 777, "a oneway request was answered");

        // All 64 of the connection's permits are free: 64 pipelined SYNC_FLUSH sends are
        // all accepted (a leaked permit would turn the 64th into SYSTEM_BUSY when they
        // wait together; they are pipelined in one write to make that likely).
        let mut busy = 0;
        for round in 0..5 {
            let sends: Vec<(i32, RemotingCommand)> = (0..64)
                .map(|i| {
                    (
                        10_000 * (round + 1) + i,
                        send_v2("Oneway", i % 4, b"two", ""),
                    )
                })
                .collect();
            c.send(&sends).await;
            let answers = c.answers(64, Duration::from_secs(10), "64 sends").await;
            assert_each_once(
                &answers,
                &sends.iter().map(|(o, _)| *o).collect(),
                "64 sends",
            );
            busy += answers
                .iter()
                .filter(|a| a.code == response::SYSTEM_BUSY)
                .count();
            for a in &answers {
                assert!(
                    [response::SUCCESS, response::SYSTEM_BUSY].contains(&a.code),
                    "{:?}",
                    a.remark
                );
            }
        }
        assert_eq!(busy, 0, "sends refused: permits of oneway requests leaked");
        assert_memory_within(&b.broker, baseline, 64);
        victim_is_served(&mut b.broker).await;
    });
}
