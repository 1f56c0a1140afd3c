//! The gRPC listener's limits under attack from raw sockets: connection caps (total and
//! per source), a connection that never sends its HTTP/2 preface, and the concurrent
//! streams a connection is allowed (advertised in the server's SETTINGS), and a Telemetry
//! stream that never sends its Settings. POP's own caps
//! (`popMaxInFlightPerGroupTopic`, `popMaxInFlightTotal`, `popMaxParkedTotal`) are attacked
//! at the broker level in broker/src/services/pop/service_tests.rs; the Telemetry stream
//! cap (`grpcMaxTelemetryStreamsPerClient`) in tests/tests/grpc_endpoint.rs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use e2e::broker_harness::TempBroker;
use e2e::wait::{eventually, runtime};
use grpc_api::v2::TelemetryCommand;
use grpc_api::v2::messaging_service_client::MessagingServiceClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{refusals, victim_is_served};

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

async fn connect_from(port: u16, local: IpAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(local, 0))
        .expect("bind the attacker address");
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connect to the gRPC port")
}

/// Whether the server closed `s` (EOF or reset) within `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 256];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// The HTTP/2 client preface and an empty SETTINGS frame.
async fn h2_preface(s: &mut TcpStream) {
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .expect("preface");
    s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0])
        .await
        .expect("settings");
}

/// SETTINGS_MAX_CONCURRENT_STREAMS (0x3) of the server's first SETTINGS frame.
async fn advertised_max_streams(s: &mut TcpStream) -> Option<u32> {
    let mut head = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut head))
        .await
        .ok()?
        .ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    if head[3] != 4 || len > 1024 {
        return None;
    }
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).await.ok()?;
    payload.chunks_exact(6).find_map(|p| {
        (u16::from_be_bytes([p[0], p[1]]) == 3)
            .then(|| u32::from_be_bytes([p[2], p[3], p[4], p[5]]))
    })
}

#[test]
fn grpc_connection_caps_hold_and_the_victim_is_served() {
    let mut b = TempBroker::start(
        None,
        &[
            ("grpcMaxConnections", "3"),
            ("grpcMaxConnectionsPerIp", "2"),
        ],
    );
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        // Two connections from the attacker's address are admitted; the third is
        // closed at once (grpcMaxConnectionsPerIp).
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut s = connect_from(port, ATTACKER).await;
            h2_preface(&mut s).await;
            held.push(s);
        }
        let mut third = connect_from(port, ATTACKER).await;
        assert!(
            closed_within(&mut third, Duration::from_secs(10)).await,
            "a third connection from one address stayed open"
        );
        eventually(
            Duration::from_secs(10),
            "the per-source refusal counted",
            || async { refusals(b.broker.http_port, "grpcMaxConnectionsPerIp").await >= 1.0 },
        )
        .await;
        // One more from the victim's address fills the total (grpcMaxConnections=3);
        // a fourth from anywhere is closed.
        let mut victim = connect_from(port, IpAddr::V4(Ipv4Addr::LOCALHOST)).await;
        h2_preface(&mut victim).await;
        let mut fourth = connect_from(port, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3))).await;
        assert!(
            closed_within(&mut fourth, Duration::from_secs(10)).await,
            "a connection over grpcMaxConnections stayed open"
        );
        eventually(
            Duration::from_secs(10),
            "the total refusal counted",
            || async { refusals(b.broker.http_port, "grpcMaxConnections").await >= 1.0 },
        )
        .await;
        // The admitted victim connection is served: the server's SETTINGS arrive.
        assert!(advertised_max_streams(&mut victim).await.is_some());
        drop(held);
        victim_is_served(&mut b.broker).await;
    });
}

#[test]
fn a_silent_grpc_connection_is_closed_and_streams_per_connection_are_capped() {
    let mut b = TempBroker::start(
        None,
        &[
            ("grpcFirstRequestTimeoutMillis", "500"),
            ("grpcMaxConcurrentStreams", "3"),
        ],
    );
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        // Connected, then nothing (no TLS hello, no preface): closed after
        // grpcFirstRequestTimeoutMillis, not held for ever.
        let mut silent = connect_from(port, ATTACKER).await;
        assert!(
            closed_within(&mut silent, Duration::from_secs(10)).await,
            "a silent connection stayed open past grpcFirstRequestTimeoutMillis"
        );
        // A Telemetry stream that never sends its Settings is ended, not held.
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let mut client = MessagingServiceClient::new(channel);
        let mut quiet = tonic::Request::new(futures::stream::pending::<TelemetryCommand>());
        quiet
            .metadata_mut()
            .insert("x-mq-client-id", "quiet-telemetry".parse().expect("id"));
        let answer = tokio::time::timeout(Duration::from_secs(20), client.telemetry(quiet))
            .await
            .expect("a Telemetry call without Settings is answered, not held");
        let status = answer.expect_err("no Settings, no stream");
        assert!(
            status.message().contains("grpcFirstRequestTimeoutMillis"),
            "{status:?}"
        );
        // A connection that speaks HTTP/2 is told the stream cap in the server's
        // SETTINGS (grpcMaxConcurrentStreams); h2 refuses streams beyond it.
        let mut s = connect_from(port, ATTACKER).await;
        h2_preface(&mut s).await;
        assert_eq!(advertised_max_streams(&mut s).await, Some(3));
        victim_is_served(&mut b.broker).await;
    });
}
