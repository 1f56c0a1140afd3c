//! The `apache.rocketmq.v2.Status` every answer carries, and the mapping from the
//! broker's 4.x response codes to the v2 `Code`s (as the 5.x proxy's `ResponseBuilder`
//! maps them).

use grpc_api::v2::{Code, Status};
use protocol::code::response;

pub fn ok() -> Status {
    Status {
        code: Code::Ok as i32,
        message: "OK".to_owned(),
    }
}

pub fn of(code: Code, message: impl Into<String>) -> Status {
    Status {
        code: code as i32,
        message: message.into(),
    }
}

/// The v2 code for a remoting answer `code`.
pub fn from_remoting(code: i32) -> Code {
    match code {
        response::SUCCESS => Code::Ok,
        response::FLUSH_DISK_TIMEOUT => Code::MasterPersistenceTimeout,
        response::FLUSH_SLAVE_TIMEOUT => Code::SlavePersistenceTimeout,
        response::SLAVE_NOT_AVAILABLE => Code::HaNotAvailable,
        response::NO_PERMISSION => Code::Forbidden,
        response::TOPIC_NOT_EXIST => Code::TopicNotFound,
        response::SUBSCRIPTION_GROUP_NOT_EXIST => Code::ConsumerGroupNotFound,
        response::MESSAGE_ILLEGAL => Code::BadRequest,
        response::SYSTEM_BUSY => Code::TooManyRequests,
        response::SERVICE_NOT_AVAILABLE => Code::InternalError,
        _ => Code::InternalServerError,
    }
}
