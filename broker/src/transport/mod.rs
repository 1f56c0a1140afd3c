//! The transport layer: the listeners ([`server`]), one task pair per client connection
//! ([`connection`]: framing, per-connection bounds, the writer), and the HTTP
//! metrics/health endpoint ([`http`]); requests that wait (disk, slave, long polling)
//! are driven per connection by [`waiting`].

pub mod connection;
pub mod http;
pub mod server;
mod waiting;
