//! INVOKE_BROKER_TO_RESET_OFFSET (222) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223),
//! as 4.9's `Broker2Client.resetOffset` / `getConsumeStatus` serve mqadmin's
//! `resetOffsetByTime`, `skipAccumulatedMessage` and `getConsumerStatus`.
//!
//! Reset: for each write queue of the topic the new offset is the queue offset of the
//! timestamp (`getOffsetInQueueByTime`, 4.9's nearest-neighbour rule) or, for timestamp
//! -1, the max offset. Without `isForce` a queue only moves backwards: its committed
//! offset stays when the target is not below it. Connected members of the group get
//! RESET_CONSUMER_CLIENT_OFFSET (220) with the table and rewind their in-memory
//! position. Unlike 4.9, which answers CONSUMER_NOT_ONLINE when no member is connected
//! (mqadmin then writes the offsets itself), the committed offsets are written here in
//! every case, so a group that is offline, or a client that ignores 220, restarts from
//! the new position too.

use std::sync::Arc;
use std::time::Duration;

use protocol::RemotingCommand;
use protocol::body::{GetConsumerStatusBody, MessageQueue, QueueOffsetTable, ResetOffsetBody};
use protocol::code::{request as rq, response};
use protocol::header::{GetConsumerStatusRequestHeader, ResetOffsetRequestHeader};
use protocol::message::ConsumerOffset;

use super::{HandlerResult, error, success};
use crate::services::Broker;

/// `MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()`: older clients cannot take 220/221.
const MIN_CLIENT_VERSION: i32 = 28;
/// How long the broker waits for a client's GET_CONSUMER_STATUS_FROM_CLIENT answer (4.9: 5 s).
const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

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
        broker
            .offsets
            .commit(&h.group, &h.topic, mq.queue_id, ConsumerOffset(*offset));
    }
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

pub async fn consumer_status(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetConsumerStatusRequestHeader = request.header()?;
    let members = broker.clients.consumer_members(&h.group);
    if members.is_empty() {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!(
                "No Any Consumer online in the consumer group: [{}]",
                h.group
            ),
        );
    }
    let only = h.client_addr.as_deref().filter(|c| !c.trim().is_empty());
    let ask = GetConsumerStatusRequestHeader {
        topic: h.topic.clone(),
        group: h.group.clone(),
        client_addr: None,
    };
    let mut body = GetConsumerStatusBody::default();
    for (client, channel) in members
        .iter()
        .filter(|(c, _)| only.is_none_or(|o| o == c.client_id))
    {
        if client.version < MIN_CLIENT_VERSION {
            return error(
                request,
                response::SYSTEM_ERROR,
                format!(
                    "the client does not support this feature. version={}",
                    client.version
                ),
            );
        }
        let cmd = RemotingCommand::request(rq::GET_CONSUMER_STATUS_FROM_CLIENT, &ask);
        match broker
            .client_requests
            .invoke(channel, cmd, CLIENT_ANSWER_TIMEOUT)
            .await
        {
            Ok(answer) if answer.code == response::SUCCESS => {
                match GetConsumerStatusBody::decode(&answer.body) {
                    Ok(status) => {
                        body.consumer_table
                            .insert(client.client_id.clone(), status.message_queue_table);
                    }
                    Err(e) => {
                        tracing::warn!(client = %client.client_id, error = %e, "bad consumer status body")
                    }
                }
            }
            Ok(answer) => tracing::warn!(
                client = %client.client_id,
                code = answer.code,
                remark = ?answer.remark,
                "client refused GET_CONSUMER_STATUS_FROM_CLIENT"
            ),
            Err(e) => {
                tracing::warn!(client = %client.client_id, error = %e, "consumer status not read")
            }
        }
    }
    Ok(success(request).with_body(body.encode()).into())
}
