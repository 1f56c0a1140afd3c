use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use protocol::message::{PhysicalOffset, QueueOffset, TransactionType, decode};

use super::memory_log::TestMessage;
use super::test_harness::*;
use super::*;

#[derive(Default)]
struct Recorder(Mutex<Vec<(String, i32, QueueOffset, i64)>>);

impl MessageArrivalListener for Recorder {
    fn arriving(&self, m: &ArrivedMessage<'_>) {
        self.0
            .lock()
            .push((m.topic.to_string(), m.queue_id, m.max_offset, m.tags_code));
    }
}

type Expected = BTreeMap<(String, i32), Vec<(i64, i32, i64)>>;

/// 150 messages over three queues, with prepared and rollback records mixed in.
fn fill(
    h: &Harness,
    from: i64,
    count: i64,
    expected: &mut Expected,
) -> Vec<(i64, TransactionType, PhysicalOffset)> {
    let mut puts = Vec::new();
    for n in from..from + count {
        let (topic, queue_id) = [("A", 0), ("A", 1), ("B", 0)][(n % 3) as usize];
        let tags = [Some("TagA"), Some("TagB"), None][(n % 4 % 3) as usize];
        let transaction = match n {
            n if n % 10 == 7 => TransactionType::Prepared,
            n if n % 15 == 4 => TransactionType::Rollback,
            _ => TransactionType::Not,
        };
        let keys = format!("k{n} common");
        let (offset, _) = h.put_tx(topic, queue_id, n, tags, Some(&keys), transaction);
        if transaction == TransactionType::Not {
            let size = record_size(h, offset);
            let tags_code = tags.map_or(0, ref_java_hash);
            expected
                .entry((topic.to_string(), queue_id))
                .or_default()
                .push((offset.0, size, tags_code));
        }
        puts.push((n, transaction, offset));
    }
    puts
}

fn record_size(h: &Harness, offset: PhysicalOffset) -> i32 {
    let head = h.log.read(offset, 4).unwrap();
    i32::from_be_bytes([head[0], head[1], head[2], head[3]])
}

fn assert_cq_matches(h: &Harness, expected: &Expected) {
    for ((topic, queue_id), units) in expected {
        let raw = h_units(h, topic, *queue_id);
        assert_eq!(raw.len(), units.len(), "{topic}/{queue_id}");
        for (n, ((logical, unit), want)) in raw.iter().zip(units).enumerate() {
            assert_eq!(*logical, n as i64);
            assert_eq!(*unit, *want, "{topic}/{queue_id} unit {n}");
            let record = h.log.read(PhysicalOffset(unit.0), unit.1 as usize).unwrap();
            let view = decode(&record, true).unwrap();
            assert_eq!(
                (view.topic(), view.queue_id(), view.queue_offset()),
                (topic.as_str(), *queue_id, QueueOffset(n as i64))
            );
        }
    }
}

fn h_units(h: &Harness, topic: &str, queue_id: i32) -> Vec<(i64, (i64, i32, i64))> {
    raw_cq_units(&h.queue_dir(topic, queue_id))
}

#[test]
fn dispatch_round_trip_across_many_file_boundaries() {
    let h = Harness::new();
    let d = h.start(true, None);
    let recorder = Arc::new(Recorder::default());
    d.set_arrival_listener(recorder.clone());

    let mut expected = Expected::new();
    let puts = fill(&h, 0, 150, &mut expected);
    wait_caught_up(&d);
    d.flush(true).unwrap();

    assert!(
        h.log.max_offset().0 > 4 * LOG_FILE_SIZE as i64,
        "spans CommitLog files (BLANKs)"
    );
    assert!(
        std::fs::read_dir(h.queue_dir("A", 0)).unwrap().count() >= 5,
        "spans CQ files"
    );
    assert_cq_matches(&h, &expected);
    assert_eq!(d.dispatch_behind_bytes(), 0);
    assert_eq!(
        d.consume_queues().find("A", 1).unwrap().max_offset().0 as usize,
        expected[&("A".to_string(), 1)].len()
    );

    // Index: NOT and PREPARED records are indexed under KEYS and UNIQ_KEY, ROLLBACK not.
    assert!(d.index().file_count() > 10, "spans IndexFiles");
    for (n, transaction, offset) in &puts {
        let topic = ["A", "A", "B"][(n % 3) as usize];
        let by_key = d.query_message(topic, &format!("k{n}"), 32, 0, i64::MAX);
        let by_uniq = d.query_message(topic, &format!("UNIQ{n:08}"), 32, 0, i64::MAX);
        if *transaction == TransactionType::Rollback {
            assert!(
                by_key.messages.is_empty() && by_uniq.messages.is_empty(),
                "rollback {n} indexed"
            );
        } else {
            for found in [&by_key, &by_uniq] {
                assert_eq!(found.messages.len(), 1, "key of {n}");
                assert_eq!(
                    decode(&found.messages[0], false).unwrap().physical_offset(),
                    *offset
                );
            }
        }
    }

    // One arrival per consume-queue unit, in order, with the queue's new max offset.
    let arrivals = recorder.0.lock().clone();
    assert_eq!(
        arrivals.len(),
        expected.values().map(Vec::len).sum::<usize>()
    );
    let last_b = arrivals.iter().rev().find(|a| a.0 == "B").unwrap();
    assert_eq!(last_b.2.0 as usize, expected[&("B".to_string(), 0)].len());
    d.shutdown().unwrap();
}

#[test]
fn replayed_dispatch_adds_nothing() {
    let h = Harness::new();
    let mut expected = Expected::new();
    let puts = fill(&h, 0, 60, &mut expected);
    let indexed_in_a = puts
        .iter()
        .filter(|(n, t, _)| n % 3 != 2 && *t != TransactionType::Rollback)
        .count();
    let d = h.start(true, None);
    d.shutdown().unwrap();
    drop(d);

    // Restart and re-dispatch everything from offset 0: units and index entries are skipped.
    let d = h.start(true, Some(PhysicalOffset(0)));
    d.flush(true).unwrap();
    assert_cq_matches(&h, &expected);
    assert_eq!(
        d.query_message("A", "common", 64, 0, i64::MAX)
            .messages
            .len(),
        indexed_in_a
    );
    assert_eq!(d.index().query("A", "k3", 32, 0, i64::MAX).offsets.len(), 1);

    // And dispatch continues normally afterwards.
    fill(&h, 60, 30, &mut expected);
    wait_caught_up(&d);
    d.flush(true).unwrap();
    assert_cq_matches(&h, &expected);
}

#[test]
fn schedule_topic_units_carry_deliver_time() {
    let h = Harness::new();
    let d = h.start(true, None);
    let put = |delay: Option<&str>, n: i64| {
        let mut properties = String::from("TAGS\u{1}TagA\u{2}");
        if let Some(level) = delay {
            properties.push_str(&format!("DELAY\u{1}{level}\u{2}"));
        }
        h.log.append(&TestMessage {
            topic: SCHEDULE_TOPIC,
            queue_id: 2,
            properties,
            transaction: TransactionType::Not,
            body: b"x",
            store_timestamp: T0 + n,
        });
    };
    put(Some("3"), 0);
    put(Some("99"), 1);
    put(None, 2);
    put(Some("0"), 3);
    wait_caught_up(&d);
    d.flush(true).unwrap();
    let tags: Vec<i64> = h_units(&h, SCHEDULE_TOPIC, 2)
        .iter()
        .map(|(_, u)| u.2)
        .collect();
    assert_eq!(
        tags,
        vec![
            T0 + 10_000,
            T0 + 1 + 7_200_000,
            ref_java_hash("TagA"),
            ref_java_hash("TagA")
        ]
    );
}
