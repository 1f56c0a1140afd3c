//! GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG (body = properties text).

use protocol::RemotingCommand;
use protocol::code::response;

use super::{HandlerError, success};
use crate::route_table::ConnId;
use crate::state::Shared;
use remoting::properties;

type Reply = Result<RemotingCommand, HandlerError>;

pub fn get(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let text = properties::render(shared.config.read().entries());
    Ok(success(request).with_body(text.into_bytes()))
}

/// Only the keys of [`crate::config::RUNTIME_UPDATABLE`]; anything else (paths above
/// all, CVE-2023-37582) refuses the whole update. Changes live until restart.
pub fn update(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let Ok(text) = std::str::from_utf8(&request.body) else {
        return Ok(RemotingCommand::error_response(
            request,
            response::SYSTEM_ERROR,
            "config body is not UTF-8",
        ));
    };
    let result = shared.config.write().update_at_runtime(text);
    Ok(match result {
        Ok(keys) => {
            tracing::info!(?keys, "namesrv config updated");
            success(request)
        }
        Err(e) => {
            tracing::warn!(error = %e, "namesrv config update refused");
            RemotingCommand::error_response(request, response::SYSTEM_ERROR, e.to_string())
        }
    })
}
