//! The consumption calls (POP): ReceiveMessage, AckMessage, ChangeInvisibleDuration,
//! ForwardMessageToDeadLetterQueue and QueryAssignment. They are answered by the POP
//! service once it is wired here; until then each answers UNIMPLEMENTED naming the call.

use tonic::Status;

pub fn not_yet(call: &str) -> Status {
    Status::unimplemented(format!(
        "{call} is not served by this broker yet (POP consumption)"
    ))
}

/// Calls no released 5.x client API makes: answered UNIMPLEMENTED, naming the call.
pub fn never(call: &str) -> Status {
    Status::unimplemented(format!("{call} is not supported by this broker"))
}
