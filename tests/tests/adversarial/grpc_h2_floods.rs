//! HTTP/2 control-frame floods on the 5.x gRPC port, written as raw frames (9-byte
//! header: 24-bit length, type, flags, 31-bit stream id) over plain sockets: PINGs whose
//! ACKs are never read, SETTINGS frames never ACKed, a header block that never ends
//! (CONTINUATION after CONTINUATION), and WINDOW_UPDATE / empty DATA frames on an open
//! stream. Rapid reset (HEADERS then RST_STREAM) is attacked in `grpc_round2`.
//!
//! The server may close an attacking connection (GOAWAY, reset) or stop reading it (its
//! own writes back up); both are fine. What a flood must never do is grow the broker's
//! memory without bound, wedge the listener, or take it down: each test floods a few
//! connections for a few seconds, then checks the process is alive, its anonymous RSS
//! grew by less than [`RSS_BOUND_KIB`], and both a remoting client and a gRPC health
//! check on a fresh connection are served.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use e2e::broker_harness::TempBroker;
use e2e::wait::runtime;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::common::victim_is_served;

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// How long each attacking connection floods.
const FLOOD_FOR: Duration = Duration::from_secs(3);
/// Attacking connections flooding at once.
const CONNECTIONS: usize = 4;
/// The anonymous RSS growth a flood may cause (connection buffers, not per-frame state).
const RSS_BOUND_KIB: u64 = 64 * 1024;

// HTTP/2 frame types (RFC 9113 §6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

/// One HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("frame length");
    assert!(len < 1 << 24, "frame payload over 24 bits");
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// `frame` repeated `times` times, written with one syscall per batch.
fn batch(one: &[u8], times: usize) -> Vec<u8> {
    one.repeat(times)
}

/// An HPACK string literal, no Huffman coding (lengths under 127 only).
fn hpack_string(out: &mut Vec<u8>, s: &str) {
    assert!(s.len() < 127, "short literals only");
    out.push(s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

/// The header block of a gRPC health check request, HPACK-encoded by hand: indexed
/// `:method POST` and `:scheme http`, then literals without indexing.
fn request_headers() -> Vec<u8> {
    let mut h = vec![0x83, 0x86];
    h.push(0x04); // :path, name from static index 4
    hpack_string(&mut h, "/grpc.health.v1.Health/Check");
    h.push(0x01); // :authority, static index 1
    hpack_string(&mut h, "127.0.0.1");
    h.extend([0x0f, 0x10]); // content-type, static index 31
    hpack_string(&mut h, "application/grpc");
    h.push(0x00); // a new name
    hpack_string(&mut h, "te");
    hpack_string(&mut h, "trailers");
    h
}

/// Header fields that only make the block longer: what a CONTINUATION flood carries.
fn filler_headers(n: usize) -> Vec<u8> {
    let mut h = Vec::new();
    let value = "v".repeat(100);
    for i in 0..n {
        h.push(0x00);
        hpack_string(&mut h, &format!("x-flood-{i}"));
        hpack_string(&mut h, &value);
    }
    h
}

/// How an attacking connection ended its flood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A write failed: the server closed or reset the connection.
    Closed,
    /// A write made no progress for a second: the server stopped reading.
    Stalled,
    /// The server read everything for the whole flood.
    Open,
}

async fn connect_from(port: u16) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(ATTACKER, 0))
        .expect("bind the attacker address");
    tokio::time::timeout(
        Duration::from_secs(10),
        socket.connect(SocketAddr::from(([127, 0, 0, 1], port))),
    )
    .await
    .expect("connect timed out")
    .expect("connect to the gRPC port")
}

/// Connects, sends the client preface and `opening`, then writes `repeated` over and
/// over for [`FLOOD_FOR`] without ever reading. Returns the connection (kept open, so
/// its state is still held while memory is measured), how the flood ended and the bytes
/// written.
async fn flood(port: u16, opening: Vec<u8>, repeated: Vec<u8>) -> (TcpStream, Outcome, usize) {
    let mut s = connect_from(port).await;
    let mut start = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    start.extend(frame(SETTINGS, 0, 0, &[]));
    start.extend(opening);
    let deadline = tokio::time::Instant::now() + FLOOD_FOR;
    let mut written = 0;
    let mut chunk: &[u8] = &start;
    loop {
        if tokio::time::Instant::now() >= deadline {
            return (s, Outcome::Open, written);
        }
        match tokio::time::timeout(Duration::from_secs(1), s.write_all(chunk)).await {
            Err(_) => return (s, Outcome::Stalled, written),
            Ok(Err(_)) => return (s, Outcome::Closed, written),
            Ok(Ok(())) => written += chunk.len(),
        }
        chunk = &repeated;
    }
}

/// A gRPC health check on a fresh connection is answered SERVING.
async fn grpc_victim_is_served(port: u16) {
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("victim gRPC connect");
        HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: "apache.rocketmq.v2.MessagingService".into(),
            })
            .await
            .expect("victim health check answered")
            .into_inner()
    })
    .await
    .expect("victim health check timed out");
    assert_eq!(answer.status, ServingStatus::Serving as i32);
}

/// Runs [`CONNECTIONS`] floods at once against a fresh broker and asserts what no flood
/// may take away.
fn survives(name: &str, opening: fn() -> Vec<u8>, repeated: fn() -> Vec<u8>) {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        // Warm both listeners up first so their first-use allocations are not counted.
        victim_is_served(&mut b.broker).await;
        grpc_victim_is_served(port).await;
        let rss_before = b.broker.anon_rss_kib().expect("rss");
        let floods = (0..CONNECTIONS).map(|_| flood(port, opening(), repeated()));
        let ended = futures::future::join_all(floods).await;
        // Measured while the attacking connections are still open: whatever state the
        // server keeps for them is still held.
        let rss_flooded = b.broker.anon_rss_kib().expect("rss");
        assert!(
            b.broker.running(),
            "the broker died; log:\n{}",
            b.broker.log()
        );
        let outcomes: Vec<_> = ended.iter().map(|(_, o, n)| (*o, *n)).collect();
        eprintln!(
            "{name}: {outcomes:?} (outcome, bytes written) per connection, \
             anon RSS {rss_before} -> {rss_flooded} KiB"
        );
        assert!(
            rss_flooded < rss_before + RSS_BOUND_KIB,
            "{name} grew the broker from {rss_before} to {rss_flooded} KiB"
        );
        // Served while the attackers still hold their connections, and after.
        grpc_victim_is_served(port).await;
        victim_is_served(&mut b.broker).await;
        drop(ended);
        grpc_victim_is_served(port).await;
        victim_is_served(&mut b.broker).await;
    });
}

/// PINGs whose ACKs are never read: the server's writes back up.
#[test]
fn a_ping_flood_whose_acks_are_never_read_is_bounded() {
    survives("PING flood", Vec::new, || {
        batch(&frame(PING, 0, 0, b"floodpng"), 1000)
    });
}

/// SETTINGS frames over and over, the server's own SETTINGS never ACKed.
#[test]
fn a_settings_flood_that_never_acks_is_bounded() {
    survives("SETTINGS flood", Vec::new, || {
        // SETTINGS_HEADER_TABLE_SIZE 4096, SETTINGS_MAX_CONCURRENT_STREAMS 100.
        let settings = [0, 1, 0, 0, 0x10, 0, 0, 3, 0, 0, 0, 100];
        batch(&frame(SETTINGS, 0, 0, &settings), 1000)
    });
}

/// A header block that never ends: HEADERS without END_HEADERS, then CONTINUATION
/// frames full of header fields for ever.
#[test]
fn an_endless_continuation_flood_is_bounded() {
    survives(
        "CONTINUATION flood",
        || frame(HEADERS, 0, 1, &request_headers()),
        || batch(&frame(CONTINUATION, 0, 1, &filler_headers(10)), 16),
    );
}

/// WINDOW_UPDATEs (on the stream and the connection) on a stream left open.
#[test]
fn a_window_update_flood_on_an_open_stream_is_bounded() {
    survives(
        "WINDOW_UPDATE flood",
        || frame(HEADERS, END_HEADERS, 1, &request_headers()),
        || {
            let mut both = frame(WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes());
            both.extend(frame(WINDOW_UPDATE, 0, 0, &1u32.to_be_bytes()));
            batch(&both, 1000)
        },
    );
}

/// Empty DATA frames (no END_STREAM) on a stream left open: each is a body chunk of
/// nothing, handed to the call.
#[test]
fn an_empty_data_flood_on_an_open_stream_is_bounded() {
    survives(
        "empty DATA flood",
        || frame(HEADERS, END_HEADERS, 1, &request_headers()),
        || batch(&frame(DATA, 0, 1, &[]), 2000),
    );
}
