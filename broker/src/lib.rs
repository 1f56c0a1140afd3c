//! `rmq-broker`: a RocketMQ 4.9-compatible broker on the `store` crate.
//!
//! One tokio listener accepts client connections ([`server`]); each connection
//! ([`connection`]) decodes frames, runs requests concurrently up to a per-connection and
//! a per-broker bound, and answers them by opaque. [`dispatch`] holds the single table
//! from request code to handler. The broker's metadata lives in managers
//! ([`topics`], [`groups`], [`offsets`], [`clients`], [`locks`]) shared through
//! [`state::Broker`].

pub mod acl;
pub mod client_requests;
pub mod clients;
pub mod config;
pub mod config_keys;
pub mod connection;
pub mod consume_rate;
pub mod dispatch;
pub mod filter;
pub mod gates;
pub mod groups;
pub mod ha;
pub mod handlers;
pub mod in_flight;
pub mod limit_metrics;
pub mod live_config;
pub mod locks;
pub mod long_polling;
pub mod metric_handles;
pub mod metrics;
pub mod names;
pub mod offsets;
pub mod outbound;
pub mod properties;
pub mod put_path;
pub mod registration;
pub mod remoting_client;
pub mod schedule;
pub mod server;
pub mod skipped;
pub mod state;
pub mod store_adapter;
pub mod store_api;
#[cfg(test)]
pub(crate) mod test_fixture;
pub mod topics;
pub mod transaction;

/// Milliseconds since the Unix epoch (RocketMQ's `System.currentTimeMillis()`).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
