//! Loopback ports for servers under test.
//!
//! Why not "bind port 0, read it, close": that hands out a port from the kernel's
//! ephemeral range, and under a loaded suite the very same port is soon picked as the
//! *source* port of some client connection, so the server that was told to listen on it
//! fails with "Address already in use" (seen in CI). Ports here come from below the
//! ephemeral range instead, where the kernel never assigns source ports, from a
//! process-wide cursor so two tests of one binary never get the same port.
//!
//! Each port handed out owns a block of [`BLOCK`] ports centred on it: the broker derives
//! `listenPort - 2` (VIP channel) and `listenPort + 1` (default `haListenPort`) from its
//! listen port, and those must not collide with another server's port either.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// Ports per allocation: the port itself plus two on each side.
const BLOCK: u32 = 5;
/// Lowest port used; well above the well-known and registered-service ports tests might
/// meet on a developer machine.
const FLOOR: u32 = 12_000;

static CURSOR: AtomicU32 = AtomicU32::new(0);

/// A port on 127.0.0.1 that is free now, with its neighbours (±2) free as well, and
/// that no other caller in this process has been given.
pub fn free_port() -> u16 {
    let ceiling = ephemeral_floor().max(FLOOR + 1_000 * BLOCK);
    let blocks = (ceiling - FLOOR) / BLOCK;
    // Start somewhere that depends on the process, so suites run side by side (two
    // clones on one machine) tend to use different regions.
    let start = std::process::id().wrapping_mul(2_654_435_761) % blocks;
    for _ in 0..blocks {
        let n = CURSOR.fetch_add(1, Ordering::Relaxed);
        let block = (start + n) % blocks;
        let port = FLOOR + block * BLOCK + BLOCK / 2;
        if (port - 2..=port + 2).all(is_free) {
            return port as u16;
        }
    }
    panic!("no free loopback port block between {FLOOR} and {ceiling}");
}

fn is_free(port: u32) -> bool {
    // 0.0.0.0 conflicts with any address the port is bound on, loopback included.
    TcpListener::bind(("0.0.0.0", port as u16)).is_ok()
}

/// The first port of the kernel's ephemeral range (`ip_local_port_range`), 32768 when
/// it cannot be read.
fn ephemeral_floor() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_spaced_and_outside_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let floor = ephemeral_floor();
        for (i, a) in ports.iter().enumerate() {
            assert!(u32::from(*a) + 2 < floor, "{a} is in the ephemeral range");
            for b in &ports[i + 1..] {
                assert!(a.abs_diff(*b) >= BLOCK as u16, "{a} and {b} overlap");
            }
        }
    }
}
