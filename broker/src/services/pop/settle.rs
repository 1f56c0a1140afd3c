//! Settling popped messages: AckMessage, ChangeInvisibleDuration and
//! ForwardMessageToDeadLetterQueue (5.x's `AckMessageProcessor`,
//! `ChangeInvisibleTimeProcessor`), and the dead letter copy the max-attempts rule stores.

use std::time::Duration;

use protocol::message::{QueueOffset, record};
use store::PutMessageStatus;

use super::MAX_INVISIBLE_MS;
use super::handle::ReceiptHandle;
use super::queue::AckOutcome;
use super::service::{Key, PopService, Read, commit_if_moved, read_one};
use super::types::PopError;
use crate::services::Broker;
use crate::services::put_path::Put;
use crate::services::redelivery::{copy_message, dead_letter_topic};

impl PopService {
    /// A handle of this broker, parsed.
    fn handle(broker: &Broker, text: &str) -> Result<ReceiptHandle, PopError> {
        let h = ReceiptHandle::parse(text)?;
        let name = &broker.config.broker.broker_name;
        if h.broker_name != *name {
            return Err(PopError::InvalidHandle(format!(
                "receipt handle belongs to broker {}, not {name}",
                h.broker_name
            )));
        }
        Ok(h)
    }

    fn stale(h: &ReceiptHandle) -> PopError {
        PopError::StaleHandle {
            topic: h.topic.clone(),
            queue_id: h.queue_id,
            offset: h.offset.get(),
        }
    }

    /// AckMessage: done with the message (any handle of its current delivery).
    pub fn ack(&self, broker: &Broker, group: &str, handle: &str) -> Result<(), PopError> {
        let h = Self::handle(broker, handle)?;
        let key: Key = (group.to_owned(), h.topic.clone(), h.queue_id);
        let mut t = self.table.lock();
        let outcome = t.with(&key, |state| {
            let committed = state.committed();
            let outcome = state.ack(h.offset, h.delivery);
            commit_if_moved(broker, &key, committed, state.committed());
            outcome
        });
        broker.metrics.pop.in_flight.set(t.total as i64);
        drop(t);
        match outcome {
            Some(AckOutcome::Acked) => {
                broker.metrics.pop.acks.inc();
                Ok(())
            }
            Some(AckOutcome::AlreadyDone) => Ok(()),
            Some(AckOutcome::Stale) => Err(Self::stale(&h)),
            // No state (a restart since): done if below the committed offset.
            None => match broker.offsets.query(group, &h.topic, h.queue_id) {
                Some(c) if h.offset.get() < c.get() => Ok(()),
                _ => Err(Self::stale(&h)),
            },
        }
    }

    /// ChangeInvisibleDuration: the message stays invisible `invisible` from now; a new
    /// handle, while the old one still acks (5.x).
    pub fn change_invisible(
        &self,
        broker: &Broker,
        group: &str,
        handle: &str,
        invisible: Duration,
    ) -> Result<ReceiptHandle, PopError> {
        let h = Self::handle(broker, handle)?;
        let ms = i64::try_from(invisible.as_millis()).unwrap_or(i64::MAX);
        if ms <= 0 || ms > MAX_INVISIBLE_MS {
            return Err(PopError::BadRequest(format!(
                "invisible time {ms} ms is outside (0, {MAX_INVISIBLE_MS}] ms"
            )));
        }
        let key: Key = (group.to_owned(), h.topic.clone(), h.queue_id);
        let now = crate::now_ms();
        let id = self.next_id();
        let mut t = self.table.lock();
        let changed = t
            .with(&key, |state| {
                state
                    .change_invisible(h.offset, h.generation, id, now.saturating_add(ms))
                    .map(|e| e.delivery)
            })
            .flatten();
        drop(t);
        let delivery = changed.ok_or_else(|| Self::stale(&h))?;
        Ok(ReceiptHandle {
            pop_time_ms: now,
            invisible_ms: ms,
            delivery,
            generation: id,
            ..h
        })
    }

    /// ForwardMessageToDeadLetterQueue: the consumer gives up on the message.
    pub async fn forward_to_dead_letter(
        &self,
        broker: &Broker,
        group: &str,
        handle: &str,
    ) -> Result<(), PopError> {
        let h = Self::handle(broker, handle)?;
        let key: Key = (group.to_owned(), h.topic.clone(), h.queue_id);
        let attempts = {
            let mut t = self.table.lock();
            t.with(&key, |state| {
                state.start_forwarding(h.offset, Some(h.delivery))
            })
            .flatten()
        }
        .ok_or_else(|| Self::stale(&h))?;
        let max = broker.groups.get(group).map_or(17, |g| {
            u32::try_from(g.retry_max_times)
                .unwrap_or(0)
                .saturating_add(1)
        });
        self.forward(broker, &key, h.offset, attempts, max).await
    }

    /// Stores the dead letter copy of a message marked as forwarding; then it is done.
    pub(super) async fn forward(
        &self,
        broker: &Broker,
        key: &Key,
        offset: QueueOffset,
        attempts: u32,
        max_attempts: u32,
    ) -> Result<(), PopError> {
        let (group, topic, queue_id) = (&key.0, &key.1, key.2);
        let result = match read_one(broker, topic, queue_id, offset) {
            Read::Found(stored) => match record::decode(&stored, false) {
                Ok(original) => {
                    let dlq = dead_letter_topic(broker, group);
                    let copy = copy_message(
                        &stored,
                        &original,
                        dlq,
                        0,
                        0,
                        i32::try_from(attempts).unwrap_or(i32::MAX),
                        i32::try_from(max_attempts).unwrap_or(i32::MAX),
                    );
                    let r = broker.put(Put::Message(copy)).await;
                    if r.status == PutMessageStatus::PutOk {
                        tracing::warn!(%group, %topic, queue_id, %offset, attempts, "popped message moved to the dead letter queue");
                        broker.metrics.pop.dlq_forwards.inc();
                        broker.metrics.record_dlq(group);
                        Ok(())
                    } else {
                        Err(PopError::Store(r.status.as_str().to_owned()))
                    }
                }
                Err(e) => {
                    tracing::error!(%group, %topic, queue_id, %offset, error = %e, "undecodable record dropped from POP state");
                    Ok(())
                }
            },
            Read::Gone => Ok(()),
            Read::Unreadable => Err(PopError::Store("the message could not be read".into())),
        };
        let now = crate::now_ms();
        let mut t = self.table.lock();
        t.with(key, |state| {
            let committed = state.committed();
            if result.is_ok() {
                state.remove(offset);
            } else {
                state.forwarding_failed(offset, now);
            }
            commit_if_moved(broker, key, committed, state.committed());
        });
        broker.metrics.pop.in_flight.set(t.total as i64);
        result
    }
}
