//! One TCP connection to a nameserver or broker, shared by many concurrent requests.
//!
//! Requests are matched to responses by opaque (`NettyRemotingAbstract.responseTable`):
//! a writer task drains a queue of outgoing frames (coalescing whatever is ready, after
//! one scheduler turn for a burst of senders to queue, into one write), a reader task
//! completes the waiting request of each response. Requests the peer initiates (e.g.
//! the broker's CHECK_TRANSACTION_STATE) go to an optional [`ServerRequestHandler`],
//! whose answer is written back on the same connection.
//!
//! Incoming frames are read under the protocol's length cap: a peer announcing a larger
//! frame loses the connection, and every request waiting on it fails with
//! [`ClientError::Closed`] at once rather than at its timeout. So does a request that
//! cannot be encoded (larger than the cap): the writer stops, the connection closes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use protocol::{RemotingCodec, RemotingCommand};
use security::sign::Credentials;
use security::tls::{MaybeTls, TlsClient};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::error::{ClientError, Peer};

/// Largest frame accepted from a peer (the protocol's own cap).
const MAX_FRAME: usize = protocol::frame::DEFAULT_MAX_FRAME;
/// Outgoing frames queued before senders wait.
const WRITE_QUEUE: usize = 4096;

/// Answers a request the peer sent us; `Some` is written back.
pub type ServerRequestHandler =
    Arc<dyn Fn(RemotingCommand) -> Option<RemotingCommand> + Send + Sync>;

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>>;

/// Frames to write together, and who to tell once they have been flushed to the
/// socket.
struct Outgoing {
    frames: Frames,
    written: Option<oneshot::Sender<()>>,
}

enum Frames {
    One(RemotingCommand),
    /// Requests pipelined by one caller, written back to back in one flush.
    Batch(Vec<RemotingCommand>),
}

impl Outgoing {
    fn one(cmd: RemotingCommand) -> Self {
        Self {
            frames: Frames::One(cmd),
            written: None,
        }
    }
}

/// Set once either task has stopped: the connection is of no further use.
type Closed = Arc<watch::Sender<bool>>;

fn mark_closed(closed: &Closed) {
    closed.send_replace(true);
}

pub struct Connection {
    peer: Peer,
    outgoing: mpsc::Sender<Outgoing>,
    pending: Pending,
    next_opaque: AtomicI32,
    closed: Closed,
    tasks: [JoinHandle<()>; 2],
    /// Signs every request (ACL) when set.
    credentials: Option<Arc<Credentials>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.peer)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Connection {
    pub async fn connect(
        peer: Peer,
        connect_timeout: Duration,
        handler: Option<ServerRequestHandler>,
    ) -> Result<Self, ClientError> {
        Self::connect_tls(peer, connect_timeout, handler, None).await
    }

    /// [`Self::connect`], with TLS when `tls` is given.
    pub async fn connect_tls(
        peer: Peer,
        connect_timeout: Duration,
        handler: Option<ServerRequestHandler>,
        tls: Option<&TlsClient>,
    ) -> Result<Self, ClientError> {
        let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(peer.addr()))
            .await
            .map_err(|_| ClientError::Connect {
                peer: peer.clone(),
                error: std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connect timed out after {} ms", connect_timeout.as_millis()),
                ),
            })?
            .map_err(|error| ClientError::Connect {
                peer: peer.clone(),
                error,
            })?;
        Self::over(peer, stream, connect_timeout, handler, tls).await
    }

    /// A connection over `tcp`, already connected (from a chosen source address, say),
    /// with TLS when `tls` is given; the handshake is bounded by `handshake_timeout`.
    pub async fn over(
        peer: Peer,
        tcp: TcpStream,
        handshake_timeout: Duration,
        handler: Option<ServerRequestHandler>,
        tls: Option<&TlsClient>,
    ) -> Result<Self, ClientError> {
        let _ = tcp.set_nodelay(true);
        let stream = tokio::time::timeout(
            handshake_timeout,
            security::tls::connect(tls, tcp, peer.addr()),
        )
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out"))
        .and_then(|r| r)
        .map_err(|error| ClientError::Connect {
            peer: peer.clone(),
            error,
        })?;
        match stream {
            MaybeTls::Plain(tcp) => {
                let (read_half, write_half) = tcp.into_split();
                Ok(Self::start(peer, read_half, write_half, handler))
            }
            tls => {
                let (read_half, write_half) = tokio::io::split(tls);
                Ok(Self::start(peer, read_half, write_half, handler))
            }
        }
    }

    fn start<R, W>(
        peer: Peer,
        read_half: R,
        write_half: W,
        handler: Option<ServerRequestHandler>,
    ) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (outgoing, queue) = mpsc::channel(WRITE_QUEUE);
        let pending: Pending = Arc::default();
        let closed: Closed = Arc::new(watch::channel(false).0);
        let writer = tokio::spawn(write_loop(
            FramedWrite::new(write_half, RemotingCodec::new(MAX_FRAME)),
            queue,
            pending.clone(),
            closed.clone(),
        ));
        let reader = tokio::spawn(read_loop(
            FramedRead::new(read_half, RemotingCodec::new(MAX_FRAME)),
            pending.clone(),
            closed.clone(),
            outgoing.clone(),
            handler,
        ));
        Self {
            peer,
            outgoing,
            pending,
            next_opaque: AtomicI32::new(1),
            closed,
            tasks: [writer, reader],
            credentials: None,
        }
    }

    /// Signs every request sent on this connection with `credentials` (RocketMQ ACL 1.0).
    pub fn with_credentials(mut self, credentials: Option<Arc<Credentials>>) -> Self {
        self.credentials = credentials;
        self
    }

    fn sign(&self, cmd: &mut RemotingCommand) {
        if let Some(c) = &self.credentials {
            security::sign::sign_request(cmd, c);
        }
    }

    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Waits up to `within` for the connection to close; true when it has.
    pub async fn wait_closed(&self, within: Duration) -> bool {
        let mut closed = self.closed.subscribe();
        tokio::time::timeout(within, closed.wait_for(|c| *c))
            .await
            .is_ok()
    }

    /// Requests waiting for their answer.
    pub fn pending(&self) -> usize {
        self.pending.lock().len()
    }

    /// Registers the waiter of `opaque`; `None` when the connection has closed already
    /// (the reader fails the waiters it finds when it stops, and would not find one
    /// added after that).
    fn wait_for(&self, opaque: i32) -> Option<oneshot::Receiver<RemotingCommand>> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(opaque, tx);
        if self.is_closed() {
            self.pending.lock().remove(&opaque);
            return None;
        }
        Some(rx)
    }

    fn assign_opaque(&self, cmd: &mut RemotingCommand) -> i32 {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        cmd.opaque = opaque;
        opaque
    }

    /// Sends `cmd` and waits for the response with its opaque.
    pub async fn request(
        &self,
        mut cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let code = cmd.code;
        self.sign(&mut cmd);
        let opaque = self.assign_opaque(&mut cmd);
        let rx = self.wait_for(opaque).ok_or_else(|| self.closed_error())?;
        let exchange = async {
            self.outgoing
                .send(Outgoing::one(cmd))
                .await
                .map_err(|_| self.closed_error())?;
            rx.await.map_err(|_| self.closed_error())
        };
        self.answered(opaque, code, timeout, exchange).await
    }

    /// Sends all of `cmds` back to back in one write, then waits for every answer, each
    /// within `timeout`; the answers come in the order of `cmds`, whatever order they
    /// arrived in.
    pub async fn request_all(
        &self,
        cmds: Vec<RemotingCommand>,
        timeout: Duration,
    ) -> Result<Vec<RemotingCommand>, ClientError> {
        let mut waiting = Vec::with_capacity(cmds.len());
        let mut batch = Vec::with_capacity(cmds.len());
        for mut cmd in cmds {
            self.sign(&mut cmd);
            let opaque = self.assign_opaque(&mut cmd);
            let rx = self.wait_for(opaque).ok_or_else(|| self.closed_error())?;
            waiting.push((opaque, cmd.code, rx));
            batch.push(cmd);
        }
        let queued = self
            .outgoing
            .send(Outgoing {
                frames: Frames::Batch(batch),
                written: None,
            })
            .await;
        let mut answers = Vec::with_capacity(waiting.len());
        let mut failed = queued.map_err(|_| self.closed_error()).err();
        for (opaque, code, rx) in waiting {
            if failed.is_some() {
                self.pending.lock().remove(&opaque);
                continue;
            }
            let answer = async { rx.await.map_err(|_| self.closed_error()) };
            match self.answered(opaque, code, timeout, answer).await {
                Ok(answer) => answers.push(answer),
                Err(e) => failed = Some(e),
            }
        }
        failed.map_or(Ok(answers), Err)
    }

    /// The answer `exchange` waits for, within `timeout`; the waiter of `opaque` is
    /// forgotten when there is none, so that a late answer is dropped.
    async fn answered(
        &self,
        opaque: i32,
        code: i32,
        timeout: Duration,
        exchange: impl Future<Output = Result<RemotingCommand, ClientError>>,
    ) -> Result<RemotingCommand, ClientError> {
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => {
                if result.is_err() {
                    self.pending.lock().remove(&opaque);
                }
                result
            }
            Err(_) => {
                self.pending.lock().remove(&opaque);
                Err(ClientError::Timeout {
                    peer: self.peer.clone(),
                    request: code,
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                })
            }
        }
    }

    /// Sends `cmd` flagged oneway and returns once it has been written to the socket
    /// (as Java's `invokeOneway` does); the peer sends no response.
    pub async fn oneway(&self, mut cmd: RemotingCommand) -> Result<(), ClientError> {
        cmd.mark_oneway();
        self.sign(&mut cmd);
        self.assign_opaque(&mut cmd);
        let (tx, rx) = oneshot::channel();
        self.outgoing
            .send(Outgoing {
                frames: Frames::One(cmd),
                written: Some(tx),
            })
            .await
            .map_err(|_| self.closed_error())?;
        rx.await.map_err(|_| self.closed_error())
    }

    fn closed_error(&self) -> ClientError {
        ClientError::Closed {
            peer: self.peer.clone(),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut sink: FramedWrite<W, RemotingCodec>,
    mut queue: mpsc::Receiver<Outgoing>,
    pending: Pending,
    closed: Closed,
) {
    let mut acks = Vec::new();
    'write: while let Some(first) = queue.recv().await {
        // Senders woken by the same burst of answers are about to queue their next
        // requests: let them, so that the burst costs one write (and, over TLS, one
        // record) rather than one per request.
        if queue.is_empty() {
            tokio::task::yield_now().await;
        }
        let mut next = Some(first);
        // Coalesce whatever else is already queued into the same write.
        while let Some(out) = next.take().or_else(|| queue.try_recv().ok()) {
            acks.extend(out.written);
            let fed = match out.frames {
                Frames::One(cmd) => sink.feed(cmd).await,
                Frames::Batch(cmds) => {
                    let mut fed = Ok(());
                    for cmd in cmds {
                        fed = sink.feed(cmd).await;
                        if fed.is_err() {
                            break;
                        }
                    }
                    fed
                }
            };
            if let Err(e) = fed {
                tracing::debug!(error = %e, "cannot write a request, closing the connection");
                break 'write;
            }
        }
        if SinkExt::<RemotingCommand>::flush(&mut sink).await.is_err() {
            break;
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
    mark_closed(&closed);
    // Nothing more gets written: the requests still waiting would only time out.
    pending.lock().clear();
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut stream: FramedRead<R, RemotingCodec>,
    pending: Pending,
    closed: Closed,
    outgoing: mpsc::Sender<Outgoing>,
    handler: Option<ServerRequestHandler>,
) {
    while let Some(Ok(cmd)) = stream.next().await {
        if cmd.is_response() {
            // An answer nobody waits for (any more) is dropped.
            if let Some(waiter) = pending.lock().remove(&cmd.opaque) {
                let _ = waiter.send(cmd);
            }
        } else if let Some(answer) = handler.as_ref().and_then(|h| h(cmd))
            && outgoing.send(Outgoing::one(answer)).await.is_err()
        {
            break;
        }
    }
    mark_closed(&closed);
    // Dropping the senders fails every request still waiting with `Closed`.
    pending.lock().clear();
}

#[cfg(test)]
mod tests;
