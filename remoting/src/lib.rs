//! RocketMQ 4.x remoting shared by every process of rmq-rs: the broker, the nameserver,
//! `rmqctl`/`rmq-bench`, the operator and the end-to-end tests.
//!
//! - [`client`]: the one async client. A [`client::Connection`] multiplexes requests on
//!   one TCP (or TLS) connection, matched to answers by opaque
//!   (`NettyRemotingAbstract.responseTable`), with per-call timeouts and oneway sends;
//!   [`client::RemotingClient`] keeps one to a single peer and re-establishes it after a
//!   failure; [`client::Client`] is the admin API over a nameserver list
//!   (`MQClientAPIImpl`'s calls).
//! - [`server`]: what both servers do with a connection before their own dispatch: the
//!   accept loop under a [`security::conn_gate::ConnGate`], the TLS handshake within the
//!   first-request deadline, and the frame reader (length cap, first-request deadline,
//!   idle timeout); plus the sequential serve loop over a [`server::Handler`].
//! - [`http`]: the metrics/health HTTP endpoint's serve loop.
//! - [`properties`]: Java `.properties` text.
//! - [`answer`]: turning a handler's failure into RocketMQ's error response.
//!
//! Dependencies point one way: `protocol` <- `security` <- `remoting` <- the processes.

pub mod answer;
pub mod client;
pub mod http;
pub mod properties;
pub mod server;
