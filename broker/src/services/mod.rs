//! The services layer: the broker's state ([`Broker`], composed in [`state`]) and
//! everything requests and background tasks act on: metadata managers (topics, groups,
//! offsets, clients, locks), filters, transactions, delayed delivery, replication,
//! registration with nameservers, and the one path into the store ([`put_path`] over
//! [`store::MessageStoreApi`]).

pub(crate) mod client_requests;
pub mod clients;
pub(crate) mod conf_file;
pub(crate) mod consume_rate;
pub mod filter;
pub(crate) mod groups;
pub mod ha;
pub(crate) mod live_config;
pub(crate) mod locks;
pub(crate) mod long_polling;
pub mod membership;
mod namesrv_link;
pub mod namesrv_routes;
pub(crate) mod offsets;
pub(crate) mod pending_resets;
pub mod pop;
pub mod put_path;
pub mod record_owner;
pub mod redelivery;
pub mod registration;
pub mod schedule;
pub mod stamps;
pub mod state;
pub mod topics;
pub mod transaction;

pub use state::Broker;
