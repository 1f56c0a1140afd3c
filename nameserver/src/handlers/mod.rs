//! Request handlers, grouped by what they work on; [`crate::dispatch`] maps codes to
//! them.

pub mod broker;
pub mod config;
pub mod kv;
pub mod route;
