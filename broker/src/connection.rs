//! One client connection.
//!
//! The reader decodes frames and runs each request; one that cannot finish at once gets
//! its own task, so a parked long-poll pull or a send waiting for the disk does not hold
//! up the requests pipelined behind it;
//! answers go out in completion order, matched by opaque. Work is bounded: a request
//! that would exceed `maxInFlightPerConnection` or the broker-wide `maxInFlightTotal`
//! is answered at once with SYSTEM_BUSY instead of queueing. The writer task owns the
//! socket's write half and is also how the broker pushes requests to the client
//! (NOTIFY_CONSUMER_IDS_CHANGED). A frame that does not decode closes this connection
//! only.

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;

use bytes::BytesMut;
use futures::StreamExt;
use protocol::code::response;
use protocol::{RemotingCodec, RemotingCommand};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use crate::clients::{Channel, ConnId};
use crate::dispatch;
use crate::in_flight::InFlightLimit;
use crate::outbound::Outbound;
use crate::state::Broker;

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

/// Answers handed to the writer in one channel message.
type Answers = Vec<Outbound>;

/// The connection a request arrived on, as handlers see it.
#[derive(Debug, Clone)]
pub struct Conn {
    pub id: ConnId,
    pub peer: SocketAddr,
    pub channel: Channel,
}

pub async fn serve(stream: TcpStream, peer: SocketAddr, broker: Arc<Broker>) {
    let _ = stream.set_nodelay(true);
    let id = broker.next_conn_id();
    let (read, write) = stream.into_split();
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
    let writer = tokio::spawn(write_loop(write, rx, push_rx, max_frame, close.clone()));

    let per_conn = InFlightLimit::new(broker.config.broker.max_in_flight_per_connection as usize);
    let idle = broker.config.broker.idle_timeout();
    let mut frames = FramedRead::with_capacity(read, RemotingCodec::new(max_frame), READ_BUFFER);
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
        let next = match futures::poll!(frames.next()) {
            Poll::Ready(next) => Ok(next),
            Poll::Pending => {
                if !answers.is_empty() && tx.send(std::mem::take(&mut answers)).await.is_err() {
                    break;
                }
                tokio::select! {
                    _ = close.cancelled() => break,
                    next = tokio::time::timeout(idle, frames.next()) => next,
                }
            }
        };
        let request = match next {
            Err(_) => {
                tracing::info!(%peer, "closing idle connection");
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                tracing::warn!(%peer, error = %e, "undecodable frame, closing connection");
                break;
            }
            Ok(Some(Ok(cmd))) => cmd,
        };
        if request.is_response() {
            // An answer to a request the broker pushed (GET_CONSUMER_STATUS_FROM_CLIENT);
            // one nobody waits for any more is dropped.
            broker.client_requests.on_response(id, request);
            continue;
        }
        let permits = per_conn.try_acquire().zip(broker.in_flight.try_acquire());
        let Some(permits) = permits else {
            broker.metrics.rejected_busy();
            if !request.is_oneway() {
                let busy = RemotingCommand::error_response(
                    &request,
                    response::SYSTEM_BUSY,
                    "[OVERLOAD]system busy, start flow control for a while",
                );
                answers.push(busy.into());
            }
            continue;
        };
        let (task_broker, task_conn) = (Arc::clone(&broker), Arc::clone(&conn));
        let mut task = Box::pin(async move {
            let _permits = permits;
            dispatch::dispatch(&task_broker, &task_conn, request).await
        });
        // Most requests (sends under ASYNC_FLUSH, offsets, heartbeats) complete on their
        // first poll: answer those here and spare a task spawn and a cross-thread wakeup.
        // Only a request that has to wait (disk, slave, long polling) gets its own task,
        // so it never holds up the requests pipelined behind it.
        match futures::poll!(task.as_mut()) {
            Poll::Ready(Some(out)) => answers.push(out),
            Poll::Ready(None) => {}
            Poll::Pending => {
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Some(out) = task.await {
                        let _ = tx.send(vec![out]).await;
                    }
                });
            }
        }
        if answers.len() >= ANSWER_BATCH && tx.send(std::mem::take(&mut answers)).await.is_err() {
            break;
        }
    }
    if !answers.is_empty() {
        let _ = tx.send(answers).await;
    }
    close.cancel();
    drop(tx);
    let _ = writer.await;
    broker.metrics.connection_closed();
    let memberships = broker.clients.consumer_memberships(id);
    let left = broker.clients.remove_channel(id);
    release_locks(&broker, memberships);
    for group in left {
        crate::handlers::client::notify_consumer_ids_changed(&broker, &group);
    }
    tracing::debug!(%peer, conn = id, "connection closed");
}

async fn write_loop(
    mut write: OwnedWriteHalf,
    mut responses: mpsc::Receiver<Answers>,
    mut pushes: mpsc::Receiver<RemotingCommand>,
    max_frame: usize,
    close: CancellationToken,
) {
    let mut codec = RemotingCodec::new(max_frame);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        let first = tokio::select! {
            out = responses.recv() => match out {
                Some(out) => out,
                None => break,
            },
            Some(cmd) = pushes.recv() => vec![Outbound::from(cmd)],
            _ = close.cancelled() => break,
        };
        // Let the reader and handlers queue what they are about to answer, so that a
        // burst of pipelined requests costs one write instead of one per response.
        if responses.is_empty() {
            tokio::task::yield_now().await;
        }
        let mut next = Some(first);
        // Batch everything already queued into as few writes as possible.
        while let Some(batch) = next.take() {
            for out in batch {
                if let Err(e) = append(&mut codec, &mut buf, &mut write, out).await {
                    tracing::debug!(error = %e, "write failed");
                    close.cancel();
                    return;
                }
            }
            if buf.len() < 256 * 1024 {
                next = responses
                    .try_recv()
                    .ok()
                    .or_else(|| pushes.try_recv().ok().map(|cmd| vec![Outbound::from(cmd)]));
            }
        }
        if !buf.is_empty() {
            if let Err(e) = write.write_all(&buf).await {
                tracing::debug!(error = %e, "write failed");
                close.cancel();
                return;
            }
            buf.clear();
        }
    }
    let _ = write.shutdown().await;
}

async fn append(
    codec: &mut RemotingCodec,
    buf: &mut BytesMut,
    write: &mut OwnedWriteHalf,
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

/// Frees the orderly-consumption queue locks of consumers that are gone from their group.
pub(crate) fn release_locks(broker: &Broker, memberships: Vec<(String, String)>) {
    for (group, client_id) in memberships {
        if broker.clients.is_consumer_member(&group, &client_id) {
            continue;
        }
        let released = broker.locks.release_client(&group, &client_id);
        if released > 0 {
            tracing::info!(
                group,
                client = client_id,
                released,
                "queue locks of a departed consumer released"
            );
        }
    }
}
