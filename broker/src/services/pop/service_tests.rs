//! The POP service over a whole broker (in-memory store): pops, acks, redeliveries, the
//! DLQ, FIFO, filters, caps, long polling, restarts and the 4.x refusals.

use std::sync::Arc;
use std::time::Duration;

use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::header::{PullMessageRequestHeader, UpdateConsumerOffsetRequestHeader};
use protocol::message::{ConsumerOffset, PullSysFlag, QueueOffset};
use store::config_files::SubscriptionGroupConfig;

use super::*;
use crate::names::perm;
use crate::services::put_path::PutPermit;
use crate::test_fixture::{self, wait_until};

fn broker(extra: &str) -> (tempfile::TempDir, Arc<Broker>) {
    let dir = tempfile::tempdir().unwrap();
    let b = test_fixture::broker(dir.path(), extra);
    b.topics
        .get_or_create_system("T", 1, perm::READ | perm::WRITE, 0);
    (dir, b)
}

async fn put(b: &Broker, topic: &str, bodies: &[(&str, &str)]) {
    let before = b.store.max_offset_in_queue(topic, 0).get();
    for (body, tag) in bodies {
        let props = if tag.is_empty() {
            String::new()
        } else {
            format!("TAGS\u{1}{tag}")
        };
        let m = test_fixture::message(topic, 0, body, props);
        b.store.put_message(&m, PutPermit::for_tests()).await;
    }
    let n = before + bodies.len() as i64;
    wait_until(topic, || {
        b.store.max_offset_in_queue(topic, 0) == QueueOffset(n)
    });
}

fn req<'a>(max: usize, invisible_ms: u64) -> PopRequest<'a> {
    PopRequest {
        group: "g",
        topic: "T",
        queue_id: None,
        max_messages: max,
        invisible: Duration::from_millis(invisible_ms),
        poll: Duration::ZERO,
        expression_type: None,
        expression: "*",
    }
}

fn body(p: &Popped) -> String {
    let v = protocol::message::record::decode(&p.record, false).unwrap();
    String::from_utf8_lossy(v.body()).into_owned()
}

fn committed(b: &Broker) -> Option<i64> {
    b.offsets.query("g", "T", 0).map(|o| o.get())
}

fn group(b: &Broker, retry_max_times: i32, fifo: bool) {
    futures::executor::block_on(b.groups.upsert(SubscriptionGroupConfig {
        group_name: "g".into(),
        retry_max_times,
        consume_message_orderly: fifo,
        ..SubscriptionGroupConfig::default()
    }))
    .unwrap();
}

#[tokio::test]
async fn out_of_order_acks_commit_the_lowest_unacked_offset() {
    let (_d, b) = broker("");
    put(&b, "T", &[("a", ""), ("b", ""), ("c", ""), ("d", "")]).await;
    let got = b.pop.pop(&b, &req(32, 60_000)).await.unwrap();
    assert_eq!(
        got.iter().map(body).collect::<Vec<_>>(),
        ["a", "b", "c", "d"]
    );
    assert!(got.iter().all(|p| p.attempt == 1));
    assert_eq!(b.pop.in_flight(), 4);
    assert_eq!(committed(&b), Some(0));
    b.pop.ack(&b, "g", &got[2].handle.to_string()).unwrap();
    b.pop.ack(&b, "g", &got[1].handle.to_string()).unwrap();
    assert_eq!(committed(&b), Some(0));
    b.pop.ack(&b, "g", &got[0].handle.to_string()).unwrap();
    assert_eq!(committed(&b), Some(3));
    // Acking twice is fine; nothing new to pop.
    b.pop.ack(&b, "g", &got[0].handle.to_string()).unwrap();
    assert!(b.pop.pop(&b, &req(32, 60_000)).await.unwrap().is_empty());
    b.pop.ack(&b, "g", &got[3].handle.to_string()).unwrap();
    assert_eq!(committed(&b), Some(4));
    assert_eq!(b.pop.in_flight(), 0);
    assert_eq!(b.metrics.pop.acks.get(), 4);
}

#[tokio::test]
async fn unacked_messages_come_back_and_end_in_the_dlq() {
    let (_d, b) = broker("");
    group(&b, 1, false); // two deliveries, then the DLQ
    put(&b, "T", &[("a", "")]).await;
    let first = b.pop.pop(&b, &req(1, 100)).await.unwrap();
    assert_eq!(body(&first[0]), "a");
    // Waits (poll) until a's invisible time passes: a again, attempt 2.
    let mut again = req(1, 100);
    again.poll = Duration::from_secs(10);
    let second = b.pop.pop(&b, &again).await.unwrap();
    assert_eq!((body(&second[0]), second[0].attempt), ("a".into(), 2));
    assert_eq!(b.metrics.pop.redeliveries.get(), 1);
    let err = b
        .pop
        .ack(&b, "g", &first[0].handle.to_string())
        .unwrap_err();
    assert!(matches!(err, PopError::StaleHandle { .. }), "{err}");
    // Once the second invisible time passes, a pop moves a to %DLQ%g instead.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while b.metrics.pop.dlq_forwards.get() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "a never reached the DLQ"
        );
        assert!(b.pop.pop(&b, &req(1, 100)).await.unwrap().is_empty());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    put(&b, "T", &[("b", "")]).await;
    let third = b.pop.pop(&b, &again).await.unwrap();
    assert_eq!((body(&third[0]), third[0].attempt), ("b".into(), 1));
    let dlq = test_fixture::bodies(&b, "%DLQ%g", 0);
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].0, "a");
    assert!(dlq[0].1.contains("RETRY_TOPIC\u{1}T"));
    assert_eq!(b.metrics.pop.dlq_forwards.get(), 1);
    assert_eq!(committed(&b), Some(1));
}

#[tokio::test]
async fn change_invisible_gives_a_new_handle_and_the_old_one_still_acks() {
    let (_d, b) = broker("");
    put(&b, "T", &[("a", "")]).await;
    let got = b.pop.pop(&b, &req(1, 100)).await.unwrap();
    let old = got[0].handle.to_string();
    let new = b
        .pop
        .change_invisible(&b, "g", &old, Duration::from_secs(60))
        .unwrap();
    assert_ne!(new.to_string(), old);
    assert_eq!(new.invisible_ms, 60_000);
    // Past the first invisible time the message stays invisible.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(b.pop.pop(&b, &req(1, 100)).await.unwrap().is_empty());
    // The replaced handle may not extend again; it still acks.
    assert!(
        b.pop
            .change_invisible(&b, "g", &old, Duration::from_secs(1))
            .is_err()
    );
    b.pop.ack(&b, "g", &old).unwrap();
    assert_eq!(committed(&b), Some(1));
    assert!(b.pop.ack(&b, "g", &new.to_string()).is_ok(), "done already");
}

#[tokio::test]
async fn forward_to_dead_letter_by_handle() {
    let (_d, b) = broker("");
    put(&b, "T", &[("a", "")]).await;
    let got = b.pop.pop(&b, &req(1, 60_000)).await.unwrap();
    b.pop
        .forward_to_dead_letter(&b, "g", &got[0].handle.to_string())
        .await
        .unwrap();
    assert_eq!(test_fixture::bodies(&b, "%DLQ%g", 0)[0].0, "a");
    assert_eq!(committed(&b), Some(1));
    assert_eq!(b.pop.in_flight(), 0);
}

#[tokio::test]
async fn fifo_groups_get_a_queue_only_when_nothing_of_it_is_in_flight() {
    let (_d, b) = broker("");
    group(&b, 16, true);
    put(&b, "T", &[("a", ""), ("b", ""), ("c", "")]).await;
    let first = b.pop.pop(&b, &req(2, 60_000)).await.unwrap();
    assert_eq!(first.iter().map(body).collect::<Vec<_>>(), ["a", "b"]);
    assert!(b.pop.pop(&b, &req(2, 60_000)).await.unwrap().is_empty());
    b.pop.ack(&b, "g", &first[0].handle.to_string()).unwrap();
    assert!(
        b.pop.pop(&b, &req(2, 60_000)).await.unwrap().is_empty(),
        "b still in flight"
    );
    b.pop.ack(&b, "g", &first[1].handle.to_string()).unwrap();
    let next = b.pop.pop(&b, &req(2, 60_000)).await.unwrap();
    assert_eq!(next.iter().map(body).collect::<Vec<_>>(), ["c"]);
}

#[tokio::test]
async fn tag_and_sql92_filters_skip_and_count_as_acked() {
    let (_d, b) = broker("enablePropertyFilter=true\n");
    put(&b, "T", &[("a", "X"), ("b", "Y"), ("c", "X")]).await;
    let mut r = req(32, 60_000);
    r.expression = "Y";
    let got = b.pop.pop(&b, &r).await.unwrap();
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["b"]);
    assert_eq!(committed(&b), Some(1));
    b.pop.ack(&b, "g", &got[0].handle.to_string()).unwrap();
    assert_eq!(committed(&b), Some(3));
    // SQL92 with the 4.x limits; a bad selector is refused.
    let mut sql = req(32, 60_000);
    sql.expression_type = Some("SQL92");
    sql.expression = "a >";
    let err = b.pop.pop(&b, &sql).await.unwrap_err();
    assert_eq!(err.code(), response::SUBSCRIPTION_PARSE_FAILED);
    let (_d2, off) = broker("");
    sql.expression = "a > 1";
    let err = off.pop.pop(&off, &sql).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "The broker does not support consumer to filter message by SQL92"
    );
}

#[tokio::test]
async fn in_flight_caps_bound_pops_and_count_refusals() {
    let (_d, b) = broker("popMaxInFlightPerGroupTopic=2\n");
    put(&b, "T", &[("a", ""), ("b", ""), ("c", "")]).await;
    assert_eq!(b.pop.pop(&b, &req(32, 60_000)).await.unwrap().len(), 2);
    let err = b.pop.pop(&b, &req(32, 60_000)).await.unwrap_err();
    assert_eq!(err.code(), response::SYSTEM_BUSY);
    assert!(
        err.to_string().contains("popMaxInFlightPerGroupTopic"),
        "{err}"
    );
    assert_eq!(
        b.metrics.limits.refusals.get("popMaxInFlightPerGroupTopic"),
        1
    );
    // Another group has its own share.
    let mut other = req(32, 60_000);
    other.group = "h";
    assert_eq!(b.pop.pop(&b, &other).await.unwrap().len(), 2);

    let (_d2, b) = broker("popMaxInFlightTotal=1\n");
    put(&b, "T", &[("a", ""), ("b", "")]).await;
    assert_eq!(b.pop.pop(&b, &req(32, 60_000)).await.unwrap().len(), 1);
    assert!(b.pop.pop(&b, &other).await.is_err());
    assert_eq!(b.metrics.limits.refusals.get("popMaxInFlightTotal"), 1);
    assert_eq!(b.metrics.pop.in_flight.get(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_pop_wakes_on_arrival_and_parking_is_capped() {
    let (_d, b) = broker("");
    let mut r = req(1, 60_000);
    r.poll = Duration::from_secs(20);
    let popper = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            let r = PopRequest {
                poll: Duration::from_secs(20),
                ..req(1, 60_000)
            };
            b.pop.pop(&b, &r).await
        })
    };
    wait_until("the pop parks", || b.pull_hold.parked() == 1);
    assert_eq!(b.metrics.pop.parked.get(), 1);
    put(&b, "T", &[("a", "")]).await;
    // The store's arrival listener (wired in the broker binary) in person.
    b.pull_hold.on_arrival("T", 0, QueueOffset(0), 0, "");
    let got = popper.await.unwrap().unwrap();
    assert_eq!(body(&got[0]), "a");
    assert_eq!(b.metrics.pop.parked.get(), 0);

    let (_d2, capped) = broker("popMaxParkedTotal=0\n");
    let err = capped.pop.pop(&capped, &r).await.unwrap_err();
    assert!(err.to_string().contains("popMaxParkedTotal"), "{err}");
    assert_eq!(capped.metrics.limits.refusals.get("popMaxParkedTotal"), 1);
}

#[tokio::test]
async fn a_restart_redelivers_from_the_committed_offset() {
    let dir = tempfile::tempdir().unwrap();
    let handles;
    {
        let b = test_fixture::broker_on_files(dir.path(), "");
        b.topics
            .get_or_create_system("T", 1, perm::READ | perm::WRITE, 0);
        put(&b, "T", &[("a", ""), ("b", ""), ("c", ""), ("d", "")]).await;
        let got = b.pop.pop(&b, &req(32, 60_000)).await.unwrap();
        b.pop.ack(&b, "g", &got[0].handle.to_string()).unwrap();
        b.pop.ack(&b, "g", &got[2].handle.to_string()).unwrap();
        handles = got.iter().map(|p| p.handle.to_string()).collect::<Vec<_>>();
        b.persist_all();
        b.store.shutdown().unwrap();
    }
    let b = test_fixture::broker_on_files(dir.path(), "");
    assert_eq!(committed(&b), Some(1));
    // Nothing skipped: b (in flight) and c (acked above it) come again, then d.
    let got = b.pop.pop(&b, &req(32, 60_000)).await.unwrap();
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["b", "c", "d"]);
    // Handles from before the restart: below the committed offset done, else stale.
    b.pop.ack(&b, "g", &handles[0]).unwrap();
    assert!(b.pop.ack(&b, "g", &handles[1]).is_err());
}

fn pull(group: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::PULL_MESSAGE,
        &PullMessageRequestHeader {
            consumer_group: group.into(),
            topic: "T".into(),
            queue_id: 0,
            queue_offset: QueueOffset(0),
            max_msg_nums: 32,
            sys_flag: PullSysFlag::build(false, false, true, false),
            commit_offset: ConsumerOffset(0),
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 1,
            expression_type: Some("TAG".into()),
            bname: None,
        },
    )
}

#[tokio::test]
async fn pulls_and_commits_of_a_pop_group_are_refused_others_served() {
    let (_d, b) = broker("");
    put(&b, "T", &[("a", "")]).await;
    let (conn, _rx) = test_fixture::conn(&b);
    assert_eq!(
        test_fixture::dispatch(&b, &conn, pull("g")).await.code,
        response::SUCCESS
    );
    b.pop.pop(&b, &req(1, 60_000)).await.unwrap();
    let refused = test_fixture::dispatch(&b, &conn, pull("g")).await;
    assert_eq!(refused.code, response::NO_PERMISSION);
    assert!(
        refused
            .remark
            .as_deref()
            .unwrap_or("")
            .contains("consumer group g consumes by POP")
    );
    let commit = RemotingCommand::request(
        request::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "g".into(),
            topic: "T".into(),
            queue_id: 0,
            commit_offset: ConsumerOffset(1),
            bname: None,
        },
    );
    let refused = test_fixture::dispatch(&b, &conn, commit).await;
    assert_eq!(refused.code, response::NO_PERMISSION);
    assert_eq!(committed(&b), Some(0));
    assert_eq!(
        test_fixture::dispatch(&b, &conn, pull("other")).await.code,
        response::SUCCESS
    );
}

#[tokio::test]
async fn bad_requests_and_foreign_handles_are_refused() {
    let (_d, b) = broker("");
    assert!(matches!(
        b.pop.pop(&b, &req(33, 1000)).await,
        Err(PopError::BadRequest(_))
    ));
    assert!(matches!(
        b.pop.pop(&b, &req(1, 0)).await,
        Err(PopError::BadRequest(_))
    ));
    let mut missing = req(1, 1000);
    missing.topic = "nope";
    assert_eq!(
        b.pop.pop(&b, &missing).await.unwrap_err().code(),
        response::TOPIC_NOT_EXIST
    );
    let mut bad_queue = req(1, 1000);
    bad_queue.queue_id = Some(5);
    assert!(b.pop.pop(&b, &bad_queue).await.is_err());
    assert!(matches!(
        b.pop.ack(&b, "g", "garbage"),
        Err(PopError::InvalidHandle(_))
    ));
    let foreign = ReceiptHandle {
        broker_name: "other-broker".into(),
        topic: "T".into(),
        queue_id: 0,
        offset: QueueOffset(0),
        pop_time_ms: 0,
        invisible_ms: 1,
        delivery: 1,
        generation: 1,
    };
    assert!(matches!(
        b.pop.ack(&b, "g", &foreign.to_string()),
        Err(PopError::InvalidHandle(_))
    ));
}

/// Like kill -9: the committed offsets reach the disk only by the periodic flush
/// (`flushConsumerOffsetInterval`), the in-flight state not at all. Whatever was not
/// acked by the last flush comes again; nothing is skipped.
#[tokio::test]
async fn a_crash_redelivers_everything_not_acked_by_the_last_offset_flush() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = test_fixture::broker_on_files(dir.path(), "");
        b.topics
            .get_or_create_system("T", 1, perm::READ | perm::WRITE, 0);
        put(&b, "T", &[("a", ""), ("b", ""), ("c", ""), ("d", "")]).await;
        let got = b.pop.pop(&b, &req(32, 60_000)).await.unwrap();
        b.pop.ack(&b, "g", &got[0].handle.to_string()).unwrap();
        b.offsets.persist_if_dirty().unwrap();
        // Acked after the last flush: lost with the process.
        b.pop.ack(&b, "g", &got[1].handle.to_string()).unwrap();
        b.pop.ack(&b, "g", &got[2].handle.to_string()).unwrap();
        assert_eq!(committed(&b), Some(3));
    }
    let b = test_fixture::broker_on_files(dir.path(), "");
    assert_eq!(committed(&b), Some(1));
    let got = b.pop.pop(&b, &req(32, 60_000)).await.unwrap();
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["b", "c", "d"]);
    assert!(got.iter().all(|p| p.attempt == 1));
}

/// An offset reset (INVOKE_BROKER_TO_RESET_OFFSET commits, then forgets the POP state):
/// the group pops from the reset offset, its old handles no longer ack.
#[tokio::test]
async fn a_reset_restarts_pops_at_the_reset_offset() {
    let (_d, b) = broker("");
    put(&b, "T", &[("a", ""), ("b", ""), ("c", "")]).await;
    let got = b.pop.pop(&b, &req(32, 60_000)).await.unwrap();
    assert_eq!(b.pop.in_flight(), 3);
    b.offsets.commit("g", "T", 0, ConsumerOffset(1));
    b.pop.forget(Some("g"), Some("T"));
    assert_eq!(b.pop.in_flight(), 0);
    assert!(!b.pop.has_group("g"));
    let again = b.pop.pop(&b, &req(32, 60_000)).await.unwrap();
    assert_eq!(again.iter().map(body).collect::<Vec<_>>(), ["b", "c"]);
    assert!(b.pop.ack(&b, "g", &got[2].handle.to_string()).is_err());
}
