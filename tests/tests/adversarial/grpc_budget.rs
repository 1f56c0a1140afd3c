//! The memory gRPC request messages may hold, attacked over raw HTTP/2: tonic allocates a
//! message's announced length as soon as its 5-byte prefix arrives, so streams that
//! announce large messages and never finish them held the decode limit each. Now each
//! announced length is reserved against `maxInFlightBytesPerConnection` first, the bytes
//! that arrive against `maxInFlightBytesTotal`, and a Telemetry command is capped by
//! `grpcMaxTelemetryMessageSize`.

use std::time::Duration;

use bytes::Bytes;
use e2e::broker_harness::TempBroker;
use e2e::wait::{eventually, runtime};
use h2::client::{ResponseFuture, SendRequest};
use tokio::net::TcpStream;

use crate::common::{grpc_status, refusals, victim_is_served};

const SEND: &str = "/apache.rocketmq.v2.MessagingService/SendMessage";
const TELEMETRY: &str = "/apache.rocketmq.v2.MessagingService/Telemetry";
/// RESOURCE_EXHAUSTED.
const EXHAUSTED: u32 = 8;

async fn h2_connect(port: u16) -> SendRequest<Bytes> {
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the gRPC port");
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Opens a call to `path` and sends only the prefix of a `len`-byte message (and a few
/// of its bytes); the call stays open.
async fn announce(
    client: &mut SendRequest<Bytes>,
    port: u16,
    path: &str,
    len: u32,
) -> (ResponseFuture, h2::SendStream<Bytes>) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1:{port}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("request");
    let ready = client.clone().ready().await.expect("stream slot");
    *client = ready;
    let (answer, mut body) = client.send_request(request, false).expect("send request");
    let mut prefix = vec![0u8];
    prefix.extend_from_slice(&len.to_be_bytes());
    prefix.extend_from_slice(&[0u8; 16]);
    body.send_data(Bytes::from(prefix), false).expect("prefix");
    (answer, body)
}

/// Sends `n` more bytes of the call's message.
fn fill(body: &mut h2::SendStream<Bytes>, n: usize) {
    body.send_data(Bytes::from(vec![0x0au8; n]), false)
        .expect("message bytes");
}

#[test]
fn announced_request_messages_are_reserved_before_they_are_buffered() {
    const MESSAGE: u32 = 700 * 1024;
    let mut b = TempBroker::start(
        None,
        &[
            ("maxInFlightBytesPerConnection", "1048576"),
            ("maxInFlightBytesTotal", "3145728"),
            ("grpcMaxTelemetryMessageSize", "65536"),
        ],
    );
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        let http = b.broker.http_port;
        // One connection announces two 700 KiB messages: one does not fit in the
        // connection's 1 MiB (which one is the server's scheduling).
        let mut first = h2_connect(port).await;
        let (one, one_body) = announce(&mut first, port, SEND, MESSAGE).await;
        let (two, two_body) = announce(&mut first, port, SEND, MESSAGE).await;
        let one = grpc_status(one, Duration::from_secs(10));
        let two = grpc_status(two, Duration::from_secs(10));
        tokio::pin!(one, two);
        let (code, kept) = tokio::select! {
            code = &mut one => (code, two_body),
            code = &mut two => (code, one_body),
        };
        assert_eq!(
            code,
            Some(EXHAUSTED),
            "a second 700 KiB message on one connection was taken"
        );
        assert!(refusals(http, "maxInFlightBytesPerConnection").await >= 1.0);

        drop((kept, one, two, first));

        // The shared total holds the bytes that arrived, not what was announced: five
        // connections send all but the last bytes of a 700 KiB message each; four fit
        // in the broker's 3 MiB, the fifth's bytes (whichever comes last) do not.
        let mut bodies = Vec::new();
        let mut answers = futures::stream::FuturesUnordered::new();
        let mut connections = Vec::new();
        for _ in 0..5 {
            let mut c = h2_connect(port).await;
            let (answer, mut body) = announce(&mut c, port, SEND, MESSAGE).await;
            fill(&mut body, MESSAGE as usize - 16 - 8);
            answers.push(grpc_status(answer, Duration::from_secs(20)));
            bodies.push(body);
            connections.push(c);
        }
        assert_eq!(
            futures::StreamExt::next(&mut answers).await.flatten(),
            Some(EXHAUSTED),
            "bytes over maxInFlightBytesTotal were taken"
        );
        assert!(refusals(http, "maxInFlightBytesTotal").await >= 1.0);
        let mut other = h2_connect(port).await;

        // A Telemetry command over grpcMaxTelemetryMessageSize ends its stream.
        let (refused, _body) = announce(&mut other, port, TELEMETRY, 70_000).await;
        assert_eq!(
            grpc_status(refused, Duration::from_secs(10)).await,
            Some(EXHAUSTED)
        );
        assert!(refusals(http, "grpcMaxTelemetryMessageSize").await >= 1.0);

        // Once the holders are gone, their bytes are free again: a new 700 KiB
        // announcement is taken (completed with garbage, it fails to decode instead).
        drop((answers, bodies, connections));
        eventually(
            Duration::from_secs(10),
            "the holders' reservations to be freed",
            || async {
                let mut c = h2_connect(port).await;
                let (answer, mut body) = announce(&mut c, port, SEND, MESSAGE).await;
                let rest = vec![0xffu8; MESSAGE as usize - 16];
                body.send_data(Bytes::from(rest), true).expect("rest");
                let code = grpc_status(answer, Duration::from_secs(10)).await;
                code.is_some_and(|c| c != EXHAUSTED)
            },
        )
        .await;
        victim_is_served(&mut b.broker).await;
    });
}
