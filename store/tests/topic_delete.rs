//! `MessageStore::delete_topic` on real files: the topic's ConsumeQueue directory goes,
//! its queue offsets restart at 0, other topics are untouched, and a clean restart (which
//! dispatches again from the highest indexed record) does not bring the old life back.
#![allow(clippy::unwrap_used)]

mod common;

use common::{message_for, small_config};
use protocol::message::QueueOffset;
use store::dispatch::DELETED_TOPICS_FILE;
use store::lookup::GetMessageStatus;
use store::{FlushDiskType, MessageStore, PutMessageStatus};

const FILE_SIZE: u32 = 16 * 1024;

fn put(store: &MessageStore, topic: &str, queue_id: i32, id: u64) -> QueueOffset {
    let mut msg = message_for(id);
    msg.topic = topic.to_owned();
    msg.queue_id = queue_id;
    let r = store.put_message(&msg).wait();
    assert_eq!(r.status, PutMessageStatus::PutOk);
    r.append.expect("append result").logics_offset
}

fn wait_dispatched(store: &MessageStore) {
    assert!(
        store
            .dispatcher()
            .wait_caught_up(std::time::Duration::from_secs(10))
    );
}

#[test]
fn deleted_topic_restarts_at_zero_and_stays_deleted_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path(), FILE_SIZE, FlushDiskType::AsyncFlush);
    let cq_root = config.consume_queue_dir();
    let store = MessageStore::open(config.clone()).unwrap();
    for id in 0..40 {
        put(&store, "Kept", (id % 2) as i32, id);
    }
    // The deleted topic's records are the newest in the CommitLog, spread over files.
    for id in 40..100 {
        put(&store, "Gone", (id % 4) as i32, id);
    }
    wait_dispatched(&store);
    assert!(store.commit_log().mapped_files().file_count() > 2);
    assert_eq!(store.delete_topic("Gone").unwrap(), 4);
    assert!(!cq_root.join("Gone").exists());
    assert_eq!(store.commit_log().queue_offset("Gone", 0), QueueOffset(0));
    let r = store
        .dispatcher()
        .get_message("g", "Gone", 0, QueueOffset(0), 32, None);
    assert_eq!(r.status, GetMessageStatus::NoMatchedLogicQueue);
    assert_eq!(put(&store, "Gone", 2, 1000), QueueOffset(0));
    wait_dispatched(&store);
    store.shutdown().unwrap();
    drop(store);
    assert!(
        config.config_dir().join(DELETED_TOPICS_FILE).is_file(),
        "the deletion is recorded"
    );

    let store = MessageStore::open(config).unwrap();
    assert!(store.last_exit_ok());
    let queues = store.dispatcher().consume_queues();
    for q in [0, 1, 3] {
        assert!(queues.find("Gone", q).is_none(), "queue {q} came back");
    }
    let new_life = queues.find("Gone", 2).expect("the new life's queue");
    assert_eq!(
        (new_life.min_offset(), new_life.max_offset()),
        (QueueOffset(0), QueueOffset(1))
    );
    assert_eq!(store.commit_log().queue_offset("Gone", 2), QueueOffset(1));
    for q in 0..2 {
        let kept = queues.find("Kept", q).expect("kept queue");
        assert_eq!(kept.max_offset(), QueueOffset(20));
    }
    store.shutdown().unwrap();
}
