//! The memory gRPC request messages may hold, attacked over raw HTTP/2: tonic allocates a
//! message's announced length as soon as its 5-byte prefix arrives, so streams that
//! announce large messages and never finish them held the decode limit each. Now each
//! announced length is reserved against `maxInFlightBytesPerConnection` and
//! `maxInFlightBytesTotal` first, and a Telemetry command is capped by
//! `grpcMaxTelemetryMessageSize`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use e2e::broker_harness::TempBroker;
use e2e::wait::{eventually, runtime};
use h2::SendStream;
use h2::client::{ResponseFuture, SendRequest};
use tokio::net::TcpStream;

use crate::common::{refusals, victim_is_served};

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
) -> (ResponseFuture, SendStream<Bytes>) {
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

/// The call's grpc-status, from its headers (a trailers-only answer) or trailers; `None`
/// while it has not ended within `within`.
async fn grpc_status(answer: ResponseFuture, within: Duration) -> Option<u32> {
    tokio::time::timeout(within, async move {
        let response = answer.await.ok()?;
        let code = |h: &http::HeaderMap| -> Option<u32> {
            h.get("grpc-status")?.to_str().ok()?.parse().ok()
        };
        if let Some(code) = code(response.headers()) {
            return Some(code);
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let _ = chunk.ok()?;
        }
        code(&body.trailers().await.ok()??)
    })
    .await
    .ok()
    .flatten()
}

/// A call holding an announced message: its status (see [`grpc_status`]) and its body.
struct Held {
    status: Pin<Box<dyn Future<Output = Option<u32>> + Send>>,
    _body: SendStream<Bytes>,
}

async fn hold(client: &mut SendRequest<Bytes>, port: u16, len: u32) -> Held {
    let (answer, body) = announce(client, port, SEND, len).await;
    Held {
        status: Box::pin(grpc_status(answer, Duration::from_secs(10))),
        _body: body,
    }
}

/// Waits for the first of `calls` to end: it must have been refused (RESOURCE_EXHAUSTED).
/// Which one the broker refuses depends on the order it reads the streams in. The
/// others are returned, still open.
async fn one_refused(calls: Vec<Held>) -> Vec<Held> {
    let (statuses, mut bodies): (Vec<_>, Vec<_>) =
        calls.into_iter().map(|c| (c.status, c._body)).unzip();
    let (status, i, rest) = futures::future::select_all(statuses).await;
    assert_eq!(status, Some(EXHAUSTED), "no call was refused");
    bodies.remove(i);
    rest.into_iter()
        .zip(bodies)
        .map(|(status, _body)| Held { status, _body })
        .collect()
}

/// None of `calls` was refused: each is still open (or ended without an answer).
async fn none_refused(calls: &mut [Held]) {
    for c in calls {
        if let Ok(Some(code)) =
            tokio::time::timeout(Duration::from_millis(200), &mut c.status).await
        {
            panic!("an admitted call ended with grpc-status {code}");
        }
    }
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
        // Two 700 KiB announcements on one connection: one fits in its 1 MiB, the other
        // is refused.
        let mut first = h2_connect(port).await;
        let pair = vec![
            hold(&mut first, port, MESSAGE).await,
            hold(&mut first, port, MESSAGE).await,
        ];
        let mut held = one_refused(pair).await;
        assert!(refusals(http, "maxInFlightBytesPerConnection").await >= 1.0);

        // Four more connections announce one each: three fit in the broker's 3 MiB
        // (2.8 MiB in all), the fourth does not.
        let mut connections = vec![first];
        let mut four = Vec::new();
        for _ in 0..4 {
            let mut c = h2_connect(port).await;
            four.push(hold(&mut c, port, MESSAGE).await);
            connections.push(c);
        }
        held.extend(one_refused(four).await);
        assert!(refusals(http, "maxInFlightBytesTotal").await >= 1.0);
        // The others were admitted: nothing answered them while their message is
        // incomplete.
        none_refused(&mut held).await;

        // A Telemetry command over grpcMaxTelemetryMessageSize ends its stream.
        let mut other = h2_connect(port).await;
        let (refused, _body) = announce(&mut other, port, TELEMETRY, 70_000).await;
        assert_eq!(
            grpc_status(refused, Duration::from_secs(10)).await,
            Some(EXHAUSTED)
        );
        assert!(refusals(http, "grpcMaxTelemetryMessageSize").await >= 1.0);

        // Once the holders are gone, their bytes are free again: a new 700 KiB
        // announcement is taken (completed with garbage, it fails to decode instead).
        drop(held);
        drop(connections);
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
