//! `rmq-broker`: a RocketMQ 4.9-compatible broker on the `store` crate.
//!
//! A request runs one way down four layers, and nothing lower imports anything higher:
//!
//! * [`transport`]: listeners, connections (framing, per-connection bounds, the writer),
//!   and the HTTP metrics/health server.
//! * [`dispatch`]: the single table from request code to handler, with the ACL check in
//!   front of it.
//! * [`handlers`]: one function per request code, in RocketMQ's processor groups.
//! * [`services`]: the broker's state and background services ([`services::Broker`]
//!   holds the metadata managers: topics, groups, offsets, clients, locks, filters,
//!   transactions, schedule, replication) and the one path into the store.
//!
//! Beside them, leaves any layer may use: [`config`], [`metrics`] (series definitions),
//! [`names`], the request bounds ([`in_flight`]), the listener gates ([`gates`]) and the
//! outbound remoting client ([`remoting_client`]).

pub mod config;
pub mod dispatch;
pub mod gates;
pub mod grpc;
pub(crate) mod handlers;
pub(crate) mod in_flight;
pub mod metrics;
pub(crate) mod names;
pub(crate) mod remoting_client;
pub mod services;
#[cfg(test)]
pub(crate) mod test_fixture;
pub mod transport;

/// Milliseconds since the Unix epoch (RocketMQ's `System.currentTimeMillis()`).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
