//! Harness for the end-to-end suites: find the built binaries, start them on free
//! loopback ports with a private data directory, and talk to them over real TCP.
//!
//! The suites expect `cargo build --workspace --bins` to have run first; binaries are
//! looked up next to the test executable (see [`binary::path`]).
#![allow(clippy::unwrap_used)]

pub mod binary;
pub mod broker;
pub mod broker_harness;
pub mod cli;
pub mod client;
pub mod failover_sim;
pub mod ha_peer;
pub mod http;
pub mod metrics;
pub mod nameserver;
pub mod netns;
pub mod ports;
pub mod wait;

pub use client::Client;
pub use nameserver::NameServer;
