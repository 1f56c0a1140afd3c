//! INVOKE_BROKER_TO_RESET_OFFSET (222), as 4.9's `Broker2Client.resetOffset` serves
//! mqadmin's `resetOffsetByTime` and `skipAccumulatedMessage`.
//!
//! Reset: for each write queue of the topic the new offset is the queue offset of the
//! timestamp (`getOffsetInQueueByTime`, 4.9's nearest-neighbour rule) or, for timestamp
//! -1, the max offset. Without `isForce` a queue only moves backwards: its committed
//! offset stays when the target is not below it. Connected members of the group get
//! RESET_CONSUMER_CLIENT_OFFSET (220) with the table and rewind their in-memory
//! position. As on 5.x brokers the reset is also remembered per queue and enforced on
//! the group's next pull (`services::pending_resets`), for clients that ignore 220 (the
//! C++ client cannot decode it). Unlike 4.9, which answers CONSUMER_NOT_ONLINE when no member is connected
//! (mqadmin then writes the offsets itself), the committed offsets are written here in
//! every case, so a group that is offline, or a client that ignores 220, restarts from
//! the new position too.

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::body::{MessageQueue, QueueOffsetTable, ResetOffsetBody};
use protocol::code::{request as rq, response};
use protocol::header::ResetOffsetRequestHeader;
use protocol::message::ConsumerOffset;

use super::{HandlerResult, error, success};
use crate::services::Broker;

/// `MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()`: older clients cannot take 220/221.
pub(crate) const MIN_CLIENT_VERSION: i32 = 28;

/// The offsets a reset moves `group` to on `topic`, per write queue.
fn reset_table(
    broker: &Broker,
    group: &str,
    topic: &str,
    queues: i32,
    h: &ResetOffsetRequestHeader,
) -> QueueOffsetTable {
    let mut table = QueueOffsetTable::default();
    let only = (h.queue_id >= 0).then_some(h.queue_id);
    for q in (0..queues).filter(|q| only.is_none_or(|o| o == *q)) {
        let target = if h.timestamp == -1 {
            broker.store.max_offset_in_queue(topic, q).get()
        } else {
            broker
                .store
                .offset_in_queue_by_time(topic, q, h.timestamp)
                .get()
        }
        .max(0);
        // A queue the group never committed has nothing to compare with: it takes the target.
        let new = match broker.offsets.query(group, topic, q) {
            Some(current) if !h.is_force && target >= current.get() => current.get(),
            _ => target,
        };
        let mq = MessageQueue {
            topic: topic.to_owned(),
            broker_name: broker.config.broker.broker_name.clone(),
            queue_id: q,
        };
        table.0.insert(mq, new);
    }
    table
}

pub async fn reset_offset(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: ResetOffsetRequestHeader = request.header()?;
    let Some(topic) = broker.topics.get(&h.topic) else {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!(
                "[reset-offset] reset offset failed, no topic in this broker. topic={}",
                h.topic
            ),
        );
    };
    let members = broker.clients.consumer_members(&h.group);
    let known = !members.is_empty()
        || broker
            .offsets
            .topics_of_group(&h.group)
            .iter()
            .any(|(t, _)| *t == h.topic);
    if !known {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("THe consumer group <{}> not exist", h.group),
        );
    }
    if let Some((old, _)) = members.iter().find(|(c, _)| c.version < MIN_CLIENT_VERSION) {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!(
                "the client does not support this feature. version={} (client {})",
                old.version, old.client_id
            ),
        );
    }
    let table = reset_table(broker, &h.group, &h.topic, topic.write_queue_nums, &h);
    for (mq, offset) in &table.0 {
        let offset = ConsumerOffset(*offset);
        broker
            .offsets
            .commit(&h.group, &h.topic, mq.queue_id, offset);
        // Enforced on the group's next pulls too (see `services::pending_resets`): a
        // client that ignores the notice below is moved by its next pull answer, and
        // its commits cannot restore the old offset meanwhile.
        let forgotten = broker.offsets.resets().assign(
            &h.group,
            &h.topic,
            mq.queue_id,
            offset,
            broker.store.max_offset_in_queue(&h.topic, mq.queue_id),
        );
        for _ in 0..forgotten {
            broker
                .metrics
                .limits
                .refusals
                .count("maxPendingOffsetResets");
        }
    }
    // A POP group starts over from the reset offsets: its cursors and in-flight messages
    // are dropped (their handles no longer ack), as 5.x's reset drops its pop checkpoints.
    broker.pop.forget(Some(&h.group), Some(&h.topic));
    // Pulls parked on the topic are answered now, so the group's next pull, the one the
    // reset redirects, does not wait for a long-polling hold to expire.
    broker.pull_hold.wake_where(|topic, _, _| topic == h.topic);
    // Answered once the reset offsets are on disk: a rewrite on the offsets file's writer
    // thread, shared with other resets in flight.
    if let Err(e) = broker.offsets.durable().await {
        tracing::error!(error = %e, group = %h.group, "persisting reset offsets failed");
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("offsets reset in memory but not persisted: {e}"),
        );
    }
    let body = ResetOffsetBody {
        offset_table: table,
    };
    let notify = ResetOffsetRequestHeader {
        topic: h.topic.clone(),
        group: h.group.clone(),
        timestamp: h.timestamp,
        is_force: h.is_force,
        queue_id: h.queue_id,
    };
    let push = RemotingCommand::request(rq::RESET_CONSUMER_CLIENT_OFFSET, &notify)
        .with_body(body.encode());
    let mut notified = 0;
    for (client, channel) in &members {
        match broker.client_requests.oneway(channel, push.clone()) {
            Ok(()) => notified += 1,
            Err(e) => {
                tracing::warn!(client = %client.client_id, error = %e, "reset offset notice not sent")
            }
        }
    }
    tracing::info!(
        group = %h.group,
        topic = %h.topic,
        timestamp = h.timestamp,
        force = h.is_force,
        notified,
        offsets = ?body.offset_table.0.iter().map(|(q, o)| (q.queue_id, *o)).collect::<Vec<_>>(),
        "consumer offsets reset"
    );
    Ok(success(request).with_body(body.encode()).into())
}
