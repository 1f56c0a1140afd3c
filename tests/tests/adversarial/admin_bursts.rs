//! A burst of admin topic creates over several connections while another client sends.
//! Every create rewrites `topics.json` (three fsyncs); they once ran inline on the async
//! workers, so a burst stalled every other client behind the disk, and each create got
//! slower as the file grew. Now the rewrites are group-committed on a writer thread: the
//! creates all succeed and are on disk when answered (they survive a SIGKILL), the
//! victim keeps being served, and the broker stays up.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use e2e::Client;
use e2e::broker_harness::{BrokerProcess, TempBroker, send_v2, with_fields};
use e2e::wait::runtime;
use protocol::RemotingCommand;
use protocol::body::TopicConfigSerializeWrapper;
use protocol::code::{request, response};

use crate::common::victim_is_served;

const TOPICS: usize = 500;
const CONNECTIONS: usize = 8;
/// Creates one connection has in flight at once (below `maxInFlightPerConnection`).
const PIPELINE: usize = 16;

fn create_topic(topic: &str) -> RemotingCommand {
    with_fields(
        request::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", topic.to_owned()),
            ("defaultTopic", "TBW102".to_owned()),
            ("readQueueNums", "4".to_owned()),
            ("writeQueueNums", "4".to_owned()),
            ("perm", "6".to_owned()),
            ("topicFilterType", "SINGLE_TAG".to_owned()),
            ("order", "false".to_owned()),
        ],
    )
}

fn burst_topic(n: usize) -> String {
    format!("Burst_{n:04}")
}

/// The topic names the broker answers GET_ALL_TOPIC_CONFIG with.
async fn topics_served(b: &BrokerProcess) -> BTreeSet<String> {
    let c = Client::connect(b.port).await.expect("connect");
    let r = c
        .request(RemotingCommand::bare_request(request::GET_ALL_TOPIC_CONFIG))
        .await
        .expect("topic configs");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let all: TopicConfigSerializeWrapper = protocol::body::decode(&r.body).expect("decode");
    all.topic_config_table.into_keys().collect()
}

/// The topic names in `topics.json`.
fn topics_on_disk(b: &BrokerProcess) -> BTreeSet<String> {
    let path = b.dir().join("store/config/topics.json");
    let text = std::fs::read(&path).expect("topics.json");
    let on_disk: TopicConfigSerializeWrapper = protocol::body::decode(&text).expect("parses");
    on_disk.topic_config_table.into_keys().collect()
}

fn assert_all_created(what: &str, names: &BTreeSet<String>) {
    let missing: Vec<String> = (0..TOPICS)
        .map(burst_topic)
        .filter(|t| !names.contains(t))
        .collect();
    assert!(missing.is_empty(), "{what} lacks {missing:?}");
}

#[test]
fn a_burst_of_topic_creates_is_durable_and_the_victim_is_served() {
    let mut b = TempBroker::start(None, &[]);
    let port = b.broker.port;
    runtime().block_on(async {
        let victim = Client::connect(port).await.expect("victim connects");
        let burst_over = Arc::new(AtomicBool::new(false));
        let over = Arc::clone(&burst_over);
        // The victim sends one message after another for as long as the burst lasts;
        // every send must succeed.
        let sender = tokio::spawn(async move {
            let mut during_burst = 0u64;
            while !over.load(Ordering::Acquire) {
                let r = victim
                    .request(send_v2("VictimTopic", 0, b"victim", ""))
                    .await
                    .expect("victim send answered");
                assert_eq!(r.code, response::SUCCESS, "victim send: {:?}", r.remark);
                during_burst += 1;
            }
            during_burst
        });

        let attackers: Vec<_> = (0..CONNECTIONS)
            .map(|a| {
                tokio::spawn(async move {
                    let c = Client::connect(port).await.expect("attacker connects");
                    let mine: Vec<String> =
                        (a..TOPICS).step_by(CONNECTIONS).map(burst_topic).collect();
                    for chunk in mine.chunks(PIPELINE) {
                        let answers = c
                            .pipeline(chunk.iter().map(|t| create_topic(t)).collect())
                            .await
                            .expect("creates answered");
                        for (topic, r) in chunk.iter().zip(answers) {
                            assert_eq!(r.code, response::SUCCESS, "create {topic}: {:?}", r.remark);
                        }
                    }
                })
            })
            .collect();
        for attacker in attackers {
            attacker.await.expect("every create succeeded");
        }
        burst_over.store(true, Ordering::Release);
        let sent = sender.await.expect("every victim send succeeded");
        assert!(sent >= 1, "the victim was served during the burst");

        // Answered means written: the file already holds every topic.
        assert_all_created("topics.json after the answers", &topics_on_disk(&b.broker));
        assert_all_created("GET_ALL_TOPIC_CONFIG", &topics_served(&b.broker).await);
        victim_is_served(&mut b.broker).await;
    });

    // No shutdown flush: what the broker answered must already be on disk.
    b.broker.kill9();
    b.broker.restart();
    runtime().block_on(async {
        assert_all_created(
            "GET_ALL_TOPIC_CONFIG after SIGKILL and restart",
            &topics_served(&b.broker).await,
        );
        victim_is_served(&mut b.broker).await;
    });
}
