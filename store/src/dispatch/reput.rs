//! The reput loop (`ReputMessageService.doReput`): tails the CommitLog from the reput
//! offset and turns every record into its ConsumeQueue unit and IndexFile entries.
//!
//! Failure policy (see `docs/architecture.md`, "Failure policy"): a unit or index entry
//! that cannot be written is retried a few times; if it still fails, the reput offset
//! stays on that record (it is never skipped: later units of the queue would sit one
//! slot early and the message would be invisible), the dispatcher reports an indexing
//! failure, and the store refuses puts with SERVICE_NOT_AVAILABLE until a later retry
//! succeeds. RocketMQ 4.9 retries 30 times and then marks the logic queue broken
//! (`makeLogicsQueueError`) while reput moves on; here nothing moves on.

use std::sync::atomic::Ordering;
use std::time::Duration;

use protocol::message::{PhysicalOffset, RecordError, TransactionType, decode};

use super::commitlog_reader::roll_next_file;
use super::dispatcher::Shared;
use super::listener::ArrivedMessage;
use super::request::DispatchRequest;
use crate::consume_queue::{CqError, CqUnit, PutOutcome};

/// Attempts per record before the reput thread reports a failure and backs off.
const DISPATCH_ATTEMPTS: u32 = 3;
/// Pause between two attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Dispatches every readable record from the current reput offset on, publishing the
/// offset after each record. Returns when caught up, when the data ahead is not complete
/// yet, when a record cannot be dispatched (the offset then stays on it), or when
/// `shared.running` turns false.
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
                    if let Err(reason) = dispatch_with_retry(shared, &request) {
                        // The reput offset stays on this record: the next round retries it.
                        shared.report_dispatch_failure(request.physical_offset, reason);
                        return;
                    }
                    shared.clear_dispatch_failure();
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

/// [`dispatch_one`] with a few quick retries. A retried record may find its unit already
/// written (the index write failed after it): `put` then answers `AlreadyIndexed`.
fn dispatch_with_retry(shared: &Shared, request: &DispatchRequest<'_>) -> Result<(), String> {
    let mut attempt = 1;
    loop {
        match dispatch_one(shared, request) {
            Ok(()) => return Ok(()),
            Err(reason) if attempt >= DISPATCH_ATTEMPTS => return Err(reason),
            Err(reason) => {
                tracing::warn!(
                    offset = %request.physical_offset, attempt, %reason,
                    "dispatching a CommitLog record failed; retrying"
                );
                attempt += 1;
                std::thread::sleep(RETRY_PAUSE);
            }
        }
    }
}

fn dispatch_one(shared: &Shared, request: &DispatchRequest<'_>) -> Result<(), String> {
    if request.goes_to_consume_queue() {
        put_consume_queue(shared, request)?;
    }
    if shared.index_enabled && request.transaction_type != TransactionType::Rollback {
        shared
            .index
            .build_index(
                request.topic,
                request.physical_offset,
                request.store_timestamp,
                request.uniq_key,
                request.keys,
            )
            .map_err(|e| format!("building index entries: {e}"))?;
    }
    Ok(())
}

fn put_consume_queue(shared: &Shared, request: &DispatchRequest<'_>) -> Result<(), String> {
    let deleted = shared.deleted_topics.lock();
    if deleted.covers(request.topic, request.physical_offset) {
        return Ok(());
    }
    let queue = match shared
        .consume_queues
        .find_or_create(request.topic, request.queue_id)
    {
        Ok(queue) => queue,
        Err(e) if is_permanent(&e) => {
            // The record itself can never have a queue (a topic name that is no usable
            // directory name): retrying cannot help, and the put path refuses such names.
            tracing::error!(error = %e, topic = request.topic, offset = %request.physical_offset, "record cannot be indexed; it stays readable by offset only");
            return Ok(());
        }
        Err(e) => {
            return Err(format!(
                "opening ConsumeQueue {}-{}: {e}",
                request.topic, request.queue_id
            ));
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
            Ok(())
        }
        Ok(PutOutcome::AlreadyIndexed) => Ok(()),
        Ok(PutOutcome::Duplicate) => {
            tracing::warn!(
                topic = request.topic, queue_id = request.queue_id, offset = %request.queue_offset,
                "ConsumeQueue unit written twice; ignoring the replay"
            );
            Ok(())
        }
        Err(e) if is_permanent(&e) => {
            tracing::error!(error = %e, topic = request.topic, offset = %request.physical_offset, "record cannot be indexed; it stays readable by offset only");
            Ok(())
        }
        Err(e) => Err(format!(
            "writing ConsumeQueue {}-{} unit {}: {e}",
            request.topic, request.queue_id, request.queue_offset
        )),
    }
}

/// Errors a retry cannot cure: they come from the record's content, not from the disk.
fn is_permanent(e: &CqError) -> bool {
    matches!(e, CqError::BadConfig(_) | CqError::BadOffset(_))
}
