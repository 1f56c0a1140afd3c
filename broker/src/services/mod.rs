//! The services layer: the broker's state ([`Broker`], composed in [`state`]) and
//! everything requests and background tasks act on: metadata managers (topics, groups,
//! offsets, clients, locks), filters, transactions, delayed delivery, replication,
//! registration with nameservers, and the one path into the store ([`put_path`] over
//! [`store_api`]).

pub mod client_requests;
pub mod clients;
pub mod consume_rate;
pub mod filter;
pub mod groups;
pub mod ha;
pub mod live_config;
pub mod locks;
pub mod long_polling;
pub mod offsets;
pub mod put_path;
pub mod registration;
pub mod schedule;
pub mod skipped;
pub mod state;
pub mod store_adapter;
pub mod store_api;
pub mod topics;
pub mod transaction;

pub use state::Broker;
