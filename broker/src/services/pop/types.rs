//! What the POP service takes and answers.

use std::time::Duration;

use bytes::Bytes;
use protocol::code::response;
use protocol::message::QueueOffset;

use super::handle::{HandleError, ReceiptHandle};

/// One pop.
#[derive(Debug, Clone)]
pub struct PopRequest<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    /// One queue, or every readable queue of the topic on this broker.
    pub queue_id: Option<i32>,
    pub max_messages: usize,
    pub invisible: Duration,
    /// How long to wait for messages when none is there (capped at
    /// `maxSuspendTimeoutMillis`); zero answers at once.
    pub poll: Duration,
    /// `TAG` (or none) or `SQL92`, and the expression.
    pub expression_type: Option<&'a str>,
    pub expression: &'a str,
}

/// A popped message.
#[derive(Debug, Clone)]
pub struct Popped {
    /// The whole stored record.
    pub record: Bytes,
    pub queue_id: i32,
    pub offset: QueueOffset,
    /// Deliveries so far, 1 on the first.
    pub attempt: u32,
    pub handle: ReceiptHandle,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PopError {
    #[error("{0}")]
    NoPermission(String),
    #[error("subscription group [{0}] does not exist")]
    GroupNotExist(String),
    #[error("topic[{0}] not exist, apply first please!")]
    TopicNotExist(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{1}")]
    Filter(i32, String),
    /// A cap on in-flight messages or parked pops (its config key).
    #[error("{remark}")]
    Limit { key: &'static str, remark: String },
    #[error("{0}")]
    InvalidHandle(String),
    /// The handle's delivery is over: acked by another handle, redelivered since, or lost
    /// in a restart (the message is delivered again).
    #[error(
        "receipt handle of {topic} queue {queue_id} offset {offset} is expired: the message was redelivered or is done"
    )]
    StaleHandle {
        topic: String,
        queue_id: i32,
        offset: i64,
    },
    #[error("storing the dead letter copy failed: {0}")]
    Store(String),
}

impl PopError {
    /// The RocketMQ response code for a remoting answer.
    pub fn code(&self) -> i32 {
        match self {
            Self::NoPermission(_) => response::NO_PERMISSION,
            Self::GroupNotExist(_) => response::SUBSCRIPTION_GROUP_NOT_EXIST,
            Self::TopicNotExist(_) => response::TOPIC_NOT_EXIST,
            Self::Filter(code, _) => *code,
            Self::Limit { .. } => response::SYSTEM_BUSY,
            Self::BadRequest(_) | Self::InvalidHandle(_) | Self::StaleHandle { .. } => {
                response::SYSTEM_ERROR
            }
            Self::Store(_) => response::SYSTEM_ERROR,
        }
    }
}

impl From<HandleError> for PopError {
    fn from(e: HandleError) -> Self {
        Self::InvalidHandle(e.to_string())
    }
}
