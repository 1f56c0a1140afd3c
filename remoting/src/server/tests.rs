use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use protocol::code::response;
use protocol::{RemotingCodec, RemotingCommand};
use security::conn_gate::{ConnGate, GateLimits, GateMetrics, Refusal, RefusalCounters};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use super::{FrameReader, Handler, serve};

const MAX_FRAME: usize = 4096;

/// Answers every request with its code as remark; counts the responses it is sent.
#[derive(Default)]
struct Echo {
    responses: usize,
}

impl Handler for Echo {
    async fn request(&mut self, request: RemotingCommand) -> Option<RemotingCommand> {
        let answer = RemotingCommand::response_to(&request, response::SUCCESS);
        (!request.is_oneway()).then(|| answer.with_remark(request.code.to_string()))
    }

    fn response(&mut self, _: RemotingCommand) {
        self.responses += 1;
    }
}

struct Served {
    gate: Arc<ConnGate>,
    timeouts: prometheus_client::metrics::counter::Counter,
}

fn gate(first_request: Duration) -> Served {
    let timeouts = prometheus_client::metrics::counter::Counter::default();
    let gate = ConnGate::new(
        GateLimits::cap(4, first_request),
        GateMetrics {
            reasons: RefusalCounters::default()
                .with(Refusal::FirstRequestTimeout, timeouts.clone()),
            ..GateMetrics::default()
        },
    );
    Served { gate, timeouts }
}

/// Serves one end of a duplex pipe with [`Echo`]; the task's result is the handler.
fn start(served: &Served, server: DuplexStream) -> tokio::task::JoinHandle<Echo> {
    let peer: SocketAddr = "127.0.0.1:40100".parse().unwrap();
    let slot = served.gate.admit(peer.ip()).unwrap();
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server);
        let frames = FrameReader::new(read, MAX_FRAME, 1024, peer, slot, Duration::from_secs(60));
        let mut echo = Echo::default();
        let close = CancellationToken::new();
        serve(
            frames,
            write,
            MAX_FRAME,
            Duration::from_secs(5),
            &close,
            &mut echo,
        )
        .await;
        echo
    })
}

/// Requests are answered in order, oneway requests are not, a response goes to the
/// handler's `response`, and the loop ends when the peer hangs up.
#[tokio::test]
async fn requests_are_answered_in_order() {
    let served = gate(Duration::from_secs(10));
    let (client, server) = tokio::io::duplex(64 * 1024);
    let task = start(&served, server);
    let (read, write) = tokio::io::split(client);
    let mut requests = FramedWrite::new(write, RemotingCodec::new(MAX_FRAME));
    let mut answers = FramedRead::new(read, RemotingCodec::new(MAX_FRAME));
    let mut oneway = RemotingCommand::bare_request(9);
    oneway.mark_oneway();
    let mut stray = RemotingCommand::response_to(&RemotingCommand::bare_request(1), 0);
    stray.opaque = 77;
    for cmd in [
        RemotingCommand::bare_request(1),
        oneway,
        stray,
        RemotingCommand::bare_request(2),
    ] {
        requests.send(cmd).await.unwrap();
    }
    for code in ["1", "2"] {
        let answer = answers.next().await.unwrap().unwrap();
        assert_eq!(answer.remark.as_deref(), Some(code));
    }
    drop(requests);
    drop(answers);
    let echo = task.await.unwrap();
    assert_eq!(echo.responses, 1);
    assert_eq!(
        served.gate.open(),
        0,
        "the slot is freed with the connection"
    );
    assert_eq!(served.timeouts.get(), 0);
}

/// A peer that sends part of a frame and then nothing is closed at the first-request
/// deadline, counted as such.
#[tokio::test]
async fn a_silent_peer_is_closed_at_the_first_request_deadline() {
    let served = gate(Duration::from_millis(200));
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let task = start(&served, server);
    client.write_all(&[0, 0, 0]).await.unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(client.read(&mut buf).await.unwrap(), 0, "closed");
    task.await.unwrap();
    assert_eq!(served.timeouts.get(), 1);
    assert_eq!(served.gate.open(), 0);
}

/// A frame over the length cap closes the connection before it is read, without an
/// answer; it is not a first-request timeout.
#[tokio::test]
async fn a_frame_over_the_cap_closes_the_connection() {
    let served = gate(Duration::from_secs(10));
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let task = start(&served, server);
    let announced = u32::try_from(MAX_FRAME).unwrap();
    client.write_all(&announced.to_be_bytes()).await.unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(client.read(&mut buf).await.unwrap(), 0, "closed unanswered");
    task.await.unwrap();
    assert_eq!(served.timeouts.get(), 0);
    assert_eq!(served.gate.open(), 0);
}
