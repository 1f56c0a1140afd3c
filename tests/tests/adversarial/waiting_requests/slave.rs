//! SYNC_MASTER sends waiting for a slave that acknowledges only what the test allows.

use e2e::ha_peer::HaPeer;

use super::*;

async fn heartbeat_code(c: &Client) -> i32 {
    c.request(heartbeat("stall-admin@1", "G_STALL", Vec::new()))
        .await
        .unwrap()
        .code
}

/// A slave for the HA port that acknowledges only what the test allows: it reads the
/// master's stream (so its acks are never beyond what it was sent) and reports
/// `min(allowed, read)`, every 100 ms at least (its keep-alive).
struct FakeSlave {
    allow: Arc<AtomicI64>,
    read_to: Arc<AtomicI64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl FakeSlave {
    /// Connects with the harness's group secret, proves an empty log and starts
    /// reporting (0 at first: registered, acknowledging nothing).
    async fn connect(ha_port: u16, group: &str) -> Self {
        let (mut peer, status) = HaPeer::connect(ha_port, group, "e2e-ha-secret").await;
        assert_eq!(status, 0, "handshake refused");
        assert_eq!(peer.prove_empty().await, 0, "proof refused");
        let stream = peer.into_stream();

        let (mut rd, mut wr) = stream.into_split();
        let read_to = Arc::new(AtomicI64::new(0));
        let allow = Arc::new(AtomicI64::new(0));
        let reader = {
            let read_to = Arc::clone(&read_to);
            tokio::spawn(async move {
                loop {
                    let Ok(at) = rd.read_i64().await else { return };
                    let Ok(size) = rd.read_i32().await else {
                        return;
                    };
                    let mut body = vec![0u8; size.max(0) as usize];
                    if rd.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    read_to.fetch_max(at + i64::from(size), Ordering::AcqRel);
                }
            })
        };
        let reporter = {
            let allow = Arc::clone(&allow);
            let read_to = Arc::clone(&read_to);
            tokio::spawn(async move {
                loop {
                    let ack = allow
                        .load(Ordering::Acquire)
                        .min(read_to.load(Ordering::Acquire));
                    if wr.write_all(&ack.to_be_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        Self {
            allow,
            read_to,
            tasks: vec![reader, reporter],
        }
    }

    /// Acknowledges everything it has read and will read.
    fn ack_all(&self) {
        self.allow.store(i64::MAX, Ordering::Release);
    }

    /// Acknowledges nothing beyond what it has read by now.
    fn stall(&self) {
        let read = self.read_to.load(Ordering::Acquire);
        self.allow.store(read, Ordering::Release);
    }
}

impl Drop for FakeSlave {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// SYNC_MASTER + SYNC_FLUSH sends wait first for the group commit, then for the slave.
/// Pipelines of 2,000 are cut mid-flight while the slave acknowledges; then, with the
/// slave stalled, waiting sends hold their in-flight permits exactly: with
/// `maxInFlightTotal=64`, 64 waiting sends (two-way and oneway) take all of them, the
/// next 16 of the same pipeline are refused SYSTEM_BUSY at once and so is everyone else;
/// cutting the connection gives all 64 back, round after round. Then 64 more wait
/// together (none refused: nothing leaked) and one ack of the slave completes them all at
/// once, each answered once with its own message.
#[test]
fn stalled_slave_waits_hold_exactly_their_permits_until_their_connection_goes() {
    let ha_port = ports::free_port();
    let ha = ha_port.to_string();
    let mut b = TempBroker::start(
        None,
        &[
            ("brokerRole", "SYNC_MASTER"),
            ("flushDiskType", "SYNC_FLUSH"),
            ("haListenPort", &ha),
            ("syncFlushTimeout", "30000"),
            ("haSendHeartbeatInterval", "200"),
            ("maxInFlightTotal", "64"),
            ("maxInFlightPerConnection", "64"),
        ],
    );
    let (port, http_port) = (b.broker.port, b.broker.http_port);
    runtime().block_on(async {
        let admin = Client::connect(port).await.unwrap();
        create_topics(&admin, &[("Stall", 4), ("StallPark", 1)]).await;
        let slave = FakeSlave::connect(ha_port, "broker-e2e").await;
        eventually(
            Duration::from_secs(10),
            "the fake slave registered",
            || async {
                ha_status(&admin).await["haConnectionInfo"]
                    .as_array()
                    .is_some_and(|a| a.len() == 1)
            },
        )
        .await;
        let connections = metric(http_port, CONNECTIONS).await;
        let baseline = b.broker.anon_rss_kib().expect("rss");

        // Acks flowing: pipelines cut with sends waiting for the disk or the slave.
        slave.ack_all();
        for round in 0..4usize {
            let Raw {
                read: mut answers,
                write,
            } = Raw::connect(port, round % 2 == 0, None).await;
            // A parked pull first: the parked-pull gauge falling back to 0 says the cut
            // connection's driver has dropped everything it held.
            let mut requests = vec![(5000, parked_pull("G_STALL", "StallPark", 0, 60_000))];
            requests.extend((1..=2000).map(|i| (i, send_v2("Stall", i % 4, b"cut", ""))));
            let bytes = encode(&requests);
            let writer = tokio::spawn(async move {
                let mut write = write;
                let _ = write.write_all(&bytes).await;
                write
            });
            let mut acked = 0;
            // At most 64 are admitted (the rest refused at once): cut after some acks.
            while acked < 15 * round {
                let a = tokio::time::timeout(Duration::from_secs(10), answers.next())
                    .await
                    .expect("answers")
                    .expect("open")
                    .expect("frame");
                assert!(
                    [response::SUCCESS, response::SYSTEM_BUSY].contains(&a.code),
                    "{} {:?}",
                    a.code,
                    a.remark
                );
                acked += usize::from(a.code == response::SUCCESS);
            }
            drop((answers, writer.await.unwrap()));
            settled(http_port, connections).await;
        }
        slave.stall();

        for round in 0..6 {
            let mut c = Raw::connect(port, round % 2 == 0, None).await;
            let mut requests = vec![(5000, parked_pull("G_STALL", "StallPark", 0, 60_000))];
            for i in 1..=80 {
                let send = send_v2("Stall", i % 4, format!("r{round}-{i}").as_bytes(), "");
                requests.push((
                    i,
                    if (49..=64).contains(&i) {
                        oneway(send)
                    } else {
                        send
                    },
                ));
            }
            c.send(&requests).await;
            let refused = c
                .answers(16, Duration::from_secs(10), "the 16 over the bound")
                .await;
            assert_each_once(&refused, &(65..=80).collect(), "over the bound");
            for a in &refused {
                assert_eq!(a.code, response::SYSTEM_BUSY, "{:?}", a.remark);
            }
            assert!(
                c.next_answer(Duration::from_millis(300)).await.is_none(),
                "a send waiting for the stalled slave was answered"
            );
            // The broker-wide bound is full: everyone else is refused too.
            assert_eq!(heartbeat_code(&admin).await, response::SYSTEM_BUSY);
            drop(c);
            // The cut connection's waiting sends give every permit back.
            settled(http_port, connections).await;
            assert_eq!(heartbeat_code(&admin).await, response::SUCCESS);
        }

        // Nothing leaked: 64 sends wait together again, none refused.
        let mut c = Raw::connect(port, false, None).await;
        let sends: Vec<(i32, RemotingCommand)> = (1..=64)
            .map(|i| {
                (
                    i * 3,
                    send_v2("Stall", i % 4, format!("final-{}", i * 3).as_bytes(), ""),
                )
            })
            .collect();
        c.send(&sends).await;
        if let Some(a) = c.next_answer(Duration::from_millis(500)).await {
            panic!(
                "opaque {} answered {} ({:?}) before the slave acked: a permit leaked",
                a.opaque, a.code, a.remark
            );
        }
        // One ack completes all 64 at once.
        slave.ack_all();
        let answers = c
            .answers(64, Duration::from_secs(10), "the acked sends")
            .await;
        assert_each_once(
            &answers,
            &sends.iter().map(|(o, _)| *o).collect(),
            "acked sends",
        );
        for a in &answers {
            assert_eq!(a.code, response::SUCCESS, "{:?}", a.remark);
        }
        let offsets: Vec<i64> = answers.iter().map(offset_of).collect();
        let bodies = bodies_at(&admin, &offsets).await;
        for (a, body) in answers.iter().zip(bodies) {
            assert_eq!(
                body.as_deref(),
                Some(format!("final-{}", a.opaque).as_bytes())
            );
        }
        drop(c);
        eventually(Duration::from_secs(10), "connections back", || async {
            metric(http_port, CONNECTIONS).await == connections
        })
        .await;
        assert_memory_within(&b.broker, baseline, 64);
        victim_is_served(&mut b.broker).await;
        drop(slave);
    });
}
