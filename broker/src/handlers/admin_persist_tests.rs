//! Admin changes of `topics.json` / `subscriptionGroup.json` through the real dispatch
//! path, with the config files on a file system that stalls or fails their rewrites.

use std::sync::Arc;
use std::time::Duration;

use protocol::RemotingCommand;
use protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, SubscriptionData,
};
use protocol::code::{request as rq, response};
use protocol::header::{CreateTopicRequestHeader, DeleteTopicRequestHeader};
use store::config_files::{SubscriptionGroupConfig, config_dir, topics_path};
use store::fs::{Fault, FaultFs, FaultOp};

use crate::services::Broker;
use crate::services::clients::Conn;
use crate::test_fixture::{broker_with_fs, conn, dispatch, wait_until};

fn create_topic(topic: &str) -> RemotingCommand {
    RemotingCommand::request(
        rq::UPDATE_AND_CREATE_TOPIC,
        &CreateTopicRequestHeader {
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".to_owned(),
            topic_sys_flag: None,
            order: false,
            attributes: None,
        },
    )
}

fn delete_topic(topic: &str) -> RemotingCommand {
    RemotingCommand::request(
        rq::DELETE_TOPIC_IN_BROKER,
        &DeleteTopicRequestHeader {
            topic: topic.to_owned(),
        },
    )
}

fn create_group(group: &str) -> RemotingCommand {
    let config = SubscriptionGroupConfig {
        group_name: group.to_owned(),
        ..SubscriptionGroupConfig::default()
    };
    RemotingCommand::bare_request(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(protocol::body::encode(&config))
}

fn with_fields(code: i32, fields: &[(&str, String)]) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(code);
    for (k, v) in fields {
        cmd.ext_fields.insert(*k, v.clone());
    }
    cmd
}

fn send(topic: &str, body: &str) -> RemotingCommand {
    with_fields(
        rq::SEND_MESSAGE_V2,
        &[
            ("a", "PG_VICTIM".to_owned()),
            ("b", topic.to_owned()),
            ("c", "TBW102".to_owned()),
            ("d", "4".to_owned()),
            ("e", "0".to_owned()),
            ("f", "0".to_owned()),
            ("g", crate::now_ms().to_string()),
            ("h", "0".to_owned()),
            ("i", String::new()),
        ],
    )
    .with_body(body.as_bytes().to_vec())
}

fn pull(group: &str, topic: &str) -> RemotingCommand {
    with_fields(
        rq::PULL_MESSAGE,
        &[
            ("consumerGroup", group.to_owned()),
            ("topic", topic.to_owned()),
            ("queueId", "0".to_owned()),
            ("queueOffset", "0".to_owned()),
            ("maxMsgNums", "32".to_owned()),
            // SUBSCRIPTION only: no suspend, no commit.
            ("sysFlag", "4".to_owned()),
            ("commitOffset", "0".to_owned()),
            ("suspendTimeoutMillis", "0".to_owned()),
            ("subscription", "*".to_owned()),
            ("subVersion", "0".to_owned()),
            ("expressionType", "TAG".to_owned()),
        ],
    )
}

fn heartbeat(group: &str, topic: &str) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: "127.0.0.1@victim".to_owned(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.to_owned(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            subscription_data_set: vec![SubscriptionData {
                class_filter_mode: false,
                topic: topic.to_owned(),
                sub_string: "*".to_owned(),
                tags_set: Default::default(),
                code_set: Default::default(),
                sub_version: 1,
                expression_type: "TAG".to_owned(),
            }],
            unit_mode: false,
        }],
    };
    RemotingCommand::bare_request(rq::HEART_BEAT).with_body(protocol::body::encode(&data))
}

/// Dispatches `request` on a task of the runtime, as a connection does for a request
/// that has to wait.
fn spawn(
    b: &Arc<Broker>,
    conn: &Conn,
    request: RemotingCommand,
) -> tokio::task::JoinHandle<RemotingCommand> {
    let (b, conn) = (Arc::clone(b), conn.clone());
    tokio::spawn(async move { dispatch(&b, &conn, request).await })
}

fn topics_on_disk(dir: &std::path::Path) -> String {
    std::fs::read_to_string(topics_path(dir)).unwrap()
}

/// A rewrite of `topics.json` held in its write does not hold the broker: with one async
/// worker, sends, heartbeats, pulls and a topic lookup are answered while the admin
/// creates wait, and each create answers only once the rewrite carrying it is on disk.
/// (With the rewrite inline on the worker, nothing else ran until the disk let go.)
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_blocked_config_rewrite_holds_only_the_admin_requests_waiting_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultFs::new());
    let b = broker_with_fs(dir.path(), "", fault.clone());
    let (c, _pushed) = conn(&b);
    let created = dispatch(&b, &c, create_topic("Victim")).await;
    assert_eq!(created.code, response::SUCCESS, "{:?}", created.remark);

    fault.inject(
        FaultOp::WriteFile,
        config_dir(dir.path()),
        Fault::Stall(Duration::from_secs(60)),
    );
    let blocked = spawn(&b, &c, create_topic("Blocked"));
    wait_until("the topics.json rewrite to block", || fault.fired() >= 1);
    // A second create while the first rewrite is held: staged for the next one.
    let second = spawn(&b, &c, create_topic("Blocked2"));

    let sent = spawn(&b, &c, send("Victim", "served")).await.unwrap();
    assert_eq!(sent.code, response::SUCCESS, "{:?}", sent.remark);
    let beat = spawn(&b, &c, heartbeat("VictimGroup", "Victim"))
        .await
        .unwrap();
    assert_eq!(beat.code, response::SUCCESS, "{:?}", beat.remark);
    assert!(
        b.topics.contains("%RETRY%VictimGroup"),
        "the heartbeat's retry topic is in force while its rewrite waits"
    );
    wait_until("the sent message to be dispatched", || {
        b.store.max_offset_in_queue("Victim", 0).get() >= 1
    });
    let pulled = spawn(&b, &c, pull("VictimGroup", "Victim")).await.unwrap();
    assert_eq!(pulled.code, response::SUCCESS, "{:?}", pulled.remark);
    let all = spawn(
        &b,
        &c,
        RemotingCommand::bare_request(rq::GET_ALL_TOPIC_CONFIG),
    )
    .await
    .unwrap();
    assert_eq!(all.code, response::SUCCESS);

    assert!(
        !blocked.is_finished() && !second.is_finished(),
        "the creates answer only once their rewrite is on disk"
    );
    assert!(
        b.topics.get("Blocked").is_none(),
        "not in force before it is written"
    );

    fault.heal();
    for (topic, create) in [("Blocked", blocked), ("Blocked2", second)] {
        let r = create.await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert!(b.topics.contains(topic));
        assert!(
            topics_on_disk(dir.path()).contains(&format!("\"{topic}\"")),
            "{topic} is in topics.json when its create answers"
        );
    }
    assert!(b.topics.flush_created(Duration::from_secs(10)));
    assert!(topics_on_disk(dir.path()).contains("%RETRY%VictimGroup"));
    b.store.shutdown().expect("store shutdown");
}

/// A rewrite that fails refuses the admin change with SYSTEM_ERROR naming the file, and
/// the change is not applied: memory stays what the disk holds. Once the disk recovers
/// the same request succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_failed_config_rewrite_refuses_the_admin_change_and_does_not_apply_it() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultFs::new());
    let b = broker_with_fs(dir.path(), "", fault.clone());
    let (c, _pushed) = conn(&b);
    assert_eq!(
        dispatch(&b, &c, create_topic("Kept")).await.code,
        response::SUCCESS
    );

    fault.inject(FaultOp::WriteFile, config_dir(dir.path()), Fault::NoSpace);
    for (request, file) in [
        (create_topic("Refused"), "topics.json"),
        (delete_topic("Kept"), "topics.json"),
        (create_group("RefusedGroup"), "subscriptionGroup.json"),
    ] {
        let r = dispatch(&b, &c, request).await;
        assert_eq!(r.code, response::SYSTEM_ERROR);
        let remark = r.remark.unwrap_or_default();
        assert!(
            remark.contains(file) && remark.contains("not applied"),
            "{remark}"
        );
    }
    assert!(
        b.topics.get("Refused").is_none(),
        "a refused create is not in force"
    );
    assert!(
        b.topics.get("Kept").is_some(),
        "a refused delete is not in force"
    );
    assert!(b.groups.get("RefusedGroup").is_none());
    let all = dispatch(
        &b,
        &c,
        RemotingCommand::bare_request(rq::GET_ALL_TOPIC_CONFIG),
    )
    .await;
    assert!(!String::from_utf8_lossy(&all.body).contains("\"Refused\""));

    fault.heal();
    assert_eq!(
        dispatch(&b, &c, create_topic("Refused")).await.code,
        response::SUCCESS
    );
    assert!(topics_on_disk(dir.path()).contains("\"Refused\""));
    assert!(topics_on_disk(dir.path()).contains("\"Kept\""));
    b.store.shutdown().expect("store shutdown");
}
