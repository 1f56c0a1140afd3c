//! Deleting a topic's ConsumeQueues while dispatch runs.

use protocol::message::QueueOffset;

use super::test_harness::*;
use crate::lookup::GetMessageStatus;

fn pull_count(d: &super::Dispatcher, topic: &str, queue_id: i32) -> (GetMessageStatus, usize) {
    let r = d.get_message("g", topic, queue_id, QueueOffset(0), 64, None);
    (r.status, r.messages.len())
}

#[test]
fn deleted_topic_loses_queues_and_files_and_restarts_at_offset_zero() {
    let h = Harness::new();
    for n in 0..12 {
        h.put("Gone", (n % 2) as i32, n, Some("TagA"), None);
        h.put("Kept", 0, n, None, None);
        h.put("%RETRY%g", 0, n, None, None);
        h.put("%DLQ%g", 0, n, None, None);
    }
    let d = h.start(true, None);
    assert_eq!(raw_cq_units(&h.queue_dir("Gone", 0)).len(), 6);
    assert!(h.queue_dir("Gone", 1).exists());

    let deleted = d
        .delete_topic("Gone", || h.log.forget_topic("Gone"))
        .unwrap();
    assert_eq!(deleted, 2);
    let topic_dir = h.config.consume_queue_dir().join("Gone");
    assert!(
        !topic_dir.exists(),
        "the topic's ConsumeQueue directory is removed"
    );
    assert!(d.consume_queues().find("Gone", 0).is_none());
    assert_eq!(
        pull_count(&d, "Gone", 0),
        (GetMessageStatus::NoMatchedLogicQueue, 0)
    );
    // Other topics, including the group's retry and DLQ topics, are untouched.
    for topic in ["Kept", "%RETRY%g", "%DLQ%g"] {
        // 5 units per ConsumeQueue file: a pull stops at the file end.
        assert_eq!(pull_count(&d, topic, 0), (GetMessageStatus::Found, 5));
        assert_eq!(raw_cq_units(&h.queue_dir(topic, 0)).len(), 12);
    }

    // The re-created topic starts at 0 and holds only its new message.
    let (physical, queue_offset) = h.put("Gone", 0, 100, Some("TagA"), None);
    assert_eq!(queue_offset, QueueOffset(0));
    wait_caught_up(&d);
    let queue = d.consume_queues().find("Gone", 0).unwrap();
    assert_eq!(
        (queue.min_offset(), queue.max_offset()),
        (QueueOffset(0), QueueOffset(1))
    );
    let units = raw_cq_units(&h.queue_dir("Gone", 0));
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].0, 0);
    assert_eq!(units[0].1.0, physical.0);
    assert!(d.consume_queues().find("Gone", 1).is_none());
    d.shutdown().unwrap();
}

#[test]
fn records_appended_before_the_deletion_never_recreate_the_queue() {
    let h = Harness::new();
    for n in 0..3 {
        h.put("Gone", 0, n, None, None);
    }
    let d = h.start(true, None);
    // Records of the old life appended while the deletion holds the dispatch gate: the
    // reput thread reads them but may only index them after the deletion finished.
    let deleted = d
        .delete_topic("Gone", || {
            for n in 3..7 {
                h.put("Gone", 0, n, None, None);
            }
            h.log.forget_topic("Gone")
        })
        .unwrap();
    assert_eq!(deleted, 1);
    wait_caught_up(&d);
    assert!(
        d.consume_queues().find("Gone", 0).is_none(),
        "old-life records were skipped, not indexed"
    );
    assert!(!h.queue_dir("Gone", 0).exists());

    let (physical, queue_offset) = h.put("Gone", 0, 50, None, None);
    assert_eq!(queue_offset, QueueOffset(0));
    wait_caught_up(&d);
    let r = d.get_message("g", "Gone", 0, QueueOffset(0), 64, None);
    assert_eq!((r.status, r.messages.len()), (GetMessageStatus::Found, 1));
    let units = raw_cq_units(&h.queue_dir("Gone", 0));
    assert_eq!(units.len(), 1);
    assert_eq!((units[0].0, units[0].1.0), (0, physical.0));
    d.shutdown().unwrap();
}

#[test]
fn concurrent_pulls_during_deletion_get_clean_statuses() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let h = Harness::new();
    for n in 0..40 {
        h.put("Gone", 0, n, None, None);
    }
    let d = Arc::new(h.start(true, None));
    let deleted = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    // Pulls made before and after the deletion, by all pullers.
    let (before, after) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let pullers: Vec<_> = (0..2)
        .map(|_| {
            let (d, deleted, stop) = (Arc::clone(&d), Arc::clone(&deleted), Arc::clone(&stop));
            let (before, after) = (Arc::clone(&before), Arc::clone(&after));
            std::thread::spawn(move || {
                let mut after_deletion = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    for offset in [0, 7, 39] {
                        let done = deleted.load(Ordering::Acquire);
                        // Pulls racing the deletion may see the queue half gone
                        // (OFFSET_FOUND_NULL, NO_MESSAGE_IN_QUEUE, ...): any status, no panic.
                        let r = d.get_message("g", "Gone", 0, QueueOffset(offset), 8, None);
                        if done {
                            after_deletion.push(r.status);
                            after.fetch_add(1, Ordering::Release);
                        } else {
                            before.fetch_add(1, Ordering::Release);
                        }
                    }
                }
                after_deletion
            })
        })
        .collect();
    let reached = |count: &AtomicUsize, n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count.load(Ordering::Acquire) < n {
            assert!(std::time::Instant::now() < deadline, "the pullers stalled");
            std::thread::yield_now();
        }
    };
    // The deletion lands among pulls, and pulls go on after it.
    reached(&before, 200);
    d.delete_topic("Gone", || h.log.forget_topic("Gone"))
        .unwrap();
    deleted.store(true, Ordering::Release);
    reached(&after, 200);
    stop.store(true, Ordering::Release);
    // The 200 pulls after the deletion may all be one puller's (the other descheduled),
    // so the statuses are checked over all pullers together.
    let after: Vec<_> = pullers
        .into_iter()
        .flat_map(|p| p.join().expect("a puller panicked"))
        .collect();
    assert!(after.len() >= 200);
    assert!(
        after
            .iter()
            .all(|s| *s == GetMessageStatus::NoMatchedLogicQueue),
        "{after:?}"
    );
}

#[test]
fn a_restart_that_dispatches_again_keeps_the_topic_deleted() {
    let h = Harness::new();
    for n in 0..4 {
        h.put("Kept", 0, n, None, None);
    }
    // The deleted topic's records are the newest: a restart re-dispatches them.
    for n in 4..10 {
        h.put("Gone", 0, n, None, None);
    }
    let d = h.start(true, None);
    d.delete_topic("Gone", || h.log.forget_topic("Gone"))
        .unwrap();
    let (new_life, _) = h.put("Gone", 1, 20, None, None);
    wait_caught_up(&d);
    d.shutdown().unwrap();
    drop(d);
    let recorded =
        std::fs::read_to_string(h.config.config_dir().join(super::DELETED_TOPICS_FILE)).unwrap();
    assert!(recorded.contains("\"Gone\""), "{recorded}");

    // Dispatch everything again from the start of the CommitLog.
    let d = h.start(true, Some(protocol::message::PhysicalOffset(0)));
    assert!(d.consume_queues().find("Gone", 0).is_none());
    assert!(!h.queue_dir("Gone", 0).exists());
    let units = raw_cq_units(&h.queue_dir("Gone", 1));
    assert_eq!(units.len(), 1, "the new life survives");
    assert_eq!((units[0].0, units[0].1.0), (0, new_life.0));
    assert_eq!(raw_cq_units(&h.queue_dir("Kept", 0)).len(), 4);
    d.shutdown().unwrap();
}

#[test]
fn retention_past_the_boundary_forgets_the_deletion() {
    use super::CommitLogReader;
    use protocol::message::PhysicalOffset;

    let h = Harness::new();
    for n in 0..30 {
        h.put("Gone", 0, n, None, Some(&"k".repeat(100)));
    }
    let d = h.start(true, None);
    let mut boundary = PhysicalOffset(0);
    d.delete_topic("Gone", || {
        boundary = h.log.forget_topic("Gone");
        boundary
    })
    .unwrap();
    let file = h.config.config_dir().join(super::DELETED_TOPICS_FILE);
    assert!(std::fs::read_to_string(&file).unwrap().contains("\"Gone\""));
    // Retention removes every CommitLog file holding the old life.
    let size = LOG_FILE_SIZE as i64;
    let next_file = PhysicalOffset((boundary.0 / size + 1) * size);
    let mut n = 100;
    while h.log.max_offset() <= next_file {
        h.put("Other", 0, n, None, None);
        n += 1;
    }
    h.log.delete_files_below(next_file);
    d.on_commit_log_min_offset(next_file).unwrap();
    assert!(!std::fs::read_to_string(&file).unwrap().contains("\"Gone\""));
    d.shutdown().unwrap();
}
