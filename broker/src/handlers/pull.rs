//! PULL_MESSAGE with long polling (`PullMessageProcessor`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use protocol::RemotingCommand;
use protocol::body::MessageModel;
use protocol::code::response;
use protocol::header::{PullMessageRequestHeader, PullMessageResponseHeader};
use protocol::message::QueueOffset;

use super::{HandlerResult, Reply};
use crate::handlers::outbound::Outbound;
use crate::names::perm;
use crate::services::Broker;
use crate::services::clients::Conn;
use crate::services::filter::MessageFilter;
use crate::services::pending_resets::PullVerdict;
use store::lookup::GetMessageStatus;

/// Outcome of one pass over the store.
enum Pass {
    Done(Outbound),
    /// Nothing found and the request may wait for new messages.
    Suspend(MessageFilter),
}

pub async fn pull_message(
    broker: &Arc<Broker>,
    _conn: &Conn,
    request: &RemotingCommand,
) -> HandlerResult {
    let h: PullMessageRequestHeader = request.header()?;
    let filter = match process(broker, request, &h, true) {
        Pass::Done(out) => return Ok(Reply::Response(out)),
        Pass::Suspend(filter) => filter,
    };
    let live = &broker.live;
    let hold = if live.long_polling_enable.load(Ordering::Relaxed) {
        // Capped at `maxSuspendTimeoutMillis`: 4.9 trusts the client's value, so one
        // client could hold a pull (and its memory) for ever.
        Duration::from_millis(h.suspend_timeout_millis.max(0) as u64)
            .min(broker.config.broker.max_suspend())
    } else {
        Duration::from_millis(live.short_polling_time_mills.load(Ordering::Relaxed))
    };
    let woken = broker
        .pull_hold
        .park(&h.topic, h.queue_id, h.queue_offset, filter);
    // A message may have been dispatched (or confirmed) between the store lookup and
    // parking. Units still waiting for a slave's ack don't count: answering at once would
    // make the client re-pull in a tight loop while the slave is away.
    let already = broker
        .store
        .has_visible_message(&h.topic, h.queue_id, h.queue_offset);
    if !already {
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep(hold) => {}
            _ = broker.shutdown.cancelled() => {}
        }
    }
    match process(broker, request, &h, false) {
        Pass::Done(out) => Ok(Reply::Response(out)),
        Pass::Suspend(_) => unreachable_suspend(request),
    }
}

/// `process` with suspension disallowed never asks to suspend; answer NOT_FOUND if it did.
fn unreachable_suspend(request: &RemotingCommand) -> HandlerResult {
    Ok(
        RemotingCommand::error_response(request, response::PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
            .into(),
    )
}

/// 5.x's answer to the first pull after a reset (`GetMessageStatus.OFFSET_RESET`):
/// PULL_OFFSET_MOVED with `nextBeginOffset` at the reset offset. The 4.x Java and Rust
/// clients treat it as OFFSET_ILLEGAL and store the offset; the C++ client moves its
/// pull position there.
fn redirect(
    broker: &Broker,
    request: &RemotingCommand,
    h: &PullMessageRequestHeader,
    reset: QueueOffset,
) -> Pass {
    tracing::info!(
        group = %h.consumer_group,
        topic = %h.topic,
        queue_id = h.queue_id,
        pulled_at = %h.queue_offset,
        %reset,
        "pull moved to the group's reset offset"
    );
    let header = PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: reset,
        min_offset: broker.store.min_offset_in_queue(&h.topic, h.queue_id),
        max_offset: broker.store.max_offset_in_queue(&h.topic, h.queue_id),
    };
    Pass::Done(
        RemotingCommand::response_to(request, response::PULL_OFFSET_MOVED)
            .with_header(&header)
            .with_remark("OFFSET_RESET")
            .into(),
    )
}

fn fail(request: &RemotingCommand, code: i32, remark: String) -> Pass {
    Pass::Done(RemotingCommand::error_response(request, code, remark).into())
}

fn process(
    broker: &Broker,
    request: &RemotingCommand,
    h: &PullMessageRequestHeader,
    allow_suspend: bool,
) -> Pass {
    let b = &broker.config.broker;
    let flag = h.sys_flag;
    if !perm::is_readable(broker.live.broker_permission()) {
        return fail(
            request,
            response::NO_PERMISSION,
            format!("the broker[{}] pulling message is forbidden", b.broker_ip1),
        );
    }
    let Some(group) = broker.groups.find_or_create(
        &h.consumer_group,
        broker
            .live
            .auto_create_subscription_group
            .load(Ordering::Relaxed),
    ) else {
        return fail(
            request,
            response::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("subscription group [{}] does not exist", h.consumer_group),
        );
    };
    if !group.consume_enable {
        return fail(
            request,
            response::NO_PERMISSION,
            format!("subscription group no permission, {}", h.consumer_group),
        );
    }
    // A group consuming by POP owns its committed offsets through its in-flight
    // messages; a 4.x pull of it (and its piggy-backed commit) would corrupt them.
    if let Some(remark) = broker.pop.refusal_for_4x(&h.consumer_group) {
        return fail(request, response::NO_PERMISSION, remark);
    }
    let Some(topic) = broker.topics.get(&h.topic) else {
        return fail(
            request,
            response::TOPIC_NOT_EXIST,
            format!("topic[{}] not exist, apply first please!", h.topic),
        );
    };
    if !perm::is_readable(topic.perm) {
        return fail(
            request,
            response::NO_PERMISSION,
            format!("the topic[{}] pulling message is forbidden", h.topic),
        );
    }
    if h.queue_id < 0 || h.queue_id >= topic.read_queue_nums {
        return fail(
            request,
            response::SYSTEM_ERROR,
            format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                h.queue_id,
                h.topic,
                topic.read_queue_nums,
                request.ext_fields.get("clientAddr").unwrap_or("")
            ),
        );
    }
    let filter = if flag.has_subscription() {
        match crate::handlers::pull_filter::from_request(broker, h) {
            Ok(f) => f,
            Err((code, remark)) => return fail(request, code, remark),
        }
    } else {
        let Some(info) = broker.clients.consumer_group(&h.consumer_group) else {
            return fail(
                request,
                response::SUBSCRIPTION_NOT_EXIST,
                format!(
                    "the consumer's group info not exist, group: {}",
                    h.consumer_group
                ),
            );
        };
        if info.message_model == MessageModel::Broadcasting && !group.consume_broadcast_enable {
            return fail(
                request,
                response::NO_PERMISSION,
                format!(
                    "the consumer group[{}] can not consume by broadcast way",
                    h.consumer_group
                ),
            );
        }
        let Some(sub) = info.subscriptions.get(&h.topic) else {
            return fail(
                request,
                response::SUBSCRIPTION_NOT_EXIST,
                "the consumer's subscription not exist".to_owned(),
            );
        };
        if sub.sub_version < h.sub_version {
            return fail(
                request,
                response::SUBSCRIPTION_NOT_LATEST,
                "the consumer's subscription not latest".to_owned(),
            );
        }
        match crate::handlers::pull_filter::from_registered(broker, h, sub) {
            Ok(f) => f,
            Err((code, remark)) => return fail(request, code, remark),
        }
    };

    // A pending reset of the queue (`services::pending_resets`): decided on the first
    // pass only, so a parked pull does not advance it twice.
    let verdict = if allow_suspend && !broker.is_slave() {
        broker
            .offsets
            .resets()
            .on_pull(&h.consumer_group, &h.topic, h.queue_id, h.queue_offset)
    } else {
        // The second pass and slaves apply no commit and advance no reset.
        PullVerdict::Serve
    };
    if let PullVerdict::Redirect(reset) = verdict {
        return redirect(broker, request, h, reset);
    }

    let result = broker.store.get_message(
        &h.topic,
        h.queue_id,
        h.queue_offset,
        usize::try_from(h.max_msg_nums).unwrap_or(0),
        Some(&filter),
    );
    let code = match result.status {
        GetMessageStatus::Found => response::SUCCESS,
        GetMessageStatus::NoMatchedMessage | GetMessageStatus::MessageWasRemoving => {
            response::PULL_RETRY_IMMEDIATELY
        }
        GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue
            if h.queue_offset.get() != 0 =>
        {
            response::PULL_OFFSET_MOVED
        }
        GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => {
            response::PULL_NOT_FOUND
        }
        GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => {
            response::PULL_NOT_FOUND
        }
        GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => {
            response::PULL_OFFSET_MOVED
        }
    };

    // The piggy-backed commit is applied once, on the first pass (`brokerAllowSuspend`),
    // unless a reset of the queue is pending.
    if allow_suspend && !broker.is_slave() {
        if verdict == PullVerdict::Serve && flag.has_commit_offset() {
            broker
                .offsets
                .commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
        } else if verdict == PullVerdict::ServeIgnoringCommit {
            broker.offsets.resets().delivered(
                &h.consumer_group,
                &h.topic,
                h.queue_id,
                h.queue_offset,
                result.next_begin_offset,
            );
        }
    }
    if code == response::PULL_NOT_FOUND && allow_suspend && flag.has_suspend() {
        return Pass::Suspend(filter);
    }

    let header = PullMessageResponseHeader {
        // `PullMessageProcessor`: a consumer reading data no longer in memory is sent to
        // a slave (`whichBrokerWhenConsumeSlowly`, 1) when this master has one.
        suggest_which_broker_id: if result.suggest_pulling_from_slave
            && broker
                .ha
                .get()
                .is_some_and(|ha| !ha.is_slave() && ha.acks.count() > 0)
        {
            1
        } else {
            0
        },
        next_begin_offset: result.next_begin_offset,
        min_offset: result.min_offset,
        max_offset: result.max_offset,
    };
    let cmd = RemotingCommand::response_to(request, code)
        .with_header(&header)
        .with_remark(result.status.as_str());
    if code == response::SUCCESS {
        let bytes: usize = result.messages.iter().map(|m| m.len()).sum();
        broker
            .metrics
            .record_get(&h.topic, result.messages.len() as u64, bytes as u64);
        let rated =
            broker
                .consume_rate
                .record(&h.consumer_group, &h.topic, result.messages.len() as u64);
        if !rated {
            broker
                .metrics
                .limits
                .refusals
                .count("maxConsumeRateEntries");
        }
        Pass::Done(Outbound::with_parts(cmd, result.messages))
    } else {
        Pass::Done(cmd.into())
    }
}
