//! What the broker and the nameserver do with a connection before their own dispatch:
//! accept it under a gate and shake hands ([`listener`]), read its frames under the
//! length cap, the first-request deadline and the idle timeout ([`FrameReader`]), and,
//! for a server that answers one request at a time, the whole loop ([`serve`] over a
//! [`Handler`]). Per-connection state (registrations, memberships, bounds on work in
//! progress) stays with each server.

mod frames;
pub mod listener;
mod sequential;

pub use frames::FrameReader;
pub use sequential::{Handler, serve};

#[cfg(test)]
mod tests;
