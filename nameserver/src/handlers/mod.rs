//! Request handlers, grouped by what they work on; [`crate::dispatch`] maps codes to
//! them.

pub mod broker;
pub mod config;
pub mod kv;
pub mod route;

use protocol::RemotingCommand;
use protocol::code::response;

/// Why a handler could not answer; [`crate::dispatch`] turns it into the error response.
pub use remoting::answer::HandlerError;

/// A SUCCESS response to `request`.
pub fn success(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, response::SUCCESS)
}
