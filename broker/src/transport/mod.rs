//! The transport layer: the listeners ([`server`]), one task pair per client connection
//! ([`connection`]: framing, per-connection bounds, the writer) and what the writer sends
//! ([`outbound`]).

pub mod connection;
pub mod outbound;
pub mod server;
