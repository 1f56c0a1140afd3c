//! Why a request handler could not answer, and the error response the requester gets
//! for it (`NettyRemotingAbstract.processRequestCommand`'s catch: SYSTEM_ERROR with the
//! failure as remark), shared by the broker's and the nameserver's dispatch.

use protocol::RemotingCommand;
use protocol::body::BodyError;
use protocol::code::response;
use protocol::header::HeaderError;

/// Why a handler could not answer.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// A missing or malformed header field: the requester's fault, worded as
    /// `RemotingCommand.decodeCommandCustomHeader`'s exception.
    #[error(transparent)]
    Header(#[from] HeaderError),
    #[error("{0}")]
    Body(#[from] BodyError),
    /// Anything else the handler ran into (a file it could not persist, a store error).
    #[error("{0}")]
    Failed(String),
}

impl HandlerError {
    /// The error response to `request`: SYSTEM_ERROR with the failure as remark. A bad
    /// header is logged at debug only (any peer can send one), any other failure as a
    /// warning.
    pub fn response_to(&self, request: &RemotingCommand) -> RemotingCommand {
        match self {
            HandlerError::Header(e) => {
                tracing::debug!(code = request.code, error = %e, "bad request header");
                RemotingCommand::header_error_response(request, e)
            }
            e => {
                tracing::warn!(code = request.code, error = %e, "request failed");
                RemotingCommand::error_response(request, response::SYSTEM_ERROR, e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_a_system_error_naming_it() {
        let mut request = RemotingCommand::bare_request(protocol::code::request::PULL_MESSAGE);
        request.opaque = 41;
        let missing = HandlerError::Header(HeaderError::Missing("topic"));
        let answer = missing.response_to(&request);
        assert_eq!(answer.opaque, 41);
        assert!(answer.is_response());
        assert_eq!(answer.code, response::SYSTEM_ERROR);
        assert_eq!(
            answer.remark.as_deref(),
            Some("the custom field <topic> is null")
        );

        let failed = HandlerError::Failed("disk full".into()).response_to(&request);
        assert_eq!(
            (failed.opaque, failed.code, failed.remark.as_deref()),
            (41, response::SYSTEM_ERROR, Some("disk full"))
        );
    }
}
