//! A ConsumeQueue unit that cannot be written is retried, dispatch
//! never moves past it, and the store refuses puts meanwhile (it must not acknowledge
//! messages consumers would never see); once the write succeeds everything resumes with
//! every unit in its own slot.

use std::time::{Duration, Instant};

use protocol::message::QueueOffset;

use crate::MessageStore;
use crate::commitlog::tests_support::{config, message};
use crate::message_store::WriteRefusal;
use crate::put_result::PutMessageStatus;

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_unwritable_consume_queue_stops_dispatch_and_refuses_puts_until_it_heals() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), 64 * 1024);
    let store = MessageStore::open(c.clone()).unwrap();
    // A file where the topic's queue directory must go: creating the queue fails with
    // ENOTDIR, even for root.
    let blocker = c.consume_queue_dir().join("T");
    std::fs::create_dir_all(c.consume_queue_dir()).unwrap();
    std::fs::write(&blocker, b"not a directory").unwrap();

    let first = store.put_message(&message("T", 0, b"first")).wait();
    assert_eq!(first.status, PutMessageStatus::PutOk);
    let first = first.append.unwrap().wrote_offset;
    wait_until("the indexing failure to be reported", || {
        store.write_refusal() == Some(WriteRefusal::IndexFailed)
    });
    let why = store.dispatcher().dispatch_failure().unwrap();
    assert!(why.contains("ConsumeQueue T-0"), "{why}");
    let refused = store.put_message(&message("T", 0, b"refused")).wait();
    assert_eq!(refused.status, PutMessageStatus::ServiceNotAvailable);
    assert_eq!(
        store.dispatcher().reput_offset(),
        first,
        "dispatch must not move past the record it could not index"
    );

    std::fs::remove_file(&blocker).unwrap();
    wait_until("dispatch to resume", || store.write_refusal().is_none());
    let second = store.put_message(&message("T", 0, b"second")).wait();
    assert_eq!(second.status, PutMessageStatus::PutOk);
    let second = second.append.unwrap();
    assert_eq!(second.logics_offset, QueueOffset(1));
    assert!(store.dispatcher().wait_caught_up(Duration::from_secs(20)));
    let cq = store.dispatcher().consume_queues().find("T", 0).unwrap();
    assert_eq!(cq.get(QueueOffset(0)).unwrap().physical_offset, first);
    assert_eq!(
        cq.get(QueueOffset(1)).unwrap().physical_offset,
        second.wrote_offset
    );
    assert_eq!(cq.max_offset(), QueueOffset(2));
}
