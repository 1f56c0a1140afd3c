//! Free loopback ports for servers under test.

use std::net::TcpListener;

/// A port that was free a moment ago on 127.0.0.1. The OS does not hand out the same
/// ephemeral port again right away, which keeps the window for races small.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}
