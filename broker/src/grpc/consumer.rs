//! The consumption calls of 5.x clients, served by POP ([`crate::services::pop`]):
//! ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue
//! and QueryAssignment (5.x proxy's `ReceiveMessageActivity`, `AckMessageActivity`,
//! `ChangeInvisibleDurationActivity`, `ForwardMessageToDLQActivity`,
//! `RouteActivity.queryAssignment`).

use std::time::Duration;

use grpc_api::v2::{
    AckMessageRequest, AckMessageResponse, AckMessageResultEntry, Assignment,
    ChangeInvisibleDurationRequest, ChangeInvisibleDurationResponse, Code, FilterType,
    ForwardMessageToDeadLetterQueueRequest, ForwardMessageToDeadLetterQueueResponse,
    QueryAssignmentRequest, QueryAssignmentResponse, ReceiveMessageRequest, ReceiveMessageResponse,
    receive_message_response,
};
use tonic::Status;

use super::{message_codec, settings, status};
use crate::services::Broker;
use crate::services::pop::{MAX_POP_BATCH, PopError, PopRequest, Popped, ReceiptHandle};

/// 5.x proxy's `longPollingReserveTimeInMillis`: the answer leaves this much of the
/// client's deadline for the trip back.
const LONG_POLLING_RESERVE: Duration = Duration::from_millis(100);
/// 5.x proxy's `grpcClientConsumerMinLongPollingTimeoutMillis` and
/// `grpcClientConsumerMaxLongPollingTimeoutMillis`.
const MIN_LONG_POLLING: Duration = Duration::from_secs(5);
const MAX_LONG_POLLING: Duration = Duration::from_secs(20);
/// The shortest invisible time a receive may ask for. 5.x's proxy refuses less than 10 s
/// (`minInvisibleTimeMillsForRecv`); a shorter one is accepted here down to a second, so
/// a consumer that crashes is redelivered to soon after.
const MIN_INVISIBLE: Duration = Duration::from_secs(1);
/// What 5.x clients use when the request names none (`SimpleConsumer` requires one; the
/// push consumer sends its settings' value).
const DEFAULT_INVISIBLE: Duration = Duration::from_secs(30);

/// Calls no released 5.x client API makes: answered UNIMPLEMENTED, naming the call.
pub fn never(call: &str) -> Status {
    Status::unimplemented(format!("{call} is not supported by this broker"))
}

fn pop_status(e: &PopError) -> grpc_api::v2::Status {
    let code = match e {
        PopError::StaleHandle { .. } | PopError::InvalidHandle(_) => Code::InvalidReceiptHandle,
        PopError::BadRequest(_) => Code::BadRequest,
        PopError::Filter(..) => Code::IllegalFilterExpression,
        PopError::Limit { .. } => Code::TooManyRequests,
        PopError::TopicNotExist(_) => Code::TopicNotFound,
        PopError::GroupNotExist(_) => Code::ConsumerGroupNotFound,
        PopError::NoPermission(_) => Code::Forbidden,
        PopError::Store(_) => Code::InternalServerError,
    };
    status::of(code, e.to_string())
}

/// How long a receive may wait: the client's long-polling timeout within 5.x's bounds,
/// answered `LONG_POLLING_RESERVE` before the call's own deadline (`grpc-timeout`).
pub fn poll_time(requested: Option<Duration>, call_deadline: Option<Duration>) -> Duration {
    let poll = requested
        .unwrap_or(Duration::ZERO)
        .clamp(MIN_LONG_POLLING, MAX_LONG_POLLING);
    match call_deadline {
        Some(left) => poll.min(left.saturating_sub(LONG_POLLING_RESERVE)),
        None => poll,
    }
}

fn to_message(p: &Popped) -> Option<grpc_api::v2::Message> {
    let mut m = message_codec::from_record(&p.record)?;
    if let Some(sys) = m.system_properties.as_mut() {
        sys.receipt_handle = Some(p.handle.to_string());
        sys.delivery_attempt = Some(i32::try_from(p.attempt).unwrap_or(i32::MAX));
        sys.invisible_duration = Some(prost_types::Duration {
            seconds: p.handle.invisible_ms / 1000,
            nanos: i32::try_from((p.handle.invisible_ms % 1000) * 1_000_000).unwrap_or(0),
        });
    }
    Some(m)
}

/// ReceiveMessage: the answers of the stream, a status first, then the messages.
pub async fn receive(
    broker: &Broker,
    req: &ReceiveMessageRequest,
    call_deadline: Option<Duration>,
) -> Vec<ReceiveMessageResponse> {
    let status_only = |st| {
        vec![ReceiveMessageResponse {
            content: Some(receive_message_response::Content::Status(st)),
        }]
    };
    let group = req.group.as_ref().map(|g| g.name.as_str()).unwrap_or("");
    let Some(queue) = req.message_queue.as_ref() else {
        return status_only(status::of(Code::BadRequest, "message_queue is required"));
    };
    let topic = queue.topic.as_ref().map(|t| t.name.as_str()).unwrap_or("");
    if group.is_empty() || topic.is_empty() {
        return status_only(status::of(Code::BadRequest, "group and topic are required"));
    }
    let (kind, expression) = match &req.filter_expression {
        Some(f) if f.r#type == FilterType::Sql as i32 => (Some("SQL92"), f.expression.as_str()),
        Some(f) => (Some("TAG"), f.expression.as_str()),
        None => (Some("TAG"), "*"),
    };
    let invisible = req
        .invisible_duration
        .as_ref()
        .map(settings::to_std)
        .unwrap_or(DEFAULT_INVISIBLE)
        .max(MIN_INVISIBLE);
    let pop = PopRequest {
        group,
        topic,
        // 5.x assigns a broker's whole topic as one queue with id -1.
        queue_id: (queue.id >= 0).then_some(queue.id),
        max_messages: usize::try_from(req.batch_size)
            .unwrap_or(1)
            .clamp(1, MAX_POP_BATCH),
        invisible,
        poll: poll_time(
            req.long_polling_timeout.as_ref().map(settings::to_std),
            call_deadline,
        ),
        expression_type: kind,
        expression,
    };
    match broker.pop.pop(broker, &pop).await {
        Ok(popped) if popped.is_empty() => {
            status_only(status::of(Code::MessageNotFound, "no new message"))
        }
        Ok(popped) => {
            let mut out = Vec::with_capacity(popped.len() + 2);
            out.push(ReceiveMessageResponse {
                content: Some(receive_message_response::Content::Status(status::ok())),
            });
            // When the broker handed the messages over (5.x's `ReceiveMessageActivity`
            // sends it): clients measure their receive latency from it, and the Python
            // push consumer fails every message without it.
            let now = crate::now_ms();
            out.push(ReceiveMessageResponse {
                content: Some(receive_message_response::Content::DeliveryTimestamp(
                    prost_types::Timestamp {
                        seconds: now.div_euclid(1000),
                        nanos: i32::try_from(now.rem_euclid(1000) * 1_000_000).unwrap_or(0),
                    },
                )),
            });
            out.extend(
                popped
                    .iter()
                    .filter_map(to_message)
                    .map(|m| ReceiveMessageResponse {
                        content: Some(receive_message_response::Content::Message(m)),
                    }),
            );
            out
        }
        Err(e) => status_only(pop_status(&e)),
    }
}

/// The refusal of a receipt handle for another topic than the request names. The ACL
/// allowed the call for the request's topic, and the handle names the message it
/// settles: a handle popped from a topic the caller may not consume is not its to settle.
/// (A malformed handle is left to POP, which names what is wrong with it.)
fn foreign_topic(
    topic: Option<&grpc_api::v2::Resource>,
    handle: &str,
) -> Option<grpc_api::v2::Status> {
    let topic = topic.map_or("", |t| t.name.as_str());
    match ReceiptHandle::parse(handle) {
        Ok(h) if h.topic != topic => Some(status::of(
            Code::InvalidReceiptHandle,
            format!(
                "receipt handle is for topic {}, not the request's topic {topic}",
                h.topic
            ),
        )),
        _ => None,
    }
}

/// AckMessage: one result per entry; the call's status is OK when all are, else
/// MULTIPLE_RESULTS (5.x answers so).
pub fn ack(broker: &Broker, req: &AckMessageRequest) -> AckMessageResponse {
    let group = req.group.as_ref().map(|g| g.name.as_str()).unwrap_or("");
    let entries: Vec<AckMessageResultEntry> = req
        .entries
        .iter()
        .map(|e| AckMessageResultEntry {
            message_id: e.message_id.clone(),
            receipt_handle: e.receipt_handle.clone(),
            status: Some(
                match foreign_topic(req.topic.as_ref(), &e.receipt_handle) {
                    Some(refused) => Err(refused),
                    None => broker
                        .pop
                        .ack(broker, group, &e.receipt_handle)
                        .map_err(|err| pop_status(&err)),
                }
                .map_or_else(|refused| refused, |()| status::ok()),
            ),
        })
        .collect();
    let all_ok = entries
        .iter()
        .all(|e| e.status.as_ref().is_some_and(|s| s.code == Code::Ok as i32));
    let st = if entries.is_empty() {
        status::of(Code::BadRequest, "no entry to ack")
    } else if all_ok {
        status::ok()
    } else if entries.len() == 1 {
        entries[0].status.clone().unwrap_or_else(status::ok)
    } else {
        status::of(
            Code::MultipleResults,
            "some entries failed; see each entry's status",
        )
    };
    AckMessageResponse {
        status: Some(st),
        entries,
    }
}

pub fn change_invisible(
    broker: &Broker,
    req: &ChangeInvisibleDurationRequest,
) -> ChangeInvisibleDurationResponse {
    let group = req.group.as_ref().map(|g| g.name.as_str()).unwrap_or("");
    let invisible = req
        .invisible_duration
        .as_ref()
        .map(settings::to_std)
        .unwrap_or(Duration::ZERO);
    if let Some(refused) = foreign_topic(req.topic.as_ref(), &req.receipt_handle) {
        return ChangeInvisibleDurationResponse {
            status: Some(refused),
            receipt_handle: String::new(),
        };
    }
    match broker
        .pop
        .change_invisible(broker, group, &req.receipt_handle, invisible)
    {
        Ok(h) => ChangeInvisibleDurationResponse {
            status: Some(status::ok()),
            receipt_handle: h.to_string(),
        },
        Err(e) => ChangeInvisibleDurationResponse {
            status: Some(pop_status(&e)),
            receipt_handle: String::new(),
        },
    }
}

pub async fn forward_to_dead_letter(
    broker: &Broker,
    req: &ForwardMessageToDeadLetterQueueRequest,
) -> ForwardMessageToDeadLetterQueueResponse {
    let group = req.group.as_ref().map(|g| g.name.as_str()).unwrap_or("");
    if let Some(refused) = foreign_topic(req.topic.as_ref(), &req.receipt_handle) {
        return ForwardMessageToDeadLetterQueueResponse {
            status: Some(refused),
        };
    }
    let st = match broker
        .pop
        .forward_to_dead_letter(broker, group, &req.receipt_handle)
        .await
    {
        Ok(()) => status::ok(),
        Err(e) => pop_status(&e),
    };
    ForwardMessageToDeadLetterQueueResponse { status: Some(st) }
}

/// QueryAssignment: the topic on each broker group as one POP queue (id -1, as 5.x's
/// proxy assigns it: a receive pops every queue of that broker), readable; `queues` is
/// the topic's route across groups (`None`: the topic is unknown).
pub fn query_assignment(
    req: &QueryAssignmentRequest,
    queues: Option<Vec<grpc_api::v2::MessageQueue>>,
) -> QueryAssignmentResponse {
    let Some(topic) = req.topic.as_ref() else {
        return QueryAssignmentResponse {
            status: Some(status::of(Code::BadRequest, "topic is required")),
            assignments: Vec::new(),
        };
    };
    let Some(queues) = queues else {
        return QueryAssignmentResponse {
            status: Some(status::of(
                Code::TopicNotFound,
                format!("topic {} does not exist", topic.name),
            )),
            assignments: Vec::new(),
        };
    };
    let readable = |p: i32| {
        p == grpc_api::v2::Permission::Read as i32
            || p == grpc_api::v2::Permission::ReadWrite as i32
    };
    let mut seen = std::collections::BTreeSet::new();
    let assignments = queues
        .into_iter()
        .filter(|q| readable(q.permission))
        .filter(|q| seen.insert(q.broker.as_ref().map(|b| b.name.clone())))
        .map(|mut q| {
            q.id = -1;
            q.permission = grpc_api::v2::Permission::Read as i32;
            Assignment {
                message_queue: Some(q),
            }
        })
        .collect();
    QueryAssignmentResponse {
        status: Some(status::ok()),
        assignments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_polls_stay_in_bounds_and_answer_before_the_deadline() {
        let s = Duration::from_secs;
        assert_eq!(poll_time(None, None), s(5));
        assert_eq!(poll_time(Some(s(60)), None), s(20));
        assert_eq!(poll_time(Some(s(15)), None), s(15));
        // The client gives up after 8 s: the answer comes 100 ms before.
        assert_eq!(
            poll_time(Some(s(15)), Some(s(8))),
            Duration::from_millis(7900)
        );
        assert_eq!(
            poll_time(Some(s(15)), Some(Duration::from_millis(50))),
            Duration::ZERO
        );
    }
}
