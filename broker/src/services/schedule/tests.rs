//! The schedule service over a real store in a temporary directory.

use std::sync::Arc;

use protocol::message::QueueOffset;
use protocol::message::properties;

use super::*;
use crate::test_fixture::{self, bodies, wait_until};
use store::commitlog::BrokerMessage;

const LEVELS: &str = "messageDelayLevel=0s 1h\nflushDelayOffsetInterval=100\n";

/// A broker whose level 1 waits 0 s, so parked messages are due at once.
fn broker(dir: &Path) -> Arc<Broker> {
    test_fixture::broker(dir, LEVELS)
}

fn delayed(topic: &str, queue_id: i32, level: i32, n: usize) -> BrokerMessage {
    test_fixture::message(
        topic,
        queue_id,
        &format!("m{n}"),
        format!("UNIQ_KEY\u{1}U{n:08}\u{2}DELAY\u{1}{level}\u{2}TAGS\u{1}A"),
    )
}

#[test]
fn due_messages_reach_their_queue_in_order_and_progress_is_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let b = broker(dir.path());
    rt.block_on(async {
        for n in 0..50 {
            b.put(crate::services::put_path::Put::Message(delayed(
                "T", 2, 1, n,
            )))
            .await;
        }
        // Level 2 (1 h) stays parked.
        b.put(crate::services::put_path::Put::Message(delayed(
            "T", 2, 2, 99,
        )))
        .await;
    });
    let service = rt.spawn(run(Arc::clone(&b)));
    wait_until("delivery", || {
        b.store.max_offset_in_queue("T", 2) == QueueOffset(50)
    });
    let got = bodies(&b, "T", 2);
    let want: Vec<String> = (0..50).map(|n| format!("m{n}")).collect();
    assert_eq!(got.iter().map(|(b, _)| b.clone()).collect::<Vec<_>>(), want);
    let props = &got[0].1;
    assert_eq!(properties::find(props, "DELAY"), None);
    assert_eq!(properties::find(props, "REAL_TOPIC"), Some("T"));
    assert_eq!(properties::find(props, "REAL_QID"), Some("2"));
    assert_eq!(properties::find(props, "UNIQ_KEY"), Some("U00000000"));
    assert_eq!(b.schedule.waiting(b.store.as_ref())[..2], [(1, 0), (2, 1)]);

    // The periodic flush writes delayOffset.json.
    let path = delay_offset_path(dir.path());
    wait_until("delayOffset.json", || {
        std::fs::read_to_string(&path).is_ok_and(|t| t.contains("1:50"))
    });
    b.shutdown.cancel();
    rt.block_on(service).unwrap();
    b.persist_all();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("1:50") && text.contains("2:0"), "{text}");
}

#[test]
fn stale_offsets_after_a_crash_skip_what_was_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let b = broker(dir.path());
    rt.block_on(async {
        for n in 0..30 {
            b.put(crate::services::put_path::Put::Message(delayed(
                "T", 0, 1, n,
            )))
            .await;
        }
    });
    let service = rt.spawn(run(Arc::clone(&b)));
    wait_until("delivery", || {
        b.store.max_offset_in_queue("T", 0) == QueueOffset(30)
    });
    b.shutdown.cancel();
    rt.block_on(service).unwrap();
    rt.block_on(async {
        for n in 30..40 {
            b.put(crate::services::put_path::Put::Message(delayed(
                "T", 0, 1, n,
            )))
            .await;
        }
    });
    wait_until("index", || b.store.dispatch_behind_bytes() == 0);
    // As if delayOffset.json had last been written at offset 10: units 10..30 have
    // copies and are skipped; 30..40 were never delivered.
    let skipped = recovery::skip_delivered(b.store.as_ref(), 1, QueueOffset(10));
    assert_eq!(skipped, QueueOffset(30));
    assert_eq!(
        recovery::skip_delivered(b.store.as_ref(), 1, QueueOffset(35)),
        QueueOffset(35)
    );
    assert_eq!(
        recovery::skip_delivered(b.store.as_ref(), 2, QueueOffset(0)),
        QueueOffset(0)
    );
}

/// Two parked messages under one `UNIQ_KEY`, the second parked before the first was
/// delivered: after a crash the second (still waiting at level 2) is not taken for
/// delivered because the first's copy shares its key and came after it.
#[test]
fn a_delivered_copy_counts_only_for_its_own_parked_record() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let b = broker(dir.path());
    let same_key = |n: usize, level: i32| {
        test_fixture::message(
            "T",
            0,
            &format!("m{n}"),
            format!("UNIQ_KEY\u{1}SAME\u{2}DELAY\u{1}{level}\u{2}TAGS\u{1}A"),
        )
    };
    rt.block_on(async {
        b.put(crate::services::put_path::Put::Message(same_key(0, 2)))
            .await;
        b.put(crate::services::put_path::Put::Message(same_key(1, 1)))
            .await;
    });
    let service = rt.spawn(run(Arc::clone(&b)));
    wait_until("delivery", || {
        b.store.max_offset_in_queue("T", 0) == QueueOffset(1)
    });
    b.shutdown.cancel();
    rt.block_on(service).unwrap();
    wait_until("index", || b.store.dispatch_behind_bytes() == 0);
    assert_eq!(
        recovery::skip_delivered(b.store.as_ref(), 1, QueueOffset(0)),
        QueueOffset(1)
    );
    assert_eq!(
        recovery::skip_delivered(b.store.as_ref(), 2, QueueOffset(0)),
        QueueOffset(0)
    );
}

#[test]
fn offsets_load_and_correct_into_the_queue_range() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(delay_offset_path(dir.path()));
    let mut table = DelayOffsetTable::default();
    table.offset_table.insert(1, QueueOffset(7));
    table.offset_table.insert(2, QueueOffset(-3));
    file.persist(&table).unwrap();
    let b = broker(dir.path());
    assert_eq!(b.schedule.offset(1), QueueOffset(7));
    assert_eq!(b.schedule.delay_ms(2), 3_600_000);
    // The queues are empty: both offsets come back to 0.
    b.schedule.correct_offsets(b.store.as_ref());
    assert_eq!(b.schedule.offset(1), QueueOffset(0));
    assert_eq!(b.schedule.offset(2), QueueOffset(0));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn close(b: Arc<Broker>) {
    b.persist_all();
    b.store.shutdown().expect("store shutdown");
}

/// An operator lowered `maxMessageSize` while a larger message was parked: the store
/// refuses its copy for good, and the messages behind it are still delivered.
#[test]
fn a_delayed_message_the_store_refuses_for_good_does_not_stop_its_level() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    // The parked message must outlive a restart: the file store.
    let b = test_fixture::broker_on_files(dir.path(), LEVELS);
    let mut big = delayed("T", 0, 1, 0);
    big.body = bytes::Bytes::from(vec![b'x'; 2000]);
    rt.block_on(b.put(crate::services::put_path::Put::Message(big)));
    close(b);

    let b = test_fixture::broker_on_files(dir.path(), &format!("{LEVELS}maxMessageSize=1024\n"));
    rt.block_on(async {
        for n in 1..3 {
            b.put(crate::services::put_path::Put::Message(delayed(
                "T", 0, 1, n,
            )))
            .await;
        }
    });
    let service = rt.spawn(run(Arc::clone(&b)));
    wait_until("delivery behind the refused message", || {
        b.store.max_offset_in_queue("T", 0) == QueueOffset(2)
    });
    let got: Vec<String> = bodies(&b, "T", 0).into_iter().map(|(b, _)| b).collect();
    assert_eq!(got, ["m1", "m2"]);
    assert_eq!(b.metrics.skips.schedule.get("put_refused"), 1);
    let text = b.metrics.encode().unwrap();
    assert!(
        text.contains("rocketmq_broker_schedule_skipped_total{reason=\"put_refused\"} 1"),
        "{text}"
    );
    // The parked record stays where it was; the level's offset is past it.
    assert_eq!(
        b.store.max_offset_in_queue(SCHEDULE_TOPIC, 0),
        QueueOffset(3)
    );
    assert_eq!(b.schedule.offset(1), QueueOffset(3));
    b.shutdown.cancel();
    rt.block_on(service).unwrap();
}

/// A record in `SCHEDULE_TOPIC_XXXX` without a real destination (not one the store
/// parked) is counted and passed.
#[test]
fn a_parked_record_without_destination_is_counted_and_passed() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let b = broker(dir.path());
    rt.block_on(async {
        let stray = test_fixture::message(SCHEDULE_TOPIC, 0, "stray", "TAGS\u{1}A".to_owned());
        b.put(crate::services::put_path::Put::Message(stray)).await;
        b.put(crate::services::put_path::Put::Message(delayed(
            "T", 1, 1, 7,
        )))
        .await;
    });
    let service = rt.spawn(run(Arc::clone(&b)));
    wait_until("delivery behind the stray record", || {
        b.store.max_offset_in_queue("T", 1) == QueueOffset(1)
    });
    assert_eq!(bodies(&b, "T", 1)[0].0, "m7");
    assert_eq!(b.metrics.skips.schedule.get("no_destination"), 1);
    b.shutdown.cancel();
    rt.block_on(service).unwrap();
}
