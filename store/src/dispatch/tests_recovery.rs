use std::collections::BTreeMap;
use std::fs;

use protocol::message::{PhysicalOffset, QueueOffset};

use super::test_harness::*;
use super::*;

const QUEUES: [(&str, i32); 3] = [("A", 0), ("A", 1), ("B", 0)];

fn fill(h: &Harness, from: i64, count: i64) -> Vec<PhysicalOffset> {
    (from..from + count)
        .map(|n| {
            let (topic, queue_id) = QUEUES[(n % 3) as usize];
            h.put(topic, queue_id, n, Some("TagA"), Some(&format!("k{n}")))
                .0
        })
        .collect()
}

type RawQueues = BTreeMap<(String, i32), Vec<(i64, (i64, i32, i64))>>;

fn all_raw_units(h: &Harness) -> RawQueues {
    QUEUES
        .iter()
        .map(|(t, q)| ((t.to_string(), *q), raw_cq_units(&h.queue_dir(t, *q))))
        .collect()
}

#[test]
fn recovery_truncates_units_past_the_commitlog_end() {
    let h = Harness::new();
    let offsets = fill(&h, 0, 90);
    let d = h.start(true, None);
    d.shutdown().unwrap();
    drop(d);

    // CommitLog recovery found its valid end at message 50.
    let end = offsets[50];
    h.log.truncate(end);
    let d = Dispatcher::open(&h.config, h.log.clone(), h.checkpoint()).unwrap();
    let cq_end = d.recover(true).unwrap();
    assert!(
        cq_end > end,
        "queues still point past the end before truncation"
    );
    d.truncate_dirty(end).unwrap();
    d.flush(true).unwrap();

    let raw = all_raw_units(&h);
    for ((topic, queue_id), units) in &raw {
        assert!(
            units
                .iter()
                .all(|(_, (o, s, _))| o + i64::from(*s) <= end.0),
            "{topic}/{queue_id} keeps a unit past {end}"
        );
    }
    let kept: usize = raw.values().map(Vec::len).sum();
    assert_eq!(kept, 50);
    let mut max = d.queue_max_offsets();
    max.sort();
    assert_eq!(
        max,
        vec![
            ("A".into(), 0, QueueOffset(17)),
            ("A".into(), 1, QueueOffset(17)),
            ("B".into(), 0, QueueOffset(16))
        ]
    );

    // The broker rebuilds its queue offsets from the ConsumeQueues and carries on.
    for (topic, queue_id, next) in d.queue_max_offsets() {
        h.log.set_queue_offset(&topic, queue_id, next);
    }
    d.start(d.consume_queues().max_physic_offset().unwrap_or_default())
        .unwrap();
    fill(&h, 50, 30);
    wait_caught_up(&d);
    d.flush(true).unwrap();
    let raw = all_raw_units(&h);
    assert_eq!(raw.values().map(Vec::len).sum::<usize>(), 80);
    for units in raw.values() {
        assert!(
            units
                .windows(2)
                .all(|w| w[0].0 + 1 == w[1].0 && w[0].1.0 < w[1].1.0)
        );
    }
    assert_eq!(
        d.query_message("A", "k51", 8, 0, i64::MAX).messages.len(),
        1
    );
}

#[test]
fn deleted_consumequeue_directory_is_rebuilt_from_the_commitlog() {
    let h = Harness::new();
    fill(&h, 0, 70);
    let d = h.start(true, None);
    d.flush(true).unwrap();
    let before = all_raw_units(&h);
    let mut max_before = d.queue_max_offsets();
    d.shutdown().unwrap();
    drop(d);

    fs::remove_dir_all(h.config.consume_queue_dir()).unwrap();
    let d = h.start(true, None);
    d.flush(true).unwrap();
    assert_eq!(all_raw_units(&h), before);
    let mut max_after = d.queue_max_offsets();
    max_before.sort();
    max_after.sort();
    assert_eq!(max_after, max_before);
}

#[test]
fn abnormal_exit_rebuilds_index_files_newer_than_the_checkpoint() {
    let h = Harness::new();
    let offsets = fill(&h, 0, 40);
    let d = h.start(true, None);
    d.flush(true).unwrap(); // checkpoint now covers the first 40 messages
    fill(&h, 40, 60);
    wait_caught_up(&d);
    let files_before = d.index().file_count();
    drop(d); // crash: no shutdown, the abort file would still be there

    let d = Dispatcher::open(&h.config, h.log.clone(), h.checkpoint()).unwrap();
    d.recover(false).unwrap();
    let files_after = d.index().file_count();
    assert!(files_after < files_before, "{files_after} < {files_before}");
    let index_dir = h.config.index_dir();
    assert_eq!(fs::read_dir(&index_dir).unwrap().count(), files_after);
    assert!(
        d.index()
            .query("B", "k98", 8, 0, i64::MAX)
            .offsets
            .is_empty()
    );

    // Abnormal CommitLog recovery re-dispatches from its recovery start.
    d.start(PhysicalOffset(0)).unwrap();
    for n in 0..100 {
        let topic = QUEUES[(n % 3) as usize].0;
        let found = d.query_message(topic, &format!("k{n}"), 8, 0, i64::MAX);
        assert_eq!(found.messages.len(), 1, "k{n}");
        if let Some(expected) = offsets.get(n as usize) {
            let view = protocol::message::decode(&found.messages[0], false).unwrap();
            assert_eq!(view.physical_offset(), *expected);
        }
    }
    d.shutdown().unwrap();
}

#[test]
fn clean_exit_keeps_every_index_file() {
    let h = Harness::new();
    fill(&h, 0, 60);
    let d = h.start(true, None);
    let files = d.index().file_count();
    d.shutdown().unwrap();
    drop(d);
    let d = Dispatcher::open(&h.config, h.log.clone(), h.checkpoint()).unwrap();
    d.recover(false).unwrap();
    assert_eq!(
        d.index().file_count(),
        files,
        "shutdown flushed and checkpointed everything"
    );
}
