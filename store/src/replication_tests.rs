use protocol::message::{PhysicalOffset, QueueOffset};

use crate::MessageStore;
use crate::commitlog::tests_support::{config, message};
use crate::config::BrokerRole;
use crate::put_result::PutMessageStatus;

const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn keyed(i: usize) -> crate::commitlog::BrokerMessage {
    let mut m = message("T", 0, &vec![b'x'; 300 + i % 7]);
    m.properties = format!("TAGS\u{1}t\u{2}KEYS\u{1}k{i}\u{2}");
    m
}

fn put(store: &MessageStore, i: usize) -> PhysicalOffset {
    let r = store.put_message(&keyed(i)).wait();
    assert_eq!(r.status, PutMessageStatus::PutOk);
    r.append.unwrap().wrote_offset
}

#[test]
fn truncate_beyond_cuts_commitlog_queues_and_index_then_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 64 * 1024);
    c.max_index_num = 40;
    c.max_hash_slot_num = 16;
    let store = MessageStore::open(c.clone()).unwrap();
    let offsets: Vec<_> = (0..300).map(|i| put(&store, i)).collect();
    assert!(
        store
            .dispatcher()
            .wait_caught_up(std::time::Duration::from_secs(10))
    );
    assert!(store.dispatcher().index().file_count() > 3);
    store.epochs().begin(1, PhysicalOffset(0)).unwrap();
    store.epochs().begin(2, offsets[250]).unwrap();
    store.confirm_offset().set(store.max_phy_offset());

    let cut = offsets[200];
    store.set_role(BrokerRole::Slave, WAIT).unwrap();
    store.truncate_beyond(cut).unwrap();
    assert_eq!(store.max_phy_offset(), cut);
    let cq = store.dispatcher().consume_queues().find("T", 0).unwrap();
    assert_eq!(cq.max_offset(), QueueOffset(200));
    assert_eq!(store.epochs().current_epoch(), 1);
    assert_eq!(store.confirm_offset().get(), cut);
    let d = store.dispatcher();
    assert_eq!(
        d.query_message("T", "k250", 32, 0, i64::MAX).messages.len(),
        0
    );
    assert_eq!(
        d.query_message("T", "k120", 32, 0, i64::MAX).messages.len(),
        1
    );
    assert_eq!(
        d.query_message("T", "k199", 32, 0, i64::MAX).messages.len(),
        1
    );

    // As master again the next message gets queue offset 200 at the cut.
    store.set_role(BrokerRole::AsyncMaster, WAIT).unwrap();
    let r = store.put_message(&keyed(1000)).wait();
    let a = r.append.unwrap();
    assert_eq!((a.wrote_offset, a.logics_offset), (cut, QueueOffset(200)));
    assert!(
        store
            .dispatcher()
            .wait_caught_up(std::time::Duration::from_secs(10))
    );
    assert_eq!(
        d.query_message("T", "k1000", 32, 0, i64::MAX)
            .messages
            .len(),
        1
    );
    drop(store);
    // The cut survives a restart (no stale file or record comes back).
    let store = MessageStore::open(c).unwrap();
    assert_eq!(
        store.max_phy_offset(),
        PhysicalOffset(cut.0 + i64::from(a.wrote_bytes))
    );
}

#[test]
fn slaves_refuse_writes_and_visibility_stops_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 64 * 1024)).unwrap();
    let offsets: Vec<_> = (0..10).map(|i| put(&store, i)).collect();
    assert!(
        store
            .dispatcher()
            .wait_caught_up(std::time::Duration::from_secs(10))
    );
    store.set_visible_limit(Some(offsets[4]));
    let d = store.dispatcher();
    let r = d.get_message("g", "T", 0, QueueOffset(0), 32, None);
    assert_eq!(r.messages.len(), 4);
    let r = d.get_message("g", "T", 0, QueueOffset(4), 32, None);
    assert!(r.messages.is_empty());
    assert_eq!(r.next_begin_offset, QueueOffset(4));
    assert_eq!(r.status, crate::lookup::GetMessageStatus::OffsetOverflowOne);
    store.set_visible_limit(None);
    assert_eq!(
        d.get_message("g", "T", 0, QueueOffset(4), 32, None)
            .messages
            .len(),
        6
    );

    store.set_role(BrokerRole::Slave, WAIT).unwrap();
    let r = store.put_message(&keyed(99)).wait();
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
}

/// The master's CommitLog bytes from `from` to its end, file by file.
fn stream(master: &MessageStore, slave: &mut crate::ha::ReplicaWriter, from: PhysicalOffset) {
    let log = master.commit_log();
    let mut at = from;
    while at < log.max_offset() {
        let window = log.read_to_file_end(at).unwrap();
        slave.accept(at, &window).unwrap();
        at = PhysicalOffset(at.0 + window.len() as i64);
    }
}

/// A slave promoted while its dispatch had not yet indexed the last
/// replicated records used to rebuild its next queue offsets from the lagging queues and
/// hand queue offset 10 out again; reput then dropped the new, acknowledged message as a
/// duplicate of the replicated one. Promotion must be refused until dispatch caught up.
#[test]
fn promotion_is_refused_while_dispatch_is_behind_the_replicated_bytes() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = MessageStore::open(config(md.path(), 64 * 1024)).unwrap();
    let slave = MessageStore::open(config(sd.path(), 64 * 1024)).unwrap();
    slave.set_role(BrokerRole::Slave, WAIT).unwrap();
    let mut writer = slave.replica_writer();
    let offsets: Vec<_> = (0..20).map(|i| put(&master, i)).collect();
    let half = offsets[10];
    let log = master.commit_log();
    let first = log.read_to_file_end(PhysicalOffset(0)).unwrap();
    writer
        .accept(PhysicalOffset(0), &first[..half.0 as usize])
        .unwrap();
    assert!(slave.dispatcher().wait_caught_up(WAIT));

    // Dispatch stalls (a slow disk, a busy reput thread) while the rest arrives.
    slave.dispatcher().shutdown().unwrap();
    stream(&master, &mut writer, half);
    assert_eq!(slave.max_phy_offset(), master.max_phy_offset());

    let refused = slave.set_role(BrokerRole::SyncMaster, std::time::Duration::from_millis(50));
    assert!(
        matches!(refused, Err(super::RoleError::DispatchBehind { behind, .. }) if behind > 0),
        "{refused:?}"
    );
    assert_eq!(slave.role(), BrokerRole::Slave);
    assert_eq!(
        slave.put_message(&keyed(99)).wait().status,
        PutMessageStatus::ServiceNotAvailable
    );

    // Once dispatch covers every replicated byte the promotion goes through and the next
    // message continues the queue instead of reusing a replicated record's offset.
    let reput = slave.dispatcher().reput_offset();
    slave.dispatcher().start(reput).unwrap();
    slave.set_role(BrokerRole::SyncMaster, WAIT).unwrap();
    let r = slave.put_message(&keyed(100)).wait();
    assert_eq!(r.status, PutMessageStatus::PutOk);
    assert_eq!(r.append.unwrap().logics_offset, QueueOffset(20));
    assert!(slave.dispatcher().wait_caught_up(WAIT));
    let got = slave
        .dispatcher()
        .get_message("g", "T", 0, QueueOffset(0), 64, None);
    assert_eq!(got.messages.len(), 21);
}
