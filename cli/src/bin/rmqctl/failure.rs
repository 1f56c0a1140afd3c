//! Failures `rmqctl` itself recognises, beyond the client's: they carry the exit code the
//! README promises (1 not found, 2 bad command line, 3 unreachable).

use std::fmt;

/// A failure with its own exit code; found anywhere in an error's chain.
#[derive(Debug)]
pub enum Failure {
    /// The thing asked for does not exist (exit 1).
    NotFound(String),
    /// The command line lacks something the request needs (exit 2).
    Usage(String),
    /// No broker can be reached (exit 3), e.g. the nameserver lists none.
    Unreachable(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::NotFound(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::NotFound(m) | Failure::Usage(m) | Failure::Unreachable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Failure {}
