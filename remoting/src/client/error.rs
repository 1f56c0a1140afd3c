//! Why a call failed, worded so an operator can act on it: every variant names the peer
//! (nameserver or broker, with its address) and refusals carry RocketMQ's response code
//! by name and number.

use std::fmt;

use protocol::code::{request, response};
use thiserror::Error;

/// Which process a call went to, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    NameServer(String),
    Broker(String),
}

impl Peer {
    pub fn addr(&self) -> &str {
        match self {
            Peer::NameServer(a) | Peer::Broker(a) => a,
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::NameServer(a) => write!(f, "nameserver {a}"),
            Peer::Broker(a) => write!(f, "broker {a}"),
        }
    }
}

/// `NAME (number)` of a response code, or just the number when RocketMQ has no name for it.
pub fn response_code_label(code: i32) -> String {
    match response::name(code) {
        Some(name) => format!("{name} ({code})"),
        None => format!("response code {code}"),
    }
}

fn request_label(code: i32) -> String {
    request::name(code).map_or_else(|| format!("request {code}"), str::to_owned)
}

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("cannot connect to {peer}: {error}")]
    Connect { peer: Peer, error: std::io::Error },
    #[error("{peer} closed the connection before answering")]
    Closed { peer: Peer },
    #[error("{peer} did not answer {} within {timeout_ms} ms", request_label(*.request))]
    Timeout {
        peer: Peer,
        request: i32,
        timeout_ms: u64,
    },
    #[error("{peer} answered {} with {}{}", request_label(*.request), response_code_label(*.code),
        if .remark.is_empty() { String::new() } else { format!(": {}", .remark.trim()) })]
    Refused {
        peer: Peer,
        request: i32,
        code: i32,
        remark: String,
    },
    #[error("{peer} answered {} with a malformed {what}: {reason}", request_label(*.request))]
    BadResponse {
        peer: Peer,
        request: i32,
        what: &'static str,
        reason: String,
    },
    #[error("no nameserver address given (use -n host:port[;host:port] or NAMESRV_ADDR)")]
    NoNameServer,
    #[error("{0}")]
    Invalid(String),
}

impl ClientError {
    /// The RocketMQ response code of a refusal.
    pub fn response_code(&self) -> Option<i32> {
        match self {
            ClientError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True when the peer could not be reached or stopped answering (as opposed to
    /// answering with an error).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. } | ClientError::Closed { .. } | ClientError::Timeout { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_names_peer_request_and_code() {
        let e = ClientError::Refused {
            peer: Peer::Broker("127.0.0.1:10911".into()),
            request: request::GET_TOPIC_STATS_INFO,
            code: response::TOPIC_NOT_EXIST,
            remark: "topic[X] not exist ".into(),
        };
        assert_eq!(
            e.to_string(),
            "broker 127.0.0.1:10911 answered GET_TOPIC_STATS_INFO with TOPIC_NOT_EXIST (17): topic[X] not exist"
        );
        assert_eq!(e.response_code(), Some(17));
        assert!(!e.is_unreachable());
        assert_eq!(response_code_label(9999), "response code 9999");
    }
}
