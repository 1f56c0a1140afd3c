//! Code shared by the broker's load-generator examples.

pub mod conn;
