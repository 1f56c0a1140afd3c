//! `getMessage` over the [`MemStore`]: the statuses and next-offset rules of the file
//! store's read path, on the in-memory queues (no file boundaries, nothing "in disk").

use protocol::message::QueueOffset;

use super::MemStore;
use crate::config::BrokerRole;
use crate::lookup::{GetMessageResult, GetMessageStatus, MessageFilter, batch_full};

pub(super) fn get_message(
    store: &MemStore,
    topic: &str,
    queue_id: i32,
    offset: QueueOffset,
    max_count: usize,
    filter: Option<&dyn MessageFilter>,
) -> GetMessageResult {
    use GetMessageStatus::*;
    let config = &store.config;
    // nextOffsetCorrection: a slave keeps the asked offset.
    let correct = |to: QueueOffset| {
        if config.broker_role == BrokerRole::Slave {
            offset
        } else {
            to
        }
    };
    let log = store.log.read();
    let Some(queue) = log.queues.get(&(topic.to_owned(), queue_id)) else {
        let zero = QueueOffset(0);
        return GetMessageResult::new(NoMatchedLogicQueue, correct(zero), zero, zero);
    };
    let (min, max) = (QueueOffset(queue.min), QueueOffset(queue.max()));
    let result = |status, next| GetMessageResult::new(status, next, min, max);
    if max.0 == 0 {
        return result(NoMessageInQueue, correct(QueueOffset(0)));
    }
    if offset < min {
        return result(OffsetTooSmall, correct(min));
    }
    if offset == max {
        return result(OffsetOverflowOne, correct(offset));
    }
    if offset > max {
        let to = if min.0 == 0 { min } else { max };
        return result(OffsetOverflowBadly, correct(to));
    }
    let max_scan = (16_000 / crate::consume_queue::UNIT_SIZE)
        .max(max_count)
        .min(config.max_pull_scan_units.max(1) as usize);
    let mut out = result(NoMatchedMessage, offset);
    let mut scanned = 0usize;
    let from = usize::try_from(offset.0 - queue.min).unwrap_or(usize::MAX);
    for (i, unit) in queue.units.iter().enumerate().skip(from) {
        if scanned >= max_scan || batch_full(config, unit.size, max_count, &out, false) {
            break;
        }
        scanned += 1;
        if filter.is_some_and(|f| !f.matches_consume_queue(unit.tags_code)) {
            continue;
        }
        let Some(record) = log.record_at(unit.physical_offset) else {
            if out.buffer_total_size == 0 {
                out.status = MessageWasRemoving;
            }
            continue;
        };
        if filter.is_some_and(|f| !f.matches_commit_log(record)) {
            continue;
        }
        out.buffer_total_size += record.len();
        out.messages.push(record.clone());
        out.queue_offsets.push(QueueOffset(queue.min + i as i64));
        out.status = Found;
    }
    out.next_begin_offset = QueueOffset(offset.0 + scanned as i64);
    out
}
