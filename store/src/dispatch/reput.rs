//! The reput loop (`ReputMessageService.doReput`): tails the CommitLog from the reput
//! offset and turns every record into its ConsumeQueue unit and IndexFile entries.

use std::sync::atomic::Ordering;

use protocol::message::{PhysicalOffset, RecordError, TransactionType, decode};

use super::commitlog_reader::roll_next_file;
use super::dispatcher::Shared;
use super::listener::ArrivedMessage;
use super::request::DispatchRequest;
use crate::consume_queue::{CqUnit, PutOutcome};

/// Dispatches every readable record from the current reput offset on, publishing the
/// offset after each record. Returns when caught up, when the data ahead is not complete
/// yet, or when `shared.running` turns false.
pub(super) fn dispatch_available(shared: &Shared) {
    let log = &*shared.commit_log;
    let mut offset = shared.reput_offset();
    'windows: while shared.running.load(Ordering::Acquire) {
        let min = log.min_offset();
        if offset < min {
            tracing::warn!(%offset, %min, "reput offset below the CommitLog minimum; moving up");
            offset = min;
            shared.publish_reput_offset(offset);
        }
        if offset >= log.max_offset() {
            return;
        }
        let Some(window) = log.read_to_file_end(offset) else {
            return;
        };
        let mut pos = 0usize;
        while pos < window.len() {
            match decode(&window[pos..], false) {
                Ok(view) => {
                    let request = DispatchRequest::from_record(&view, &shared.delay_levels);
                    dispatch_one(shared, &request);
                    pos += view.total_size();
                    shared.publish_reput_offset(PhysicalOffset(offset.0 + pos as i64));
                }
                Err(RecordError::Blank { .. }) => {
                    offset = roll_next_file(PhysicalOffset(offset.0 + pos as i64), log.file_size());
                    shared.publish_reput_offset(offset);
                    continue 'windows;
                }
                Err(RecordError::Truncated { .. } | RecordError::Unwritten) => {
                    // The readable end is mid-record or not yet written: retry later.
                    return;
                }
                Err(e) => {
                    // ReputMessageService on a master: log and skip the rest of the window.
                    tracing::error!(
                        error = %e, offset = offset.0 + pos as i64,
                        "[BUG] undecodable CommitLog record; skipping the rest of the read window"
                    );
                    pos = window.len();
                    shared.publish_reput_offset(PhysicalOffset(offset.0 + pos as i64));
                }
            }
        }
        offset = PhysicalOffset(offset.0 + pos as i64);
    }
}

fn dispatch_one(shared: &Shared, request: &DispatchRequest<'_>) {
    if request.goes_to_consume_queue() {
        put_consume_queue(shared, request);
    }
    if shared.index_enabled
        && request.transaction_type != TransactionType::Rollback
        && let Err(e) = shared.index.build_index(
            request.topic,
            request.physical_offset,
            request.store_timestamp,
            request.uniq_key,
            request.keys,
        )
    {
        tracing::error!(error = %e, offset = %request.physical_offset, "building index entries failed");
    }
}

fn put_consume_queue(shared: &Shared, request: &DispatchRequest<'_>) {
    let deleted = shared.deleted_topics.lock();
    if deleted.covers(request.topic, request.physical_offset) {
        return;
    }
    let queue = match shared
        .consume_queues
        .find_or_create(request.topic, request.queue_id)
    {
        Ok(queue) => queue,
        Err(e) => {
            tracing::error!(error = %e, topic = request.topic, "no ConsumeQueue for dispatched record");
            return;
        }
    };
    let unit = CqUnit {
        physical_offset: request.physical_offset,
        size: request.size,
        tags_code: request.tags_code,
    };
    let outcome = queue.put(unit, request.queue_offset);
    drop(deleted);
    match outcome {
        Ok(PutOutcome::Appended) => {
            shared
                .checkpoint
                .set_logics_msg_timestamp(request.store_timestamp);
            if let Some(listener) = shared.listener.read().as_ref() {
                listener.arriving(&ArrivedMessage {
                    topic: request.topic,
                    queue_id: request.queue_id,
                    max_offset: queue.max_offset(),
                    tags_code: request.tags_code,
                    store_timestamp: request.store_timestamp,
                    properties: request.properties,
                });
            }
        }
        Ok(PutOutcome::AlreadyIndexed) => {}
        Ok(PutOutcome::Duplicate) => {
            tracing::warn!(
                topic = request.topic, queue_id = request.queue_id, offset = %request.queue_offset,
                "ConsumeQueue unit written twice; ignoring the replay"
            );
        }
        Err(e) => {
            tracing::error!(error = %e, topic = request.topic, "writing a ConsumeQueue unit failed");
        }
    }
}
