//! Request handlers, grouped by what they work on; [`crate::dispatch`] maps codes to
//! them.

pub mod broker;
pub mod config;
pub mod kv;
pub mod route;

use protocol::RemotingCommand;
use protocol::body::BodyError;
use protocol::code::response;
use protocol::header::HeaderError;

/// Why a handler could not answer; [`crate::dispatch`] turns it into the error response.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error(transparent)]
    Header(#[from] HeaderError),
    #[error("{0}")]
    Body(#[from] BodyError),
    #[error("{0}")]
    Failed(String),
}

/// A SUCCESS response to `request`.
pub fn success(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, response::SUCCESS)
}
