//! One client connection.
//!
//! The reader decodes frames and runs each request; one that cannot finish at once is
//! handed to the connection's driver of waiting requests ([`super::waiting`]), so a parked
//! long-poll pull or a send waiting for the disk does not hold up the requests pipelined
//! behind it;
//! answers go out in completion order, matched by opaque. Work is bounded: a request
//! that would exceed `maxInFlightPerConnection` or the broker-wide `maxInFlightTotal`
//! is answered at once with SYSTEM_BUSY instead of queueing. A pull that parks (long
//! polling) gives its permits back and holds a parked-pull permit instead
//! (`maxParkedPullsPerConnection`, `maxParkedPullsTotal`), so parked pulls never starve
//! sends and heartbeats. Every waiting request is dropped when its connection closes.
//! The writer task owns the socket's write half and is also how the broker pushes
//! requests to the client (NOTIFY_CONSUMER_IDS_CHANGED); a write that makes no progress
//! within `writeTimeoutMillis` closes the connection, so a peer that stops reading cannot
//! pin the connection, its consumer membership and its queue locks. Answers not yet
//! written hold their bytes against `maxInFlightBytesPerConnection` (and the broker-wide
//! total); while they are over it the reader reads nothing more, so a peer pipelining
//! requests with large answers it does not read gets no more than that. A frame that does
//! not decode closes this connection only. A connection whose first complete frame has
//! not arrived by its slot's deadline (`firstRequestTimeoutMillis`, counted from accept)
//! is closed, so silent peers cannot hold slots; after that first frame only
//! `serverChannelMaxIdleTimeSeconds` applies (4.x clients heartbeat every 30 s). Reading
//! under these bounds is the shared [`FrameReader`]'s; what is per connection here is
//! the pipelining and its bounds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use protocol::code::{request as rq, response};
use protocol::{RemotingCodec, RemotingCommand};
use remoting::server::FrameReader;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::waiting::Waiting;
use crate::dispatch;
use crate::handlers::outbound::Outbound;
use crate::in_flight::{InFlightLimit, InFlightPermit};
use crate::services::Broker;
use crate::services::clients::{Channel, Conn};
use security::conn_gate::ConnSlot;

/// Batches of answers waiting for the writer.
const OUTBOUND_QUEUE: usize = 1024;
/// Answers the reader collects before handing them to the writer even though more input
/// is at hand (bounds the delay a long burst adds to its first answers).
const ANSWER_BATCH: usize = 32;
/// Frames served back to back between two checks of the connection's close token.
const CLOSE_CHECK_EVERY: u32 = 64;
/// Read buffer: room for a few dozen pipelined 1 KiB sends per read.
const READ_BUFFER: usize = 64 * 1024;
/// Below this size body parts are copied into the write buffer (fewer syscalls).
const INLINE_PART_MAX: usize = 16 * 1024;

/// What an answer is reckoned to hold besides its body and store views (the command,
/// its header fields, the batch slot).
const ANSWER_OVERHEAD: usize = 512;

/// Answers handed to the writer in one channel message.
type Answers = Vec<Answer>;

/// An answer on its way to the peer. Until the writer has encoded it, it holds its bytes
/// against the connection's answer budget and the broker-wide in-flight bytes: a peer
/// that pipelines requests with large answers and reads none of them would otherwise
/// have the broker hold every answer (`maxInFlightBytesPerConnection` bounds them, and
/// the reader stops reading while they are over it).
struct Answer {
    out: Outbound,
    _held: Option<(InFlightPermit, InFlightPermit)>,
}

impl Answer {
    /// `out`, its bytes charged to `budget` and the broker-wide total whether they fit or
    /// not (the answer exists already; what the bound withholds is the next request).
    fn charged(broker: &Broker, budget: &Arc<InFlightLimit>, out: Outbound) -> Self {
        let bytes = ANSWER_OVERHEAD
            + out.command.body.len()
            + out.command.remark.as_ref().map_or(0, String::len)
            + out.parts_len();
        let held = (
            budget.acquire_units(bytes),
            broker.in_flight_bytes.acquire_units(bytes),
        );
        Self {
            out,
            _held: Some(held),
        }
    }

    /// A request the broker pushes (bounded by its channel, not by the budget).
    fn push(cmd: RemotingCommand) -> Self {
        Self {
            out: cmd.into(),
            _held: None,
        }
    }
}

/// The connection over any byte stream halves (plain TCP today; TLS wraps the same).
pub async fn serve_io<R, W>(
    read: R,
    write: W,
    peer: SocketAddr,
    broker: Arc<Broker>,
    slot: ConnSlot,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let id = broker.next_conn_id();
    let (tx, rx) = mpsc::channel::<Answers>(OUTBOUND_QUEUE);
    let (push_tx, push_rx) = mpsc::channel::<RemotingCommand>(64);
    let close = broker.shutdown.child_token();
    let channel = Channel {
        id,
        peer,
        outbound: push_tx,
        close: close.clone(),
    };
    broker.clients.add_channel(channel.clone());
    broker.metrics.connection_opened();
    // Shared by the requests' futures: cloning the `Arc` per request is one atomic add,
    // where cloning `Conn` would clone a sender and a cancellation token (which locks).
    let conn = Arc::new(Conn { id, peer, channel });
    let max_frame = broker.config.broker.frame_max_length as usize;
    let limits = ConnLimits {
        requests: InFlightLimit::new(broker.config.broker.max_in_flight_per_connection as usize),
        answers: InFlightLimit::new(
            usize::try_from(broker.config.broker.max_in_flight_bytes_per_connection)
                .unwrap_or(usize::MAX),
        ),
        drained: Arc::new(Notify::new()),
        parked: InFlightLimit::new(broker.config.broker.max_parked_pulls_per_connection as usize),
        bytes: InFlightLimit::new(
            usize::try_from(broker.config.broker.max_in_flight_bytes_per_connection)
                .unwrap_or(usize::MAX),
        ),
    };
    let writer = tokio::spawn(write_loop(
        write,
        rx,
        push_rx,
        WriterLimits {
            max_frame,
            deadline: broker.config.broker.write_timeout(),
        },
        Arc::clone(&limits.drained),
        close.clone(),
        Arc::clone(&broker),
    ));
    let waiting = Waiting::spawn(tx.clone(), close.clone(), ANSWER_BATCH);
    let mut frames = FrameReader::new(
        read,
        max_frame,
        READ_BUFFER,
        peer,
        slot,
        broker.config.broker.idle_timeout(),
    );
    // Answers produced while serving the frames at hand; handed to the writer together
    // when the reader has to wait for more input (or ANSWER_BATCH of them are ready), so a
    // burst of pipelined requests costs the writer one wake-up and one write.
    let mut answers: Answers = Vec::new();
    let mut served = 0u32;
    loop {
        // A frame already buffered or readable at once is served without arming the
        // idle timer; only a reader about to wait needs it. Closing is noticed there, or
        // every CLOSE_CHECK_EVERY frames under continuous load (the check takes a lock).
        served = served.wrapping_add(1);
        if served.is_multiple_of(CLOSE_CHECK_EVERY) && close.is_cancelled() {
            break;
        }
        if limits.answers.is_over() {
            broker.metrics.limits.refusals.count("maxInFlightBytes");
            if !answers.is_empty() && !hand_over(&tx, &mut answers, &close).await {
                break;
            }
            if !wait_drained(&limits, &close).await {
                break;
            }
        }
        let next = match frames.ready().await {
            Poll::Ready(next) => next,
            Poll::Pending => {
                if !answers.is_empty() && !hand_over(&tx, &mut answers, &close).await {
                    break;
                }
                frames.next(&close).await
            }
        };
        let Some(request) = next else { break };
        if request.is_response() {
            // An answer to a request the broker pushed (GET_CONSUMER_STATUS_FROM_CLIENT);
            // one nobody waits for any more is dropped.
            broker.client_requests.on_response(id, request);
            continue;
        }
        if let Some(out) = run_request(&broker, &conn, &limits, &waiting, request) {
            answers.push(Answer::charged(&broker, &limits.answers, out));
        }
        // Frames already buffered are served without touching the socket, which is what
        // would spend the task's budget: without this a peer pipelining costly requests
        // keeps the worker thread, and the tasks it wakes (this connection's writer
        // among them) never run.
        tokio::task::consume_budget().await;
        if answers.len() >= ANSWER_BATCH && !hand_over(&tx, &mut answers, &close).await {
            break;
        }
    }
    if !answers.is_empty() {
        hand_over(&tx, &mut answers, &close).await;
    }
    close.cancel();
    drop((tx, waiting));
    let _ = writer.await;
    broker.metrics.connection_closed();
    crate::services::membership::connection_closed(&broker, id);
    tracing::debug!(%peer, conn = id, "connection closed");
}

/// Waits until the answers not yet written are within the connection's budget; `false`
/// when the connection closes first (a peer that reads nothing meets the write deadline).
async fn wait_drained(limits: &ConnLimits, close: &CancellationToken) -> bool {
    while limits.answers.is_over() {
        tokio::select! {
            _ = limits.drained.notified() => {}
            _ = close.cancelled() => return false,
        }
    }
    true
}

/// Hands the collected answers to the writer; `false` when the connection is closing
/// (the writer is gone, or stuck until its write deadline closes the connection).
async fn hand_over(
    tx: &mpsc::Sender<Answers>,
    answers: &mut Answers,
    close: &CancellationToken,
) -> bool {
    tokio::select! {
        sent = tx.send(std::mem::take(answers)) => sent.is_ok(),
        _ = close.cancelled() => false,
    }
}

/// The per-connection bounds on work in progress.
struct ConnLimits {
    /// `maxInFlightPerConnection`.
    requests: Arc<InFlightLimit>,
    /// `maxInFlightBytesPerConnection`, for answers not yet written.
    answers: Arc<InFlightLimit>,
    /// Signalled by the writer whenever it has freed answers' bytes.
    drained: Arc<Notify>,
    /// `maxParkedPullsPerConnection`.
    parked: Arc<InFlightLimit>,
    /// `maxInFlightBytesPerConnection`.
    bytes: Arc<InFlightLimit>,
}

/// What keeps a waiting request counted until it completes.
enum Held {
    /// A request waiting for the disk, a slave or a transaction store: it keeps its
    /// in-flight permits.
    Request {
        _permits: (InFlightPermit, InFlightPermit),
        _bytes: (InFlightPermit, InFlightPermit),
    },
    /// A parked pull: parked-pull permits instead of request permits, shown in
    /// `rocketmq_broker_parked_pulls`; it keeps its bytes permits (it holds its frame).
    Parked {
        _pull: ParkedPull,
        _bytes: (InFlightPermit, InFlightPermit),
    },
}

/// Bytes a request holds while in progress: its body and header (decoded header values
/// are spans of the frame's header bytes).
fn request_bytes(request: &RemotingCommand) -> usize {
    request.body.len()
        + request.ext_fields.source().len()
        + request.remark.as_ref().map_or(0, String::len)
}

struct ParkedPull {
    _permits: (InFlightPermit, InFlightPermit),
    gauge: prometheus_client::metrics::gauge::Gauge,
}

impl Drop for ParkedPull {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// SYSTEM_BUSY for a request over a bound (`NettyRemotingAbstract`'s flow-control text).
fn busy(opaque: i32, serialize_type: protocol::SerializeType, what: &str) -> Outbound {
    let request = RemotingCommand {
        opaque,
        serialize_type,
        ..RemotingCommand::default()
    };
    RemotingCommand::error_response(
        &request,
        response::SYSTEM_BUSY,
        format!("[OVERLOAD]system busy, start flow control for a while ({what})"),
    )
    .into()
}

/// Runs one request under the bounds: the answer when it completes on its first poll or
/// is refused, else `None` (the connection's driver of waiting requests now owns it and
/// answers through the writer).
fn run_request(
    broker: &Arc<Broker>,
    conn: &Arc<Conn>,
    limits: &ConnLimits,
    waiting: &Waiting<Answer>,
    request: RemotingCommand,
) -> Option<Outbound> {
    let (opaque, serialize_type) = (request.opaque, request.serialize_type);
    let (code, oneway) = (request.code, request.is_oneway());
    let permits = limits
        .requests
        .try_acquire()
        .zip(broker.in_flight.try_acquire());
    let weight = request_bytes(&request);
    let bytes = limits
        .bytes
        .try_acquire_units(weight)
        .zip(broker.in_flight_bytes.try_acquire_units(weight));
    let (permits, bytes) = match (permits, bytes) {
        (Some(permits), Some(bytes)) => (permits, bytes),
        (permits, _) => {
            let limit = if permits.is_none() {
                "maxInFlight"
            } else {
                "maxInFlightBytes"
            };
            broker.metrics.rejected_busy();
            broker.metrics.limits.refusals.count(limit);
            if crate::dispatch::is_send(code) {
                broker.metrics.send_answered(response::SYSTEM_BUSY);
            }
            return (!oneway).then(|| busy(opaque, serialize_type, limit));
        }
    };
    let (task_broker, task_conn) = (Arc::clone(broker), Arc::clone(conn));
    let mut task =
        Box::pin(async move { dispatch::dispatch(&task_broker, &task_conn, request).await });
    // Most requests (sends under ASYNC_FLUSH, offsets, heartbeats) complete on their
    // first poll: answer those here and spare the hand-off. Only a request that has to
    // wait (disk, slave, long polling) goes to the driver of waiting requests, so it
    // never holds up the requests pipelined behind it.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    // The first poll only registers wakers that the driver re-registers on its own
    // first poll of the request, so a no-op waker loses nothing.
    let held = match task.as_mut().poll(&mut cx) {
        Poll::Ready(out) => return out,
        // A pull is pending only when it parked (PullRequestHoldService).
        Poll::Pending if code == rq::PULL_MESSAGE => {
            drop(permits);
            let parked = limits.parked.try_acquire().zip(broker.parked.try_acquire());
            let Some(parked) = parked else {
                // Dropping the task unparks the pull.
                broker.metrics.limits.parked_refused.inc();
                return Some(busy(opaque, serialize_type, "maxParkedPulls"));
            };
            let gauge = broker.metrics.limits.parked_pulls.clone();
            gauge.inc();
            Held::Parked {
                _pull: ParkedPull {
                    _permits: parked,
                    gauge,
                },
                _bytes: bytes,
            }
        }
        Poll::Pending => Held::Request {
            _permits: permits,
            _bytes: bytes,
        },
    };
    let budget = Arc::clone(&limits.answers);
    let charge_to = Arc::clone(broker);
    // Its permits are held until it completes; a closing connection drops it.
    waiting.push(Box::pin(async move {
        let _held = held;
        let out = task.await?;
        Some(Answer::charged(&charge_to, &budget, out))
    }));
    None
}

/// Bounds of the writer.
struct WriterLimits {
    max_frame: usize,
    /// `writeTimeoutMillis`: longest a write may make no progress.
    deadline: Duration,
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut write: W,
    mut responses: mpsc::Receiver<Answers>,
    mut pushes: mpsc::Receiver<RemotingCommand>,
    limits: WriterLimits,
    drained: Arc<Notify>,
    close: CancellationToken,
    broker: Arc<Broker>,
) {
    let mut codec = RemotingCodec::new(limits.max_frame);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut out = Deadline {
        write: &mut write,
        deadline: limits.deadline,
    };
    // One registration with the token for the writer's life, not one per batch.
    let cancelled = close.cancelled();
    tokio::pin!(cancelled);
    loop {
        let first = tokio::select! {
            out = responses.recv() => match out {
                Some(out) => out,
                None => break,
            },
            Some(cmd) = pushes.recv() => vec![Answer::push(cmd)],
            _ = &mut cancelled => break,
        };
        // Let the reader and handlers queue what they are about to answer, so that a
        // burst of pipelined requests costs one write instead of one per response.
        if responses.is_empty() {
            tokio::task::yield_now().await;
        }
        let mut next = Some(first);
        let mut result = Ok(());
        // Batch everything already queued into as few writes as possible.
        'batch: while let Some(batch) = next.take() {
            for item in batch {
                // The answer's bytes are freed once encoded: what it still holds is
                // in `buf`, bounded by the batching below.
                result = append(&mut codec, &mut buf, &mut out, item.out).await;
                if result.is_err() {
                    break 'batch;
                }
            }
            if buf.len() < 256 * 1024 {
                next = responses
                    .try_recv()
                    .ok()
                    .or_else(|| pushes.try_recv().ok().map(|cmd| vec![Answer::push(cmd)]));
            }
        }
        // The batch's answers are encoded and their bytes freed: a reader waiting for
        // room may go on.
        drained.notify_one();
        if result.is_ok() && !buf.is_empty() {
            result = out.write_all(&buf).await;
            buf.clear();
        }
        // A TLS stream may keep records it could not write without blocking; nothing
        // else would push them out before the next answer.
        if result.is_ok() {
            result = out.flush().await;
        }
        if let Err(e) = result {
            if e.kind() == std::io::ErrorKind::TimedOut {
                broker.metrics.limits.write_timeouts.inc();
                tracing::warn!(deadline = ?limits.deadline, "peer stopped reading, closing connection");
            } else {
                tracing::debug!(error = %e, "write failed");
            }
            close.cancel();
            return;
        }
    }
    let _ = tokio::time::timeout(limits.deadline, write.shutdown()).await;
}

/// A writer whose every write must make progress within `deadline`.
struct Deadline<'a, W> {
    write: &'a mut W,
    deadline: Duration,
}

impl<W: AsyncWrite + Unpin> Deadline<'_, W> {
    /// `write_all`, failing with `TimedOut` when one write call accepts no byte in time
    /// (a zero window, a peer that stopped reading).
    async fn write_all(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let n = tokio::time::timeout(self.deadline, self.write.write(bytes))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[n..];
        }
        Ok(())
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        tokio::time::timeout(self.deadline, self.write.flush())
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
    }
}

async fn append<W: AsyncWrite + Unpin>(
    codec: &mut RemotingCodec,
    buf: &mut BytesMut,
    write: &mut Deadline<'_, W>,
    out: Outbound,
) -> std::io::Result<()> {
    if let Err(e) = out.encode_head(codec, buf) {
        // Too large to send (a handler bug): answer with an error instead.
        tracing::error!(error = %e, code = out.command.code, "cannot encode response");
        let mut fallback = out.command.clone();
        fallback.body = bytes::Bytes::new();
        fallback.code = response::SYSTEM_ERROR;
        fallback.remark = Some(format!("response cannot be encoded: {e}"));
        fallback.ext_fields = Default::default();
        return codec_encode(codec, buf, fallback);
    }
    for part in &out.body_parts {
        if part.len() <= INLINE_PART_MAX {
            buf.extend_from_slice(part);
        } else {
            // Large views of mapped files go straight to the socket.
            if !buf.is_empty() {
                write.write_all(buf).await?;
                buf.clear();
            }
            write.write_all(part).await?;
        }
    }
    Ok(())
}

fn codec_encode(
    codec: &mut RemotingCodec,
    buf: &mut BytesMut,
    cmd: RemotingCommand,
) -> std::io::Result<()> {
    use tokio_util::codec::Encoder;
    codec.encode(cmd, buf).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;
    use protocol::RemotingCodec;
    use security::conn_gate::{ConnGate, GateLimits, GateMetrics};
    use tokio::io::{AsyncWriteExt, BufWriter};
    use tokio_util::codec::{FramedRead, FramedWrite};

    use super::*;

    /// The writer flushes what it wrote: a stream that holds bytes back until asked (a
    /// TLS stream whose records could not all be written, here a `BufWriter`) still
    /// delivers the answer of a lone request.
    #[tokio::test]
    async fn an_answer_is_flushed_through_a_buffering_stream() {
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::test_fixture::broker(dir.path(), "");
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (server_read, server_write) = tokio::io::split(server);
        let gate = ConnGate::new(
            GateLimits::cap(1, Duration::from_secs(60)),
            GateMetrics::default(),
        );
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let slot = gate.admit(peer.ip()).unwrap();
        tokio::spawn(serve_io(
            server_read,
            BufWriter::with_capacity(64 * 1024, server_write),
            peer,
            broker,
            slot,
        ));

        let (client_read, client_write) = tokio::io::split(client);
        let mut requests = FramedWrite::new(client_write, RemotingCodec::new(1 << 20));
        let mut request = RemotingCommand::bare_request(rq::GET_BROKER_RUNTIME_INFO);
        request.opaque = 7;
        futures::SinkExt::send(&mut requests, request)
            .await
            .unwrap();
        requests.get_mut().flush().await.unwrap();
        let mut answers = FramedRead::new(client_read, RemotingCodec::new(1 << 20));
        let answer = tokio::time::timeout(Duration::from_secs(5), answers.next())
            .await
            .expect("the answer stayed in the writer's buffer")
            .unwrap()
            .unwrap();
        assert_eq!((answer.opaque, answer.code), (7, response::SUCCESS));
    }

    /// A peer that sends part of a frame and then nothing is closed at the first-request
    /// deadline (counted), not after `serverChannelMaxIdleTimeSeconds`; one whose first
    /// frame arrived in time is not, however long it then stays quiet.
    #[tokio::test]
    async fn a_connection_without_a_first_frame_is_closed_at_the_deadline() {
        use security::conn_gate::{Refusal, RefusalCounters};
        use tokio::io::AsyncReadExt;
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::test_fixture::broker(dir.path(), "");
        let timeouts = prometheus_client::metrics::counter::Counter::default();
        let gate = ConnGate::new(
            GateLimits::cap(4, Duration::from_millis(300)),
            GateMetrics {
                reasons: RefusalCounters::default()
                    .with(Refusal::FirstRequestTimeout, timeouts.clone()),
                ..GateMetrics::default()
            },
        );
        let peer: SocketAddr = "127.0.0.1:40001".parse().unwrap();
        let serve = |server: tokio::io::DuplexStream| {
            let (r, w) = tokio::io::split(server);
            let slot = gate.admit(peer.ip()).unwrap();
            tokio::spawn(serve_io(r, w, peer, Arc::clone(&broker), slot))
        };

        let (mut silent, server) = tokio::io::duplex(64 * 1024);
        let served = serve(server);
        // Half a frame header: bytes arrived, no frame did.
        silent.write_all(&[0, 0, 0]).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), served)
            .await
            .expect("closed at the first-request deadline")
            .unwrap();
        assert_eq!(timeouts.get(), 1);
        assert_eq!(gate.open(), 0, "its slot is free");
        let mut buf = [0u8; 8];
        assert_eq!(silent.read(&mut buf).await.unwrap(), 0);

        let (client, server) = tokio::io::duplex(64 * 1024);
        let served = serve(server);
        let (client_read, client_write) = tokio::io::split(client);
        let mut requests = FramedWrite::new(client_write, RemotingCodec::new(1 << 20));
        let mut answers = FramedRead::new(client_read, RemotingCodec::new(1 << 20));
        let mut request = RemotingCommand::bare_request(rq::GET_BROKER_RUNTIME_INFO);
        request.opaque = 1;
        futures::SinkExt::send(&mut requests, request)
            .await
            .unwrap();
        answers.next().await.unwrap().unwrap();
        // Time itself: quiet for twice the deadline, then served again on the same
        // connection.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let mut request = RemotingCommand::bare_request(rq::GET_BROKER_RUNTIME_INFO);
        request.opaque = 2;
        futures::SinkExt::send(&mut requests, request)
            .await
            .unwrap();
        let answer = answers.next().await.unwrap().unwrap();
        assert_eq!(answer.opaque, 2);
        assert!(!served.is_finished());
        assert_eq!(timeouts.get(), 1);
    }
}
