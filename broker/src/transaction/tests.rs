//! The transaction flow on a real store in a temp directory, driven through the send
//! and END_TRANSACTION handlers and the checker, with a producer connection whose
//! outbound queue the test reads (the CHECK_TRANSACTION_STATE requests).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::code::{request as rq, response};
use protocol::header::CheckTransactionStateRequestHeader;
use protocol::message::{
    MessageSysFlag, PhysicalOffset, QueueOffset, TransactionType, decode, parse_offset_msg_id,
};
use protocol::{LanguageCode, RemotingCommand};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::checker::check_round;
use super::end::end_transaction;
use super::{CHECK_GROUP, CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC};
use crate::clients::{Channel, ClientInfo};
use crate::config::Config;
use crate::connection::Conn;
use crate::filter::MessageFilter;
use crate::handlers::Reply;
use crate::metrics::Metrics;
use crate::state::Broker;
use crate::store_adapter::StoreAdapter;
use crate::store_api::MessageStoreApi;

const GROUP: &str = "PG_TX";
const TOPIC: &str = "TxReal";

fn open(dir: &Path, extra: &str) -> Arc<Broker> {
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n\
         transactionTimeOut=0\n{extra}",
        dir.display()
    );
    let config = Config::from_properties(&text).expect("config");
    let store = store::MessageStore::open(config.store.clone()).expect("store");
    let store: Arc<dyn MessageStoreApi> = Arc::new(StoreAdapter::new(Arc::new(store)));
    Broker::open(config, store, Arc::new(Metrics::new())).expect("broker")
}

fn close(broker: Arc<Broker>) {
    broker.persist_all();
    broker.store.shutdown();
}

/// A registered producer connection of `GROUP`; the receiver sees what the broker pushes.
fn producer(broker: &Broker) -> (Conn, mpsc::Receiver<RemotingCommand>) {
    let (tx, rx) = mpsc::channel(16);
    let id = broker.next_conn_id();
    let peer = SocketAddr::from(([127, 0, 0, 1], 40000));
    let channel = Channel {
        id,
        peer,
        outbound: tx,
        close: CancellationToken::new(),
    };
    broker.clients.add_channel(channel.clone());
    broker
        .clients
        .register_producer(
            GROUP,
            id,
            ClientInfo {
                client_id: "127.0.0.1@tx".into(),
                language: LanguageCode::Java,
                version: 409,
                last_update: Instant::now(),
            },
        )
        .expect("producer registers");
    (Conn { id, peer, channel }, rx)
}

fn response_of(reply: Reply) -> RemotingCommand {
    match reply {
        Reply::Response(out) => out.command,
        Reply::None => panic!("no response"),
    }
}

/// Sends a half message; returns (half queue offset, half CommitLog offset).
async fn send_half(broker: &Arc<Broker>, conn: &Conn, uniq: &str) -> (QueueOffset, PhysicalOffset) {
    let props =
        format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{GROUP}\u{2}UNIQ_KEY\u{1}{uniq}\u{2}TAGS\u{1}t");
    let mut cmd =
        RemotingCommand::bare_request(rq::SEND_MESSAGE_V2).with_body(uniq.as_bytes().to_vec());
    for (k, v) in [
        ("a", GROUP.to_owned()),
        ("b", TOPIC.to_owned()),
        ("c", "TBW102".to_owned()),
        ("d", "4".to_owned()),
        ("e", "0".to_owned()),
        ("f", MessageSysFlag::TRANSACTION_PREPARED_TYPE.to_string()),
        ("g", crate::now_ms().to_string()),
        ("h", "0".to_owned()),
        ("i", props),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    let r = response_of(
        crate::handlers::send::send_message(broker, conn, &cmd)
            .await
            .expect("send"),
    );
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let msg_id = r.ext_fields.get("msgId").expect("msgId").to_owned();
    let queue_offset: i64 = r
        .ext_fields
        .get("queueOffset")
        .expect("queueOffset")
        .parse()
        .expect("number");
    let (_, offset) = parse_offset_msg_id(&msg_id).expect("offset msg id");
    (QueueOffset(queue_offset), offset)
}

async fn end(
    broker: &Arc<Broker>,
    half: (QueueOffset, PhysicalOffset),
    uniq: &str,
    decision: i32,
    from_check: bool,
) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(rq::END_TRANSACTION);
    for (k, v) in [
        ("producerGroup", GROUP.to_owned()),
        ("tranStateTableOffset", half.0.to_string()),
        ("commitLogOffset", half.1.to_string()),
        ("commitOrRollback", decision.to_string()),
        ("fromTransactionCheck", from_check.to_string()),
        ("msgId", uniq.to_owned()),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    match end_transaction(broker, &cmd).await.expect("end") {
        Reply::Response(out) => out.command,
        Reply::None => RemotingCommand::response_to(&cmd, -1),
    }
}

/// Waits until the queue's ConsumeQueue holds `n` units (dispatch is asynchronous).
fn wait_dispatched(broker: &Broker, topic: &str, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while broker.store.max_offset_in_queue(topic, 0).0 < n {
        assert!(
            Instant::now() < deadline,
            "{topic} never reached {n} messages"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn bodies(broker: &Broker, topic: &str) -> Vec<(String, MessageSysFlag, PhysicalOffset)> {
    let r = broker
        .store
        .get_message(topic, 0, QueueOffset(0), 64, &MessageFilter::All);
    r.messages
        .iter()
        .map(|b| {
            let v = decode(b, true).expect("record");
            (
                String::from_utf8_lossy(v.body()).into_owned(),
                v.sys_flag(),
                v.prepared_transaction_offset(),
            )
        })
        .collect()
}

const COMMIT: i32 = MessageSysFlag::TRANSACTION_COMMIT_TYPE;
const ROLLBACK: i32 = MessageSysFlag::TRANSACTION_ROLLBACK_TYPE;

#[tokio::test]
async fn commit_once_rollback_never_unknown_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, mut pushes) = producer(&broker);
    let a = send_half(&broker, &conn, "A").await;
    let b = send_half(&broker, &conn, "B").await;
    let c = send_half(&broker, &conn, "C").await;
    assert_eq!(
        (a.0, b.0, c.0),
        (QueueOffset(0), QueueOffset(1), QueueOffset(2))
    );
    wait_dispatched(&broker, HALF_TOPIC, 3);
    assert_eq!(broker.store.max_offset_in_queue(TOPIC, 0), QueueOffset(0));

    assert_eq!(
        end(&broker, a, "A", COMMIT, false).await.code,
        response::SUCCESS
    );
    assert_eq!(
        end(&broker, a, "A", COMMIT, false).await.code,
        response::SUCCESS
    );
    assert_eq!(
        end(&broker, b, "B", ROLLBACK, false).await.code,
        response::SUCCESS
    );
    assert_eq!(end(&broker, c, "C", 0, false).await.code, -1);
    let wrong = end(&broker, (QueueOffset(1), a.1), "A", COMMIT, false).await;
    assert_eq!(
        wrong.remark.as_deref(),
        Some("The transaction state table offset wrong")
    );
    wait_dispatched(&broker, OP_TOPIC, 3);
    wait_dispatched(&broker, TOPIC, 1);
    let got = bodies(&broker, TOPIC);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "A");
    assert_eq!(got[0].1.transaction_type(), TransactionType::Commit);
    assert_eq!(got[0].2, a.1);

    // The checker passes A and B (decided) and asks about C only.
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!(stats.checked, 1, "{stats:?}");
    let check = pushes.try_recv().expect("a check-back");
    assert_eq!(check.code, rq::CHECK_TRANSACTION_STATE);
    assert!(check.is_oneway());
    let h: CheckTransactionStateRequestHeader = check.header().expect("header");
    assert_eq!(
        h.tran_state_table_offset,
        QueueOffset(3),
        "the copy is checked"
    );
    let record = decode(&check.body, true).expect("body is a record");
    assert_eq!((record.topic(), record.queue_id()), (TOPIC, 0));
    assert_eq!(record.body(), b"C");
    assert!(pushes.try_recv().is_err(), "only C is checked");
    let half_progress = broker
        .offsets
        .query(CHECK_GROUP, HALF_TOPIC, 0)
        .expect("progress");
    assert_eq!(half_progress.0, 3);
    assert_eq!(
        broker
            .offsets
            .query(CHECK_GROUP, OP_TOPIC, 0)
            .expect("op progress")
            .0,
        3
    );
    close(broker);
}

#[tokio::test]
async fn check_back_decides_once_even_after_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, mut pushes) = producer(&broker);
    let original = send_half(&broker, &conn, "K").await;
    wait_dispatched(&broker, HALF_TOPIC, 1);
    assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 1);
    let check = pushes.try_recv().expect("check-back");
    let h: CheckTransactionStateRequestHeader = check.header().expect("header");
    let copy = (h.tran_state_table_offset, h.commit_log_offset);
    assert_eq!(copy.0, QueueOffset(1));
    // The producer answers the check-back with commit; a late report of the original
    // commit arrives afterwards.
    assert_eq!(
        end(&broker, copy, "K", COMMIT, true).await.code,
        response::SUCCESS
    );
    assert_eq!(
        end(&broker, original, "K", COMMIT, false).await.code,
        response::SUCCESS
    );
    wait_dispatched(&broker, TOPIC, 1);
    wait_dispatched(&broker, OP_TOPIC, 2);
    assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 0);
    close(broker);

    // After a restart the in-memory guard is empty: the index still finds the commit.
    let broker = open(dir.path(), "");
    let (_conn, mut pushes) = producer(&broker);
    assert_eq!(
        end(&broker, original, "K", COMMIT, false).await.code,
        response::SUCCESS
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(bodies(&broker, TOPIC).len(), 1, "committed twice");
    assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 0);
    assert!(pushes.try_recv().is_err());
    close(broker);
}

#[tokio::test]
async fn unanswered_half_moves_to_check_max_topic() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "transactionCheckMax=2\n");
    let (conn, mut pushes) = producer(&broker);
    send_half(&broker, &conn, "Z").await;
    for round in 1..=2 {
        wait_dispatched(&broker, HALF_TOPIC, round);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 1);
        assert!(pushes.try_recv().is_ok());
    }
    wait_dispatched(&broker, HALF_TOPIC, 3);
    std::thread::sleep(Duration::from_millis(2));
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!((stats.checked, stats.discarded), (0, 1), "{stats:?}");
    wait_dispatched(&broker, CHECK_MAX_TOPIC, 1);
    assert_eq!(bodies(&broker, CHECK_MAX_TOPIC)[0].0, "Z");
    assert_eq!(broker.store.max_offset_in_queue(TOPIC, 0), QueueOffset(0));
    close(broker);
}
