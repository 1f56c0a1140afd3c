//! One TCP connection to a nameserver or broker, shared by many concurrent requests.
//!
//! Requests are matched to responses by opaque (`NettyRemotingAbstract.responseTable`):
//! a writer task drains a queue of outgoing frames (coalescing whatever is ready, after
//! one scheduler turn for a burst of senders to queue, into one write), a reader task
//! completes the waiting request of each response. Requests the peer initiates (e.g.
//! the broker's CHECK_TRANSACTION_STATE) go to an optional [`ServerRequestHandler`],
//! whose answer is written back on the same connection.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use protocol::{RemotingCodec, RemotingCommand};
use security::sign::Credentials;
use security::tls::{MaybeTls, TlsClient};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
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

/// A frame to write, and who to tell once it has been flushed to the socket.
struct Outgoing {
    cmd: RemotingCommand,
    written: Option<oneshot::Sender<()>>,
}

pub struct Connection {
    peer: Peer,
    outgoing: mpsc::Sender<Outgoing>,
    pending: Pending,
    next_opaque: AtomicI32,
    closed: Arc<AtomicBool>,
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
        let _ = stream.set_nodelay(true);
        let stream = tokio::time::timeout(
            connect_timeout,
            security::tls::connect(tls, stream, peer.addr()),
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
        let closed = Arc::new(AtomicBool::new(false));
        let writer = tokio::spawn(write_loop(
            FramedWrite::new(write_half, RemotingCodec::new(MAX_FRAME)),
            queue,
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
        self.closed.load(Ordering::Acquire)
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
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(opaque, tx);
        let exchange = async {
            self.outgoing
                .send(Outgoing { cmd, written: None })
                .await
                .map_err(|_| self.closed_error())?;
            rx.await.map_err(|_| self.closed_error())
        };
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
                cmd,
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
    closed: Arc<AtomicBool>,
) {
    let mut acks = Vec::new();
    while let Some(first) = queue.recv().await {
        // Senders woken by the same burst of answers are about to queue their next
        // requests: let them, so that the burst costs one write (and, over TLS, one
        // record) rather than one per request.
        if queue.is_empty() {
            tokio::task::yield_now().await;
        }
        acks.extend(first.written);
        if sink.feed(first.cmd).await.is_err() {
            break;
        }
        // Coalesce whatever else is already queued into the same write.
        let mut failed = false;
        while let Ok(next) = queue.try_recv() {
            acks.extend(next.written);
            if sink.feed(next.cmd).await.is_err() {
                failed = true;
                break;
            }
        }
        if failed || SinkExt::<RemotingCommand>::flush(&mut sink).await.is_err() {
            break;
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
    closed.store(true, Ordering::Release);
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut stream: FramedRead<R, RemotingCodec>,
    pending: Pending,
    closed: Arc<AtomicBool>,
    outgoing: mpsc::Sender<Outgoing>,
    handler: Option<ServerRequestHandler>,
) {
    while let Some(Ok(cmd)) = stream.next().await {
        if cmd.is_response() {
            if let Some(waiter) = pending.lock().remove(&cmd.opaque) {
                let _ = waiter.send(cmd);
            }
        } else if let Some(answer) = handler.as_ref().and_then(|h| h(cmd))
            && outgoing
                .send(Outgoing {
                    cmd: answer,
                    written: None,
                })
                .await
                .is_err()
        {
            break;
        }
    }
    closed.store(true, Ordering::Release);
    // Dropping the senders fails every request still waiting with `Closed`.
    pending.lock().clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::code::response;
    use tokio::net::TcpListener;

    /// A peer that answers every request with its code as remark, in reverse order of
    /// arrival per batch, so matching by opaque is what makes the answers land right.
    async fn echo_server() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let mut framed = tokio_util::codec::Framed::new(socket, RemotingCodec::default());
            let mut held = Vec::new();
            while let Some(Ok(req)) = framed.next().await {
                held.push(req);
                if held.len() == 2 {
                    for req in held.drain(..).rev() {
                        let answer = RemotingCommand::response_to(&req, response::SUCCESS)
                            .with_remark(req.code.to_string());
                        framed.send(answer).await.unwrap();
                    }
                }
            }
        });
        addr
    }

    #[tokio::test]
    async fn responses_are_matched_by_opaque_and_close_fails_waiters() {
        let addr = echo_server().await;
        let conn =
            Connection::connect(Peer::Broker(addr.to_string()), Duration::from_secs(2), None)
                .await
                .unwrap();
        let t = Duration::from_secs(5);
        let (a, b) = tokio::join!(
            conn.request(RemotingCommand::bare_request(7), t),
            conn.request(RemotingCommand::bare_request(8), t)
        );
        assert_eq!(a.unwrap().remark.as_deref(), Some("7"));
        assert_eq!(b.unwrap().remark.as_deref(), Some("8"));
        // A single request is held by the server forever: it times out, naming the peer.
        let err = conn
            .request(RemotingCommand::bare_request(9), Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
        assert!(err.to_string().contains(&addr.to_string()));
    }

    #[tokio::test]
    async fn unreachable_peer_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = Connection::connect(
            Peer::NameServer(addr.to_string()),
            Duration::from_secs(2),
            None,
        )
        .await
        .unwrap_err();
        assert!(err.is_unreachable());
        assert!(err.to_string().starts_with("cannot connect to nameserver"));
    }

    /// Counts the writes reaching the socket.
    struct CountingWrite<W> {
        inner: W,
        writes: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl<W: AsyncWrite + Unpin> AsyncWrite for CountingWrite<W> {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.writes.fetch_add(1, Ordering::Relaxed);
            std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
        }

        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    /// Senders woken together by one batch of answers send their next requests in one
    /// write. On a worker, the writer woken by the first of them would otherwise run
    /// next (tokio's LIFO slot) and write that request alone, then the next, and so on:
    /// one syscall and, over TLS, one record per request.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_burst_of_senders_shares_one_write() {
        const SENDERS: usize = 16;
        let (client, server) = tokio::io::duplex(1 << 20);
        let (client_read, client_write) = tokio::io::split(client);
        let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let conn = Arc::new(Connection::start(
            Peer::Broker("test".into()),
            client_read,
            CountingWrite {
                inner: client_write,
                writes: writes.clone(),
            },
            None,
        ));
        // Answers each round of SENDERS requests in one write, so that the client's
        // reader completes them all at once.
        tokio::spawn(async move {
            let mut framed = tokio_util::codec::Framed::new(server, RemotingCodec::default());
            let mut held = Vec::new();
            while let Some(Ok(req)) = framed.next().await {
                held.push(req);
                if held.len() == SENDERS {
                    for req in held.drain(..) {
                        framed
                            .feed(RemotingCommand::response_to(&req, response::SUCCESS))
                            .await
                            .unwrap();
                    }
                    SinkExt::<RemotingCommand>::flush(&mut framed)
                        .await
                        .unwrap();
                }
            }
        });
        let round_two = Arc::new(tokio::sync::Barrier::new(SENDERS + 1));
        let before_round_two = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..SENDERS {
            let (conn, barrier) = (conn.clone(), round_two.clone());
            let (writes, before) = (writes.clone(), before_round_two.clone());
            tasks.push(tokio::spawn(async move {
                let t = Duration::from_secs(5);
                conn.request(RemotingCommand::bare_request(10), t)
                    .await
                    .unwrap();
                // The first answer seen marks where the second round's writes start.
                let _ = before.compare_exchange(
                    0,
                    writes.load(Ordering::Relaxed),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                conn.request(RemotingCommand::bare_request(10), t)
                    .await
                    .unwrap();
                barrier.wait().await;
            }));
        }
        round_two.wait().await;
        let second_round =
            writes.load(Ordering::Relaxed) - before_round_two.load(Ordering::Relaxed);
        assert!(
            second_round <= 3,
            "{SENDERS} senders woken together took {second_round} writes"
        );
        for t in tasks {
            t.await.unwrap();
        }
    }
}
