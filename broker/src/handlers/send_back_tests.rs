//! CONSUMER_SEND_MSG_BACK against a real store.

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::{request as rq, response};
use protocol::header::ConsumerSendMsgBackRequestHeader;
use protocol::message::properties::{self, ORIGIN_MESSAGE_ID, REAL_QID, REAL_TOPIC, RETRY_TOPIC};
use protocol::message::{PhysicalOffset, QueueOffset, record};
use store::config_files::SubscriptionGroupConfig;

use super::consumer_send_msg_back;
use crate::handlers::Reply;
use crate::names::{SCHEDULE_TOPIC, perm};
use crate::services::Broker;
use crate::test_fixture::{self, records, subscribe, wait_until};

fn request(offset: PhysicalOffset, group: &str, delay: i32, max: Option<i32>) -> RemotingCommand {
    let h = ConsumerSendMsgBackRequestHeader {
        offset,
        group: group.to_owned(),
        delay_level: delay,
        origin_msg_id: Some("ignored".into()),
        origin_topic: Some("T".into()),
        unit_mode: false,
        max_reconsume_times: max,
        bname: None,
    };
    let mut r = RemotingCommand::request(rq::CONSUMER_SEND_MSG_BACK, &h);
    r.version = 373;
    r
}

fn answer(b: &Arc<Broker>, req: RemotingCommand) -> RemotingCommand {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    match rt.block_on(consumer_send_msg_back(b, &req)) {
        Ok(Reply::Response(out)) => out.command,
        Ok(Reply::None) => panic!("no answer"),
        Err(e) => panic!("handler error {e}"),
    }
}

/// Stores the message a consumer later hands back, and subscribes groups `g` and `h` to
/// its topic; returns its offset and offset msgId.
fn consumed(b: &Broker) -> (PhysicalOffset, String) {
    subscribe(b, "g", "T");
    subscribe(b, "h", "T");
    let m = test_fixture::message("T", 0, "payload", "UNIQ_KEY\u{1}UK1\u{2}TAGS\u{1}A".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let put = rt.block_on(b.put(crate::services::put_path::Put::Message(m)));
    let a = put.append.unwrap();
    (a.wrote_offset, a.msg_id())
}

/// The only record of the queue, once dispatched.
fn only_record(b: &Broker, topic: &str, queue_id: i32) -> bytes::Bytes {
    wait_until(topic, || {
        b.store.max_offset_in_queue(topic, queue_id) == QueueOffset(1)
    });
    let mut all = records(b, topic, queue_id);
    assert_eq!(all.len(), 1);
    all.remove(0)
}

#[test]
fn first_failure_is_parked_for_level_three_of_the_retry_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = test_fixture::broker(dir.path(), "");
    let (offset, offset_id) = consumed(&b);
    let out = answer(&b, request(offset, "g", 0, Some(16)));
    assert_eq!(out.code, response::SUCCESS, "{:?}", out.remark);

    let retry = b.topics.get("%RETRY%g").unwrap();
    assert_eq!(
        (retry.write_queue_nums, retry.perm),
        (1, perm::READ | perm::WRITE)
    );
    // Level 3 + 0 = 3 lives in queue 2 of the schedule topic.
    let parked = only_record(&b, SCHEDULE_TOPIC, 2);
    let v = record::decode(&parked, false).unwrap();
    assert_eq!(v.body(), b"payload");
    assert_eq!(v.reconsume_times(), 1);
    let p = v.properties();
    assert_eq!(properties::find(p, REAL_TOPIC), Some("%RETRY%g"));
    assert_eq!(properties::find(p, REAL_QID), Some("0"));
    assert_eq!(properties::find(p, RETRY_TOPIC), Some("T"));
    assert_eq!(
        properties::find(p, ORIGIN_MESSAGE_ID),
        Some(offset_id.as_str())
    );
    assert_eq!(properties::find(p, "UNIQ_KEY"), Some("UK1"));
    assert_eq!(properties::find(p, "DELAY"), Some("3"));
    assert_eq!(properties::find(p, "TAGS"), Some("A"));
}

#[test]
fn over_the_limit_or_negative_level_goes_to_the_dead_letter_queue() {
    let dir = tempfile::tempdir().unwrap();
    let b = test_fixture::broker(dir.path(), "");
    let (offset, _) = consumed(&b);
    // maxReconsumeTimes 0 from the header: the first failure is final.
    let out = answer(&b, request(offset, "g", 0, Some(0)));
    assert_eq!(out.code, response::SUCCESS, "{:?}", out.remark);
    let dlq = b.topics.get("%DLQ%g").unwrap();
    assert_eq!(
        (dlq.write_queue_nums, dlq.perm),
        (1, perm::READ | perm::WRITE)
    );
    let dead = only_record(&b, "%DLQ%g", 0);
    let v = record::decode(&dead, false).unwrap();
    assert_eq!(v.reconsume_times(), 1);
    assert_eq!(properties::find(v.properties(), "DELAY"), Some("0"));
    assert_eq!(properties::find(v.properties(), RETRY_TOPIC), Some("T"));

    // A negative level asks for the DLQ whatever the count.
    let out = answer(&b, request(offset, "h", -1, Some(16)));
    assert_eq!(out.code, response::SUCCESS);
    only_record(&b, "%DLQ%h", 0);
    assert_eq!(
        b.store.max_offset_in_queue(SCHEDULE_TOPIC, 2),
        QueueOffset(0)
    );
}

#[test]
fn old_clients_get_the_groups_retry_max_times() {
    let dir = tempfile::tempdir().unwrap();
    let b = test_fixture::broker(dir.path(), "");
    let (offset, _) = consumed(&b);
    // Before V3_4_9 (121) the header's maxReconsumeTimes is not honoured: 16 applies.
    let mut req = request(offset, "g", 0, Some(0));
    req.version = 120;
    assert_eq!(answer(&b, req).code, response::SUCCESS);
    only_record(&b, SCHEDULE_TOPIC, 2);
    assert!(b.topics.get("%DLQ%g").is_none());
}

#[test]
fn unknown_groups_missing_messages_and_disabled_retries() {
    let dir = tempfile::tempdir().unwrap();
    let b = test_fixture::broker(dir.path(), "autoCreateSubscriptionGroup=false\n");
    let (offset, _) = consumed(&b);
    let out = answer(&b, request(offset, "nobody", 0, None));
    assert_eq!(out.code, response::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert!(out.remark.unwrap().contains("nobody"));

    futures::executor::block_on(b.groups.upsert(SubscriptionGroupConfig {
        group_name: "known".into(),
        ..SubscriptionGroupConfig::default()
    }))
    .unwrap();
    subscribe(&b, "known", "T");
    subscribe(&b, "off", "T");
    let out = answer(&b, request(PhysicalOffset(1 << 40), "known", 0, None));
    assert_eq!(out.code, response::SYSTEM_ERROR);
    assert_eq!(
        out.remark.as_deref(),
        Some("look message by offset failed, 1099511627776")
    );

    // retryQueueNums 0 switches retries off: accepted, nothing stored.
    futures::executor::block_on(b.groups.upsert(SubscriptionGroupConfig {
        group_name: "off".into(),
        retry_queue_nums: 0,
        ..SubscriptionGroupConfig::default()
    }))
    .unwrap();
    let end = b.store.max_phy_offset();
    assert_eq!(
        answer(&b, request(offset, "off", 0, None)).code,
        response::SUCCESS
    );
    assert!(b.topics.get("%RETRY%off").is_none());
    assert_eq!(b.store.max_phy_offset(), end);
}

/// Only what the group could consume is copied: not another topic's message, not a
/// broker record (a pending half message, a parked delayed one).
#[test]
fn only_messages_the_group_consumes_are_sent_back() {
    let dir = tempfile::tempdir().unwrap();
    let b = test_fixture::broker(dir.path(), "");
    let (offset, _) = consumed(&b);
    subscribe(&b, "other", "Elsewhere");
    let out = answer(&b, request(offset, "other", -1, Some(16)));
    assert_eq!(out.code, response::NO_PERMISSION);
    assert!(
        out.remark
            .as_deref()
            .unwrap_or("")
            .contains("does not subscribe to"),
        "{:?}",
        out.remark
    );
    assert!(b.topics.get("%DLQ%other").is_none());

    // A retry copy parked in the schedule topic is a broker record.
    assert_eq!(
        answer(&b, request(offset, "g", 0, Some(16))).code,
        response::SUCCESS
    );
    let parked = only_record(&b, SCHEDULE_TOPIC, 2);
    let parked_at = record::decode(&parked, false).unwrap().physical_offset();
    let out = answer(&b, request(parked_at, "g", -1, Some(16)));
    assert_eq!(out.code, response::NO_PERMISSION, "{:?}", out.remark);
    assert!(out.remark.unwrap().contains("SCHEDULE_TOPIC_XXXX"));
}
