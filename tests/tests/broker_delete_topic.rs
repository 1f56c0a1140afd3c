//! DELETE_TOPIC_IN_BROKER over real TCP against the real broker: the topic's
//! ConsumeQueue files, queue offsets and consumer offsets go, the group's retry and DLQ
//! topics stay, pulls racing the deletion get clean answers, and a re-created topic
//! starts at offset 0 (also after a restart).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::create_topic_request as create_topic;
use e2e::broker_harness::{BrokerProcess, decode_records, pull, send_v2, with_fields};
use e2e::wait::{eventually, runtime};
use protocol::RemotingCommand;
use protocol::code::{request, response};

const TOPIC: &str = "DelTopic";
const RETRY: &str = "%RETRY%DelGroup";
const DLQ: &str = "%DLQ%DelGroup";
const GROUP: &str = "DelGroup";

fn delete_topic(topic: &str) -> RemotingCommand {
    with_fields(
        request::DELETE_TOPIC_IN_BROKER,
        &[("topic", topic.to_owned())],
    )
}

fn queue_fields(topic: &str, queue: i32) -> Vec<(&'static str, String)> {
    vec![("topic", topic.to_owned()), ("queueId", queue.to_string())]
}

async fn max_offset(c: &Client, topic: &str, queue: i32) -> i64 {
    let r = c
        .request(with_fields(
            request::GET_MAX_OFFSET,
            &queue_fields(topic, queue),
        ))
        .await
        .expect("max offset");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    r.ext_fields
        .get("offset")
        .and_then(|v| v.parse().ok())
        .expect("offset field")
}

/// Waits until dispatch has indexed `want` messages of the queue.
async fn wait_max_offset(c: &Client, topic: &str, queue: i32, want: i64) {
    let what = format!("{topic}/{queue} to reach max offset {want}");
    eventually(Duration::from_secs(5), &what, || async {
        max_offset(c, topic, queue).await == want
    })
    .await;
}

fn query_offset(topic: &str, queue: i32) -> RemotingCommand {
    let mut fields = queue_fields(topic, queue);
    fields.push(("consumerGroup", GROUP.to_owned()));
    with_fields(request::QUERY_CONSUMER_OFFSET, &fields)
}

/// Sends one message; returns the queue offset the broker assigned.
async fn send(c: &Client, topic: &str, queue: i32, body: &str) -> i64 {
    let r = c
        .request(send_v2(topic, queue, body.as_bytes(), ""))
        .await
        .expect("send");
    assert_eq!(r.code, response::SUCCESS, "{topic}: {:?}", r.remark);
    r.ext_fields
        .get("queueOffset")
        .and_then(|v| v.parse().ok())
        .expect("queueOffset field")
}

async fn topic_list(c: &Client) -> String {
    let r = c
        .request(RemotingCommand::bare_request(request::GET_ALL_TOPIC_CONFIG))
        .await
        .expect("topics");
    assert_eq!(r.code, response::SUCCESS);
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Pullers (plain from 0, and long-polling at the end of the queue) keep asking until
/// `stop`; returns every response code they got.
fn spawn_pullers(
    c: &Arc<Client>,
    stop: &Arc<AtomicBool>,
    pulls: &Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<Vec<i32>>> {
    (0..2)
        .map(|n| {
            let c = Arc::clone(c);
            let stop = Arc::clone(stop);
            let pulls = Arc::clone(pulls);
            tokio::spawn(async move {
                let mut codes = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    let (offset, hold) = if n == 0 { (0, None) } else { (3, Some(200)) };
                    let r = c
                        .request(pull(GROUP, TOPIC, 0, offset, 32, hold, "*"))
                        .await
                        .expect("the connection survives the deletion");
                    codes.push(r.code);
                    pulls.fetch_add(1, Ordering::Relaxed);
                }
                codes
            })
        })
        .collect()
}

/// Waits until the pullers have had `n` answers in all.
async fn pulls_answered(pulls: &AtomicUsize, n: usize) {
    eventually(Duration::from_secs(10), "pulls answered", || async {
        pulls.load(Ordering::Relaxed) >= n
    })
    .await;
}

#[test]
fn delete_topic_frees_queues_and_offsets_and_a_new_topic_starts_at_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = BrokerProcess::start_in(dir.path(), None, &[]);
    let cq_root = dir.path().join("store").join("consumequeue");
    let rt = runtime();
    rt.block_on(async {
        let c = Arc::new(Client::connect(b.port).await.expect("connect"));
        for topic in [TOPIC, RETRY, DLQ] {
            let r = c.request(create_topic(topic, 4)).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "{topic}: {:?}", r.remark);
        }
        for i in 0..12 {
            send(&c, TOPIC, i % 4, &format!("old-{i}")).await;
        }
        for topic in [RETRY, DLQ] {
            for i in 0..3 {
                send(&c, topic, 0, &format!("{topic}-{i}")).await;
            }
        }
        let mut commit = queue_fields(TOPIC, 0);
        commit.extend([
            ("consumerGroup", GROUP.to_owned()),
            ("commitOffset", "2".to_owned()),
        ]);
        let r = c
            .request(with_fields(request::UPDATE_CONSUMER_OFFSET, &commit))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let r = c.request(query_offset(TOPIC, 0)).await.unwrap();
        assert_eq!(r.ext_fields.get("offset"), Some("2"));
        wait_max_offset(&c, TOPIC, 0, 3).await;
        wait_max_offset(&c, DLQ, 0, 3).await;
        assert!(cq_root.join(TOPIC).join("0").is_dir());

        // Pulls racing the deletion: every answer is a RocketMQ status, the connection
        // stays up.
        let stop = Arc::new(AtomicBool::new(false));
        let pulls = Arc::new(AtomicUsize::new(0));
        let pullers = spawn_pullers(&c, &stop, &pulls);
        pulls_answered(&pulls, 50).await;
        let r = c.request(delete_topic(TOPIC)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        // As many again after the deletion.
        pulls_answered(&pulls, pulls.load(Ordering::Relaxed) + 50).await;
        stop.store(true, Ordering::Release);
        for p in pullers {
            for code in p.await.unwrap() {
                assert!(
                    [
                        response::SUCCESS,
                        response::PULL_NOT_FOUND,
                        response::PULL_OFFSET_MOVED,
                        response::PULL_RETRY_IMMEDIATELY,
                        response::TOPIC_NOT_EXIST,
                    ]
                    .contains(&code),
                    "unexpected pull answer {code}"
                );
            }
        }

        // Files, queue offsets, consumer offsets and the config are gone ...
        assert!(!cq_root.join(TOPIC).exists(), "ConsumeQueue files removed");
        for q in 0..4 {
            assert_eq!(max_offset(&c, TOPIC, q).await, 0);
        }
        // The committed offset 2 is gone: with no offset and the (absent) queue starting
        // at 0, RocketMQ's rule answers 0.
        let r = c.request(query_offset(TOPIC, 0)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert_eq!(r.ext_fields.get("offset"), Some("0"));
        assert!(!topic_list(&c).await.contains(&format!("\"{TOPIC}\"")));
        // ... while the group's retry and DLQ topics are untouched.
        for topic in [RETRY, DLQ] {
            assert_eq!(max_offset(&c, topic, 0).await, 3, "{topic}");
            assert!(cq_root.join(topic).join("0").is_dir(), "{topic}");
        }

        // The re-created topic starts at queue offset 0 with only its new message.
        let r = c.request(create_topic(TOPIC, 4)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(send(&c, TOPIC, 0, "new-0").await, 0);
        wait_max_offset(&c, TOPIC, 0, 1).await;
        let r = c
            .request(pull(GROUP, TOPIC, 0, 0, 32, None, "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let got = decode_records(&r.body);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].queue_offset, &got[0].body[..]), (0, &b"new-0"[..]));

        // Delete it again while its records are the newest in the CommitLog, so a restart
        // would re-dispatch them if the deletion were forgotten.
        send(&c, TOPIC, 1, "new-1").await;
        wait_max_offset(&c, TOPIC, 1, 1).await;
        let r = c.request(delete_topic(TOPIC)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    });

    // After a clean restart the deleted topic stays deleted.
    assert!(b.terminate().success());
    b.restart();
    rt.block_on(async {
        let c = Client::connect(b.port).await.expect("connect");
        for q in 0..4 {
            assert_eq!(max_offset(&c, TOPIC, q).await, 0, "queue {q}");
        }
        assert!(!cq_root.join(TOPIC).exists());
        assert_eq!(max_offset(&c, RETRY, 0).await, 3);
        assert_eq!(max_offset(&c, DLQ, 0).await, 3);
    });
}
