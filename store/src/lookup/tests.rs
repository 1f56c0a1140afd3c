use std::fs;

use protocol::message::{PhysicalOffset, QueueOffset, decode};

use super::*;
use crate::config::BrokerRole;
use crate::dispatch::test_harness::*;
use crate::dispatch::{CommitLogReader, Dispatcher};

struct Tags(Vec<i64>);

impl MessageFilter for Tags {
    fn matches_consume_queue(&self, tags_code: i64) -> bool {
        self.0.contains(&tags_code)
    }
}

struct RejectRecords;

impl MessageFilter for RejectRecords {
    fn matches_consume_queue(&self, _: i64) -> bool {
        true
    }
    fn matches_commit_log(&self, _: &[u8]) -> bool {
        false
    }
}

/// 40 messages in queue T/0, tags alternating TagA/TagB, stored 1 s apart.
/// ConsumeQueue files of 100 units, so one pull is not cut short by a file end.
fn setup() -> (Harness, Dispatcher, Vec<PhysicalOffset>) {
    let mut h = Harness::new();
    h.config.mapped_file_size_consume_queue = 100 * 20;
    let offsets = (0..40)
        .map(|n| {
            let tags = if n % 2 == 0 { "TagA" } else { "TagB" };
            h.put("T", 0, n, Some(tags), Some(&format!("key{n} all"))).0
        })
        .collect();
    let d = h.start(true, None);
    (h, d, offsets)
}

fn get(
    d: &Dispatcher,
    offset: i64,
    max: usize,
    filter: Option<&dyn MessageFilter>,
) -> GetMessageResult {
    d.get_message("g", "T", 0, QueueOffset(offset), max, filter)
}

fn summary(r: &GetMessageResult) -> (GetMessageStatus, i64, i64, i64, usize) {
    (
        r.status,
        r.next_begin_offset.0,
        r.min_offset.0,
        r.max_offset.0,
        r.messages.len(),
    )
}

#[test]
fn found_returns_zero_copy_records_in_order() {
    let (_h, d, offsets) = setup();
    let r = get(&d, 3, 5, None);
    assert_eq!(summary(&r), (GetMessageStatus::Found, 8, 0, 40, 5));
    for (i, record) in r.messages.iter().enumerate() {
        let view = decode(record, true).unwrap();
        assert_eq!(view.queue_offset(), QueueOffset(3 + i as i64));
        assert_eq!(view.physical_offset(), offsets[3 + i]);
        assert_eq!(view.body(), format!("body-{}", 3 + i).as_bytes());
    }
    assert_eq!(r.queue_offsets, (3..8).map(QueueOffset).collect::<Vec<_>>());
    assert_eq!(
        r.buffer_total_size,
        r.messages.iter().map(|m| m.len()).sum::<usize>()
    );
}

#[test]
fn queue_and_offset_boundary_statuses() {
    let (h, d, _) = setup();
    let r = d.get_message("g", "Nope", 0, QueueOffset(5), 8, None);
    assert_eq!(
        summary(&r),
        (GetMessageStatus::NoMatchedLogicQueue, 0, 0, 0, 0)
    );

    d.consume_queues().find_or_create("Empty", 0).unwrap();
    let r = d.get_message("g", "Empty", 0, QueueOffset(3), 8, None);
    assert_eq!(
        summary(&r),
        (GetMessageStatus::NoMessageInQueue, 0, 0, 0, 0)
    );

    assert_eq!(
        summary(&get(&d, 40, 8, None)),
        (GetMessageStatus::OffsetOverflowOne, 40, 0, 40, 0)
    );
    // RocketMQ 4.9: overflow on a queue still starting at 0 goes back to 0.
    assert_eq!(
        summary(&get(&d, 45, 8, None)),
        (GetMessageStatus::OffsetOverflowBadly, 0, 0, 40, 0)
    );

    // Retention removes the first CommitLog files; queues follow their new minimum.
    let min = PhysicalOffset(LOG_FILE_SIZE as i64);
    h.log.delete_files_below(min);
    assert_eq!(h.log.min_offset(), min);
    d.on_commit_log_min_offset(h.log.min_offset()).unwrap();
    let r = get(&d, 0, 8, None);
    assert_eq!(r.status, GetMessageStatus::OffsetTooSmall);
    let new_min = r.min_offset.0;
    assert!(new_min > 0 && r.next_begin_offset.0 == new_min);
    let first = get(&d, new_min, 1, None);
    assert_eq!(first.status, GetMessageStatus::Found);
    assert!(decode(&first.messages[0], false).unwrap().physical_offset() >= min);
    assert_eq!(
        summary(&get(&d, 45, 8, None)),
        (GetMessageStatus::OffsetOverflowBadly, 40, new_min, 40, 0)
    );
}

#[test]
fn slave_keeps_the_requested_offset() {
    let (mut h, d, _) = setup();
    d.shutdown().unwrap();
    drop(d);
    h.config.broker_role = BrokerRole::Slave;
    let d = h.start(true, None);
    assert_eq!(
        summary(&get(&d, 45, 8, None)),
        (GetMessageStatus::OffsetOverflowBadly, 45, 0, 40, 0)
    );
}

#[test]
fn filters_and_no_matched_message() {
    let (_h, d, _) = setup();
    let tag_a = ref_java_hash("TagA");
    let r = get(&d, 0, 4, Some(&Tags(vec![tag_a])));
    assert_eq!(r.status, GetMessageStatus::Found);
    assert_eq!(
        r.queue_offsets,
        vec![
            QueueOffset(0),
            QueueOffset(2),
            QueueOffset(4),
            QueueOffset(6)
        ]
    );
    assert_eq!(
        r.next_begin_offset,
        QueueOffset(7),
        "scanned units count, matched or not"
    );

    let r = get(&d, 10, 4, Some(&Tags(vec![12345])));
    assert_eq!(
        summary(&r),
        (GetMessageStatus::NoMatchedMessage, 40, 0, 40, 0)
    );
    let r = get(&d, 10, 4, Some(&RejectRecords));
    assert_eq!(r.status, GetMessageStatus::NoMatchedMessage);
}

#[test]
fn batch_limits_in_memory() {
    let (mut h, d, _) = setup();
    let all = get(&d, 0, 100, None);
    assert_eq!(all.messages.len(), 32, "maxTransferCountOnMessageInMemory");
    assert_eq!(all.next_begin_offset, QueueOffset(32));
    let record_len = all.messages[0].len();
    d.shutdown().unwrap();
    drop(d);
    h.config.max_transfer_bytes_on_message_in_memory = (record_len * 3 + 1) as u32;
    let d = h.start(true, None);
    let r = get(&d, 0, 100, None);
    assert_eq!(r.messages.len(), 3, "maxTransferBytesOnMessageInMemory");
    assert_eq!(r.next_begin_offset, QueueOffset(3));
}

#[test]
fn message_was_removing_when_commitlog_files_are_gone() {
    let (h, d, offsets) = setup();
    // CommitLog files deleted but ConsumeQueues not yet corrected.
    h.log
        .delete_files_below(PhysicalOffset(LOG_FILE_SIZE as i64));
    let first_kept = offsets
        .iter()
        .position(|o| o.0 >= LOG_FILE_SIZE as i64)
        .unwrap() as i64;
    let r = get(&d, 0, 3, None);
    assert_eq!(
        r.status,
        GetMessageStatus::Found,
        "skips to the next CommitLog file"
    );
    assert_eq!(r.queue_offsets[0], QueueOffset(first_kept));

    h.log.delete_files_below(PhysicalOffset(i64::MAX));
    let r = get(&d, 0, 3, None);
    assert_eq!(r.status, GetMessageStatus::MessageWasRemoving);
    assert!(r.messages.is_empty());
}

#[test]
fn offset_found_null_when_a_consume_queue_file_is_missing() {
    let h = Harness::new();
    for n in 0..40 {
        h.put("T", 0, n, Some("TagA"), None);
    }
    let d = h.start(true, None);
    d.shutdown().unwrap();
    drop(d);
    // Units 5..10 live in the second file (5 units per file); lose it.
    fs::remove_file(
        h.queue_dir("T", 0)
            .join(crate::consume_queue::file_name(100)),
    )
    .unwrap();
    let d = h.start(true, None);
    let r = get(&d, 7, 8, None);
    assert_eq!(
        summary(&r),
        (GetMessageStatus::OffsetFoundNull, 10, 0, 40, 0)
    );
    assert_eq!(get(&d, 10, 1, None).status, GetMessageStatus::Found);
}

#[test]
fn offsets_by_time_and_store_times() {
    let (_h, d, _) = setup();
    assert_eq!(d.earliest_message_time("T", 0), Some(T0));
    assert_eq!(
        d.message_store_timestamp("T", 0, QueueOffset(7)),
        Some(T0 + 7000)
    );
    assert_eq!(d.message_store_timestamp("T", 0, QueueOffset(40)), None);
    assert_eq!(d.offset_in_queue_by_time("T", 0, T0 + 7000), QueueOffset(7));
    // RocketMQ 4.9: the closer neighbour, and the last message when past it.
    assert_eq!(d.offset_in_queue_by_time("T", 0, T0 + 7001), QueueOffset(7));
    assert_eq!(d.offset_in_queue_by_time("T", 0, 0), QueueOffset(0));
    assert_eq!(
        d.offset_in_queue_by_time("T", 0, T0 + 1_000_000),
        QueueOffset(39)
    );
    assert_eq!(d.offset_in_queue_by_time("Nope", 0, T0), QueueOffset(0));
}

#[test]
fn query_by_key_checks_records_and_time_range() {
    let (_h, d, offsets) = setup();
    let r = d.query_message("T", "key12", 32, 0, i64::MAX);
    assert_eq!(r.messages.len(), 1);
    assert_eq!(
        decode(&r.messages[0], false).unwrap().physical_offset(),
        offsets[12]
    );
    assert_eq!(r.index_last_update_phy_offset, offsets[39]);
    assert_eq!(r.index_last_update_timestamp, T0 + 39_000);

    let r = d.query_message("T", "all", 64, T0 + 10_000, T0 + 14_000);
    let mut got: Vec<i64> = r
        .messages
        .iter()
        .map(|m| decode(m, false).unwrap().queue_offset().0)
        .collect();
    got.sort();
    assert_eq!(got, vec![10, 11, 12, 13, 14]);
    assert_eq!(
        d.query_message("T", "all", 3, 0, i64::MAX).messages.len(),
        3
    );
    assert!(
        d.query_message("Other", "key12", 32, 0, i64::MAX)
            .messages
            .is_empty()
    );
    assert!(
        d.query_message("T", "key1", 32, 0, i64::MAX).messages.len() == 1,
        "no prefix match"
    );
    assert_eq!(
        d.record_at(offsets[5]).unwrap().len(),
        d.record_at(offsets[5]).unwrap().len()
    );
    assert!(d.record_at(PhysicalOffset(3)).is_none());
}
