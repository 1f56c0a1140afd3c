//! Request handlers, grouped like RocketMQ's processors. Each returns a [`Reply`]; the
//! dispatch table maps errors to SYSTEM_ERROR answers.

pub mod acl_admin;
pub mod admin;
pub mod broker_config;
pub mod client;
pub mod consumer_status;
pub mod delay_offset;
pub mod end_transaction;
pub mod ha_admin;
pub mod lookup;
pub mod offset;
pub mod offset_reset;
pub mod outbound;
pub mod producer;
pub mod pull;
pub mod pull_filter;
pub mod send;
pub mod send_back;

#[cfg(test)]
mod admin_persist_tests;

use protocol::RemotingCommand;
use protocol::body::BodyError;
use protocol::code::response;
use protocol::header::HeaderError;
use store::config_files::ConfigFileError;

use crate::handlers::outbound::Outbound;

pub enum Reply {
    Response(Outbound),
    /// Nothing to send (oneway requests handled without an answer).
    None,
}

impl From<RemotingCommand> for Reply {
    fn from(cmd: RemotingCommand) -> Self {
        Reply::Response(cmd.into())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error(transparent)]
    Header(#[from] HeaderError),
    #[error("{0}")]
    Body(#[from] BodyError),
    #[error("{0}")]
    Persist(#[from] ConfigFileError),
}

pub type HandlerResult = Result<Reply, HandlerError>;

pub fn success(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, response::SUCCESS)
}

pub fn error(request: &RemotingCommand, code: i32, remark: impl Into<String>) -> HandlerResult {
    Ok(RemotingCommand::error_response(request, code, remark).into())
}
