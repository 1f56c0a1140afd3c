//! The transaction flow on a real store in a temp directory, driven through the send
//! and END_TRANSACTION handlers and the checker, with a producer connection whose
//! outbound queue the test reads (the CHECK_TRANSACTION_STATE requests).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::code::{request as rq, response};
use protocol::header::CheckTransactionStateRequestHeader;
use protocol::message::record::MAX_PROPERTIES_LEN;
use protocol::message::{
    MessageSysFlag, PhysicalOffset, QueueOffset, TransactionType, decode, parse_offset_msg_id,
};
use protocol::{LanguageCode, RemotingCommand};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::checker::check_round;
use super::{CHECK_GROUP, CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC};
use crate::config::Config;
use crate::handlers::Reply;
use crate::handlers::end_transaction::end_transaction;
use crate::metrics::Metrics;
use crate::services::Broker;
use crate::services::clients::Conn;
use crate::services::clients::{Channel, ClientInfo};
use crate::services::filter::MessageFilter;
use crate::services::put_path::BrokerStore;

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
    let store: Arc<BrokerStore> = Arc::new(store);
    Broker::open(config, store, Arc::new(Metrics::new())).expect("broker")
}

fn close(broker: Arc<Broker>) {
    broker.persist_all();
    broker.store.shutdown().expect("store shutdown");
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
                access_key: None,
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

/// Waits until dispatch has caught up with everything stored: a message stored twice
/// would be in its queue by then.
fn wait_all_dispatched(broker: &Broker) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while broker.store.dispatch_behind_bytes() > 0 {
        assert!(Instant::now() < deadline, "dispatch never caught up");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn bodies(broker: &Broker, topic: &str) -> Vec<(String, MessageSysFlag, PhysicalOffset)> {
    let r = broker
        .store
        .get_message(topic, 0, QueueOffset(0), 64, Some(&MessageFilter::All));
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
    wait_all_dispatched(&broker);
    assert_eq!(bodies(&broker, TOPIC).len(), 1, "committed twice");
    assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 0);
    assert!(pushes.try_recv().is_err());
    close(broker);
}

/// Halves that share a `UNIQ_KEY` (a producer re-sending one `Message` object) are
/// separate transactions: committing one never drops the other's commit, and a rollback
/// never drops a later transaction's commit.
#[tokio::test]
async fn reused_keys_never_decide_another_transaction() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, _pushes) = producer(&broker);
    let first = send_half(&broker, &conn, "K").await;
    let second = send_half(&broker, &conn, "K").await;
    let rolled_back = send_half(&broker, &conn, "K").await;
    let third = send_half(&broker, &conn, "K").await;
    for (half, decision) in [
        (first, COMMIT),
        (second, COMMIT),
        (rolled_back, ROLLBACK),
        (third, COMMIT),
    ] {
        let r = end(&broker, half, "K", decision, false).await;
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    }
    wait_dispatched(&broker, OP_TOPIC, 4);
    wait_all_dispatched(&broker);
    let prepared: Vec<_> = bodies(&broker, TOPIC).iter().map(|(_, _, p)| *p).collect();
    assert_eq!(prepared, vec![first.1, second.1, third.1]);
    close(broker);
}

/// A half whose END_TRANSACTION was lost is checked, though another transaction with
/// its `UNIQ_KEY` was decided.
#[tokio::test]
async fn a_lost_end_is_checked_back_whatever_its_key() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, mut pushes) = producer(&broker);
    let decided = send_half(&broker, &conn, "K").await;
    let lost = send_half(&broker, &conn, "K").await;
    assert_eq!(
        end(&broker, decided, "K", COMMIT, false).await.code,
        response::SUCCESS
    );
    wait_dispatched(&broker, OP_TOPIC, 1);
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!((stats.checked, stats.decided_skipped), (1, 0), "{stats:?}");
    let check = pushes.try_recv().expect("a check-back of the lost one");
    let h: CheckTransactionStateRequestHeader = check.header().expect("header");
    // The producer answers the check-back: the copy is committed, as the original.
    let copy = (h.tran_state_table_offset, h.commit_log_offset);
    assert_ne!(copy.1, lost.1);
    assert_eq!(
        end(&broker, copy, "K", COMMIT, true).await.code,
        response::SUCCESS
    );
    wait_dispatched(&broker, TOPIC, 2);
    let prepared: Vec<_> = bodies(&broker, TOPIC).iter().map(|(_, _, p)| *p).collect();
    assert_eq!(
        prepared,
        vec![decided.1, lost.1],
        "copies name their original"
    );
    close(broker);
}

/// A rollback answering a check-back survives a restart (read back from the op queue):
/// the original's late commit stores nothing, and the checker asks nothing more.
#[tokio::test]
async fn a_decision_survives_a_restart_through_the_op_queue() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, mut pushes) = producer(&broker);
    let original = send_half(&broker, &conn, "R").await;
    wait_dispatched(&broker, HALF_TOPIC, 1);
    assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 1);
    let h: CheckTransactionStateRequestHeader = pushes
        .try_recv()
        .expect("check-back")
        .header()
        .expect("header");
    let copy = (h.tran_state_table_offset, h.commit_log_offset);
    assert_eq!(
        end(&broker, copy, "R", ROLLBACK, true).await.code,
        response::SUCCESS
    );
    wait_dispatched(&broker, OP_TOPIC, 1);
    close(broker);

    let broker = open(dir.path(), "");
    let (_conn, mut pushes) = producer(&broker);
    assert_eq!(
        end(&broker, original, "R", COMMIT, false).await.code,
        response::SUCCESS
    );
    wait_all_dispatched(&broker);
    assert!(
        bodies(&broker, TOPIC).is_empty(),
        "rolled back, then committed"
    );
    assert_eq!(broker.transactions.decisions.len(), 1);
    assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 0);
    assert!(pushes.try_recv().is_err());
    close(broker);
}

/// A producer cannot pose as a checker copy of another transaction: the properties the
/// broker stamps are dropped from what it sends.
#[tokio::test]
async fn a_sent_origin_stamp_is_dropped() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, _pushes) = producer(&broker);
    let victim = send_half(&broker, &conn, "V").await;
    let forged = format!("V\u{2}TRAN_ORIGIN_OFFSET\u{1}{}", victim.1);
    let attacker = send_half(&broker, &conn, &forged).await;
    assert_eq!(
        end(&broker, attacker, &forged, ROLLBACK, false).await.code,
        response::SUCCESS
    );
    assert_eq!(
        end(&broker, victim, "V", COMMIT, false).await.code,
        response::SUCCESS
    );
    wait_dispatched(&broker, TOPIC, 1);
    assert_eq!(bodies(&broker, TOPIC)[0].2, victim.1);
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
        assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 1);
        assert!(pushes.try_recv().is_ok());
    }
    wait_dispatched(&broker, HALF_TOPIC, 3);
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!((stats.checked, stats.discarded), (0, 1), "{stats:?}");
    wait_dispatched(&broker, CHECK_MAX_TOPIC, 1);
    assert_eq!(bodies(&broker, CHECK_MAX_TOPIC)[0].0, "Z");
    assert_eq!(broker.store.max_offset_in_queue(TOPIC, 0), QueueOffset(0));
    close(broker);
}

// --- Half messages the checker cannot process never stop it -------------------------

/// Stores a half message of `GROUP` the way the send handler does (`to_half`), through
/// the put path, with `extra` appended to its properties; returns (half queue offset,
/// CommitLog offset).
async fn put_half(
    broker: &Broker,
    uniq: &str,
    body: &str,
    extra: &str,
) -> (QueueOffset, PhysicalOffset) {
    let mut put = crate::test_fixture::message(TOPIC, 0, body, sent_properties(uniq, extra));
    put.sys_flag = protocol::message::MessageSysFlag(MessageSysFlag::TRANSACTION_PREPARED_TYPE);
    put.born_timestamp = crate::now_ms();
    super::half::to_half(&mut put);
    let r = broker
        .put(crate::services::put_path::Put::Message(put))
        .await;
    let appended = r
        .append
        .unwrap_or_else(|| panic!("half not stored: {:?}", r.status));
    (appended.logics_offset, appended.wrote_offset)
}

fn sent_properties(uniq: &str, extra: &str) -> String {
    format!(
        "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{GROUP}\u{2}UNIQ_KEY\u{1}{uniq}\u{2}TAGS\u{1}t{extra}"
    )
}

/// Extra properties that bring the stored half's properties to `spare` bytes under the
/// 32,767-byte limit: the half fits, a copy with one more property does not.
fn near_limit(uniq: &str, extra: &str, spare: usize) -> String {
    let with_pad = |pad: usize| format!("{extra}\u{2}PAD\u{1}{}", "p".repeat(pad));
    // An entry with an empty value is dropped: measure with one byte of padding.
    let base = super::half::half_properties(&sent_properties(uniq, &with_pad(1)), TOPIC, 0).len();
    let padded = with_pad(MAX_PROPERTIES_LEN - spare - base + 1);
    let stored = super::half::half_properties(&sent_properties(uniq, &padded), TOPIC, 0);
    assert_eq!(stored.len(), MAX_PROPERTIES_LEN - spare);
    padded
}

/// The next check-back pushed to the producer: (half queue offset it names, CommitLog
/// offset, body).
fn next_check(
    pushes: &mut mpsc::Receiver<RemotingCommand>,
) -> (QueueOffset, PhysicalOffset, String) {
    let cmd = pushes.try_recv().expect("a check-back");
    assert_eq!(cmd.code, rq::CHECK_TRANSACTION_STATE);
    let h: CheckTransactionStateRequestHeader = cmd.header().expect("header");
    let body = decode(&cmd.body, true).expect("record");
    (
        h.tran_state_table_offset,
        h.commit_log_offset,
        String::from_utf8_lossy(body.body()).into_owned(),
    )
}

fn checked_bodies(pushes: &mut mpsc::Receiver<RemotingCommand>) -> Vec<String> {
    std::iter::from_fn(|| pushes.try_recv().ok())
        .map(|cmd| {
            String::from_utf8_lossy(decode(&cmd.body, true).expect("record").body()).into_owned()
        })
        .collect()
}

fn half_record(broker: &Broker, offset: i64) -> (String, String) {
    let r = broker.store.get_message(
        HALF_TOPIC,
        0,
        QueueOffset(offset),
        1,
        Some(&MessageFilter::All),
    );
    let v = decode(&r.messages[0], true).expect("record");
    (
        String::from_utf8_lossy(v.body()).into_owned(),
        v.properties().to_owned(),
    )
}

const IMMUNE_FOR_EVER: &str = "\u{2}CHECK_IMMUNITY_TIME_IN_SECONDS\u{1}1000000000";

#[tokio::test]
async fn a_long_immune_half_moves_behind_every_round_and_the_rest_are_checked() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, mut pushes) = producer(&broker);
    put_half(&broker, "IMM", "IMM", IMMUNE_FOR_EVER).await;
    send_half(&broker, &conn, "A").await;
    wait_dispatched(&broker, HALF_TOPIC, 2);
    // Round 1: the immune half is copied to 2 (naming 0), A is checked through its copy at 3.
    assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 1);
    assert_eq!(checked_bodies(&mut pushes), ["A"]);
    wait_dispatched(&broker, HALF_TOPIC, 4);
    let (body, props) = half_record(&broker, 2);
    assert_eq!(body, "IMM");
    assert_eq!(
        super::half::prepared_queue_offset(&props),
        Some(QueueOffset(0))
    );

    // Round 2 starts at the immunity copy, which is still immune: it is copied again and
    // the walk goes on to A's copy and to C, sent since.
    send_half(&broker, &conn, "C").await;
    wait_dispatched(&broker, HALF_TOPIC, 5);
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!(checked_bodies(&mut pushes), ["A", "C"], "{stats:?}");
    assert_eq!((stats.checked, stats.skipped), (2, 0));
    wait_dispatched(&broker, HALF_TOPIC, 8);
    let (body, props) = half_record(&broker, 5);
    assert_eq!(body, "IMM");
    assert_eq!(
        super::half::prepared_queue_offset(&props),
        Some(QueueOffset(0)),
        "a copy of a copy still names the original offset"
    );

    // And so on: each round passes the immune half and checks what is due behind it.
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!(checked_bodies(&mut pushes), ["A", "C"], "{stats:?}");
    assert_eq!(
        broker
            .offsets
            .query(CHECK_GROUP, HALF_TOPIC, 0)
            .expect("progress")
            .0,
        8
    );
    close(broker);
}

#[tokio::test]
async fn a_half_too_long_to_reappend_is_checked_at_its_offset_and_moved() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, mut pushes) = producer(&broker);
    // 10 spare bytes: `TRANSACTION_CHECK_TIMES` (26 with its value) does not fit.
    let big = put_half(&broker, "BIG", "BIG", &near_limit("BIG", "", 10)).await;
    send_half(&broker, &conn, "B").await;
    wait_dispatched(&broker, HALF_TOPIC, 2);
    let stats = check_round(&broker, crate::now_ms() + 1).await;

    // BIG's check-back names the original record; B is checked behind it as usual.
    let (offset, commit_log_offset, body) = next_check(&mut pushes);
    assert_eq!(
        (offset, commit_log_offset, body.as_str()),
        (big.0, big.1, "BIG"),
        "{stats:?}"
    );
    let (offset, _, body) = next_check(&mut pushes);
    assert_eq!((offset, body.as_str()), (QueueOffset(2), "B"));
    assert_eq!((stats.checked, stats.skipped), (1, 1));
    // A copy waits in TRANS_CHECK_MAX_TIME_TOPIC, counted and shown in the metrics.
    wait_dispatched(&broker, CHECK_MAX_TOPIC, 1);
    assert_eq!(bodies(&broker, CHECK_MAX_TOPIC)[0].0, "BIG");
    assert_eq!(
        broker
            .metrics
            .skips
            .transaction_check
            .get("reappend_refused"),
        1
    );
    let text = broker.metrics.encode().expect("metrics");
    assert!(
        text.contains(
            "rocketmq_broker_transaction_check_skipped_total{reason=\"reappend_refused\"} 1"
        ),
        "{text}"
    );

    // The producer's answer to that check-back commits the original.
    assert_eq!(
        end(&broker, big, "BIG", COMMIT, true).await.code,
        response::SUCCESS
    );
    wait_dispatched(&broker, TOPIC, 1);
    assert_eq!(bodies(&broker, TOPIC)[0].0, "BIG");
    // Later rounds go on from behind BIG: only B is checked again.
    wait_dispatched(&broker, OP_TOPIC, 1);
    wait_dispatched(&broker, HALF_TOPIC, 3);
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!(checked_bodies(&mut pushes), ["B"], "{stats:?}");
    assert_eq!(stats.skipped, 0);
    close(broker);
}

#[tokio::test]
async fn an_immune_half_too_long_to_move_behind_is_moved_unchecked() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, mut pushes) = producer(&broker);
    // `TRAN_PREPARED_QUEUE_OFFSET` (28 with its value) does not fit either.
    put_half(
        &broker,
        "IMMBIG",
        "IMMBIG",
        &near_limit("IMMBIG", IMMUNE_FOR_EVER, 10),
    )
    .await;
    send_half(&broker, &conn, "B").await;
    wait_dispatched(&broker, HALF_TOPIC, 2);
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    // No check-back inside the immunity its producer asked for; B is checked.
    assert_eq!(checked_bodies(&mut pushes), ["B"], "{stats:?}");
    assert_eq!((stats.checked, stats.skipped), (1, 1));
    wait_dispatched(&broker, CHECK_MAX_TOPIC, 1);
    assert_eq!(bodies(&broker, CHECK_MAX_TOPIC)[0].0, "IMMBIG");
    assert_eq!(
        broker
            .metrics
            .skips
            .transaction_check
            .get("reappend_refused"),
        1
    );
    close(broker);
}

#[tokio::test]
async fn a_half_that_cannot_be_discarded_stays_and_the_rest_are_checked() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "transactionCheckMax=1\n");
    let (_conn, mut pushes) = producer(&broker);
    let big_body = "x".repeat(2000);
    put_half(&broker, "LARGE", &big_body, "").await;
    wait_dispatched(&broker, HALF_TOPIC, 1);
    assert_eq!(check_round(&broker, crate::now_ms() + 1).await.checked, 1);
    assert_eq!(checked_bodies(&mut pushes), [big_body]);
    close(broker);

    // maxMessageSize lowered below the half's body: its copy for
    // TRANS_CHECK_MAX_TIME_TOPIC is refused for good.
    let broker = open(dir.path(), "transactionCheckMax=1\nmaxMessageSize=1024\n");
    let (conn, mut pushes) = producer(&broker);
    send_half(&broker, &conn, "N").await;
    wait_dispatched(&broker, HALF_TOPIC, 3);
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!(checked_bodies(&mut pushes), ["N"], "{stats:?}");
    assert_eq!((stats.checked, stats.discarded, stats.skipped), (1, 0, 1));
    assert_eq!(
        broker
            .metrics
            .skips
            .transaction_check
            .get("discard_refused"),
        1
    );
    assert_eq!(
        broker.store.max_offset_in_queue(CHECK_MAX_TOPIC, 0),
        QueueOffset(0)
    );
    close(broker);
}

#[tokio::test]
async fn a_corrupt_half_record_is_counted_and_passed() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path(), "");
    let (conn, mut pushes) = producer(&broker);
    let bad = send_half(&broker, &conn, "BAD").await;
    send_half(&broker, &conn, "B").await;
    wait_dispatched(&broker, HALF_TOPIC, 2);
    corrupt_magic_code(dir.path(), bad.1);
    let stats = check_round(&broker, crate::now_ms() + 1).await;
    assert_eq!(checked_bodies(&mut pushes), ["B"], "{stats:?}");
    assert_eq!(stats.skipped, 1);
    assert_eq!(broker.metrics.skips.transaction_check.get("corrupt"), 1);
    close(broker);
}

/// Zeroes the magic code of the CommitLog record at `offset` in the file itself.
fn corrupt_magic_code(root: &Path, offset: PhysicalOffset) {
    use std::io::{Seek, SeekFrom, Write};
    let path = root.join("commitlog").join(format!("{:020}", 0));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("commitlog file");
    let at = u64::try_from(offset.0).expect("offset") + 4;
    f.seek(SeekFrom::Start(at)).expect("seek");
    f.write_all(&[0; 4]).expect("write");
    f.sync_all().expect("sync");
}
