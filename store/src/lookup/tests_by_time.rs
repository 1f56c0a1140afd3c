//! `offset_in_queue_by_time` follows RocketMQ 4.9's `ConsumeQueue.getOffsetInQueueByTime`.

use std::fs::File;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use protocol::message::QueueOffset;

use crate::dispatch::Dispatcher;
use crate::dispatch::test_harness::*;

fn by_time(d: &Dispatcher, at: i64) -> i64 {
    d.offset_in_queue_by_time("T", 0, at).0
}

fn set_mtime(h: &Harness, file_start: i64, millis: i64) {
    let path = h
        .queue_dir("T", 0)
        .join(crate::consume_queue::file_name(file_start));
    let when = UNIX_EPOCH + Duration::from_millis(millis as u64);
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

/// Messages at the given store-time seconds after T0, one ConsumeQueue file of 100 units
/// (its mtime, now, is after every store time, so it is the file searched).
fn single_file(seconds: &[i64]) -> (Harness, Dispatcher) {
    let mut h = Harness::new();
    h.config.mapped_file_size_consume_queue = 100 * 20;
    for &n in seconds {
        h.put("T", 0, n, None, None);
    }
    let d = h.start(true, None);
    (h, d)
}

#[test]
fn exact_between_before_and_after() {
    // Store times T0 + 0 s, 1 s, ..., 9 s at offsets 0..=9.
    let (_h, d) = single_file(&(0..10).collect::<Vec<_>>());
    assert_eq!(by_time(&d, T0 + 4000), 4, "exact store time");
    assert_eq!(by_time(&d, T0 + 4001), 4, "closer to the older neighbour");
    assert_eq!(by_time(&d, T0 + 4999), 5, "closer to the newer neighbour");
    assert_eq!(
        by_time(&d, T0 + 4500),
        4,
        "a tie goes to the older neighbour"
    );
    assert_eq!(
        by_time(&d, 0),
        0,
        "before the first message: the first offset"
    );
    assert_eq!(by_time(&d, T0 - 1), 0);
    // After the last message: the LAST message's offset, not the max offset (10).
    assert_eq!(by_time(&d, T0 + 9001), 9);
    assert_eq!(by_time(&d, i64::MAX), 9);
    assert_eq!(d.offset_in_queue_by_time("Nope", 0, T0), QueueOffset(0));
}

#[test]
fn equal_store_times_return_the_first_bisection_hit() {
    // Offsets 0..=6 all stored at T0 + 5 s: the first probe (offset 3) matches and wins,
    // where a lower-bound search would answer 0.
    let (_h, d) = single_file(&[5, 5, 5, 5, 5, 5, 5]);
    assert_eq!(by_time(&d, T0 + 5000), 3);
    // Offsets 0..=3 at 1 s, 4..=7 at 2 s: the probes are 3 (1 s, older), 5 (2 s): hit.
    let (_h, d) = single_file(&[1, 1, 1, 1, 2, 2, 2, 2]);
    assert_eq!(by_time(&d, T0 + 2000), 5);
}

#[test]
fn only_the_file_chosen_by_mtime_is_searched() {
    // 5 units per file: offsets 0..=4 in file 0, 5..=9 in file 1, 10..=11 in file 2;
    // store times T0 + n s.
    let h = Harness::new();
    for n in 0..12 {
        h.put("T", 0, n, None, None);
    }
    let d = h.start(true, None);
    d.shutdown().unwrap();
    // File mtimes as RocketMQ sees them: about when the file's last unit was written.
    set_mtime(&h, 0, T0 + 4000);
    set_mtime(&h, 100, T0 + 9000);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    set_mtime(&h, 200, now);

    assert_eq!(by_time(&d, T0 + 2000), 2, "file 0 (mtime >= time), exact");
    // T0 + 4.4 s: file 0's mtime is older, so file 1 is searched, and the time lies
    // before its first message: offset 5, although offset 4 (T0 + 4 s) is closer.
    assert_eq!(by_time(&d, T0 + 4400), 5);
    assert_eq!(by_time(&d, T0 + 7400), 7, "file 1, closer older neighbour");
    // Past every message: the newest file's last message.
    assert_eq!(by_time(&d, now + 1), 11);

    // An older mtime on file 1 sends even an exact time of its messages to file 2.
    set_mtime(&h, 100, T0 + 5000);
    assert_eq!(
        by_time(&d, T0 + 6000),
        10,
        "file 2, before its first message"
    );
}

#[test]
fn units_below_the_commitlog_minimum_count_as_older() {
    // One ConsumeQueue file of 100 units over several 4 KiB CommitLog files; then the
    // first CommitLog file goes (retention) while the queue still lists its units.
    let mut h = Harness::new();
    h.config.mapped_file_size_consume_queue = 100 * 20;
    let mut offsets = Vec::new();
    for n in 0..60 {
        offsets.push(h.put("T", 0, n, None, Some(&"k".repeat(60))).0);
    }
    let d = h.start(true, None);
    let second_file = offsets
        .iter()
        .position(|o| o.0 >= LOG_FILE_SIZE as i64)
        .expect("messages span several CommitLog files");
    h.log
        .delete_files_below(protocol::message::PhysicalOffset(LOG_FILE_SIZE as i64));
    // A time before every message: RocketMQ answers the first unit still in the
    // CommitLog, since the removed ones are skipped without a store time.
    assert_eq!(by_time(&d, 0), second_file as i64);
    assert_eq!(
        by_time(&d, T0 + 1000 * (second_file as i64 + 3)),
        second_file as i64 + 3
    );
}
