//! Durability across restarts: committed offsets and topics survive a clean restart
//! (SIGTERM), and under SYNC_FLUSH every message acknowledged with SEND_OK survives
//! kill -9.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use e2e::Client;
use e2e::NameServer;
use e2e::broker_harness::{BrokerProcess, decode_records, pull, send_v2, with_fields};
use e2e::metrics::wait_dispatched;
use e2e::nameserver::Options;
use e2e::wait::{eventually, runtime};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use protocol::code::{request, response};

fn query_offset(group: &str, topic: &str, queue: i32) -> protocol::RemotingCommand {
    with_fields(
        request::QUERY_CONSUMER_OFFSET,
        &[
            ("consumerGroup", group.to_owned()),
            ("topic", topic.to_owned()),
            ("queueId", queue.to_string()),
        ],
    )
}

#[test]
fn offsets_topics_and_messages_survive_a_clean_restart() {
    let ns = NameServer::start(Options::default());
    let dir = tempfile::tempdir().unwrap();
    let mut b = BrokerProcess::start_in(dir.path(), Some(ns.port), &[]);
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.port).await.unwrap();
        for i in 0..5 {
            let r = c
                .request(send_v2("Durable", 2, format!("m{i}").as_bytes(), ""))
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS);
        }
        let u = with_fields(
            request::UPDATE_CONSUMER_OFFSET,
            &[
                ("consumerGroup", "DG".to_owned()),
                ("topic", "Durable".to_owned()),
                ("queueId", "2".to_owned()),
                ("commitOffset", "3".to_owned()),
            ],
        );
        assert_eq!(c.request(u).await.unwrap().code, response::SUCCESS);
    });
    let status = b.terminate();
    assert!(
        status.success(),
        "clean exit on SIGTERM: {status}; log:\n{}",
        b.log()
    );
    let store = dir.path().join("store");
    assert!(
        !store.join("abort").exists(),
        "abort file removed on clean shutdown"
    );
    let offsets = std::fs::read_to_string(store.join("config/consumerOffset.json")).unwrap();
    assert!(offsets.contains("\"Durable@DG\":{2:3}"), "{offsets}");
    assert!(
        b.log().contains("unregistered"),
        "UNREGISTER_BROKER sent; log:\n{}",
        b.log()
    );

    b.restart();
    rt.block_on(async {
        let c = Client::connect(b.port).await.unwrap();
        let r = c.request(query_offset("DG", "Durable", 2)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(r.ext_fields.get("offset"), Some("3"));
        let r = c
            .request(pull("DG", "Durable", 2, 3, 32, None, "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let bodies: Vec<_> = decode_records(&r.body)
            .into_iter()
            .map(|m| m.body)
            .collect();
        assert_eq!(bodies, vec![b"m3".to_vec(), b"m4".to_vec()]);
        let all = c
            .request(protocol::RemotingCommand::bare_request(
                request::GET_ALL_TOPIC_CONFIG,
            ))
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&all.body).contains("\"Durable\""));
    });
}

/// Sends each producer keeps in flight on its connection.
const IN_FLIGHT_PER_PRODUCER: usize = 8;

#[test]
fn kill_9_under_sync_flush_keeps_every_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = BrokerProcess::start_in(dir.path(), None, &[("flushDiskType", "SYNC_FLUSH")]);
    let rt = runtime();
    let acked: Vec<String> = rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(AtomicUsize::new(0));
        let mut producers = Vec::new();
        for p in 0..4 {
            let port = b.port;
            let stop = Arc::clone(&stop);
            let acks = Arc::clone(&acks);
            producers.push(tokio::spawn(async move {
                // Sends pipelined on one connection, as clients send asynchronously: the
                // broker answers them in batches as group commits cover them.
                let c = Arc::new(Client::connect(port).await.unwrap());
                let mut in_flight = FuturesUnordered::new();
                let mut acked = Vec::new();
                for i in 0.. {
                    if in_flight.len() < IN_FLIGHT_PER_PRODUCER && !stop.load(Ordering::Relaxed) {
                        let (c, body) = (Arc::clone(&c), format!("p{p}-{i}"));
                        in_flight.push(async move {
                            let answer = c
                                .request(send_v2("Crash", p % 2, body.as_bytes(), ""))
                                .await;
                            (body, answer)
                        });
                        continue;
                    }
                    // Answers still in flight when the broker dies count as unacknowledged.
                    let Some((body, answer)) = in_flight.next().await else {
                        break;
                    };
                    match answer {
                        Ok(r) if r.code == response::SUCCESS => {
                            acked.push(body);
                            acks.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) => panic!("unexpected answer {} {:?}", r.code, r.remark),
                        Err(_) => break,
                    }
                }
                acked
            }));
        }
        // The kill lands under load, well after the first acknowledgements.
        eventually(Duration::from_secs(30), "1000 SEND_OKs", || async {
            acks.load(Ordering::Relaxed) >= 1000
        })
        .await;
        acked_before_kill(&stop, producers, &mut b).await
    });
    assert!(
        acked.len() > 10,
        "the load produced only {} acks",
        acked.len()
    );
    assert!(
        dir.path().join("store/abort").exists(),
        "kill -9 leaves the abort file"
    );

    b.restart();
    rt.block_on(async {
        // Pulls stop at PULL_NOT_FOUND: the recovered CommitLog must be in the queues.
        wait_dispatched(b.http_port, Duration::from_secs(20)).await;
        let c = Client::connect(b.port).await.unwrap();
        let mut stored = std::collections::HashSet::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        for queue in 0..2 {
            let mut offset = 0i64;
            loop {
                let r = c
                    .request(pull("CG", "Crash", queue, offset, 32, None, "*"))
                    .await
                    .unwrap();
                match r.code {
                    response::SUCCESS => {
                        for m in decode_records(&r.body) {
                            stored.insert(String::from_utf8(m.body).unwrap());
                        }
                        offset = r
                            .ext_fields
                            .get("nextBeginOffset")
                            .unwrap()
                            .parse()
                            .unwrap();
                    }
                    response::PULL_NOT_FOUND => break,
                    other => panic!("pull answered {other} {:?}", r.remark),
                }
                assert!(Instant::now() < deadline);
            }
        }
        let missing: Vec<_> = acked.iter().filter(|m| !stored.contains(*m)).collect();
        assert!(
            missing.is_empty(),
            "{} of {} acknowledged messages lost: {:?}",
            missing.len(),
            acked.len(),
            &missing[..missing.len().min(5)]
        );
    });
}

/// Kills the broker while the producers run, then collects what each had acknowledged.
async fn acked_before_kill(
    stop: &AtomicBool,
    producers: Vec<tokio::task::JoinHandle<Vec<String>>>,
    b: &mut BrokerProcess,
) -> Vec<String> {
    b.kill9();
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for p in producers {
        all.extend(p.await.unwrap());
    }
    all
}
