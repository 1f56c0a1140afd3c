//! A small async remoting client: one TCP connection, requests matched to responses by
//! opaque, so several requests may be in flight (pipelined) at once.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use protocol::{RemotingCodec, RemotingCommand};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, oneshot, watch};
use tokio_util::codec::Framed;

type Pending = Arc<std::sync::Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>>;

pub struct Client {
    sink: Mutex<SplitSink<Framed<TcpStream, RemotingCodec>, RemotingCommand>>,
    pending: Pending,
    next_opaque: AtomicI32,
    closed: watch::Receiver<bool>,
    timeout: Duration,
}

fn closed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "connection closed by server",
    )
}

impl Client {
    pub async fn connect(port: u16) -> io::Result<Self> {
        Self::connect_addr(&format!("127.0.0.1:{port}")).await
    }

    /// Connects to `host:port`.
    pub async fn connect_addr(addr: &str) -> io::Result<Self> {
        Self::over(TcpStream::connect(addr).await?)
    }

    /// Connects to 127.0.0.1:`port` from the loopback address `from` (127.0.0.2 for an
    /// attacker, so per-source limits tell it from the victim).
    pub async fn connect_from(port: u16, from: std::net::IpAddr) -> io::Result<Self> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::new(from, 0))?;
        Self::over(
            socket
                .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
                .await?,
        )
    }

    fn over(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        let (sink, stream) = Framed::new(stream, RemotingCodec::default()).split();
        let pending: Pending = Arc::default();
        let (closed_tx, closed) = watch::channel(false);
        tokio::spawn(read_loop(stream, Arc::clone(&pending), closed_tx));
        Ok(Self {
            sink: Mutex::new(sink),
            pending,
            next_opaque: AtomicI32::new(1),
            closed,
            timeout: Duration::from_secs(10),
        })
    }

    /// Sends `request` (its opaque is assigned here) and waits for the response.
    pub async fn request(&self, request: RemotingCommand) -> io::Result<RemotingCommand> {
        let mut responses = self.pipeline(vec![request]).await?;
        Ok(responses.remove(0))
    }

    /// Writes all requests back to back in one flush, then collects every response,
    /// returned in request order whatever order they arrived in.
    pub async fn pipeline(
        &self,
        requests: Vec<RemotingCommand>,
    ) -> io::Result<Vec<RemotingCommand>> {
        let mut waiters = Vec::with_capacity(requests.len());
        {
            let mut sink = self.sink.lock().await;
            for mut request in requests {
                request.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
                let (tx, rx) = oneshot::channel();
                self.pending
                    .lock()
                    .expect("pending map")
                    .insert(request.opaque, tx);
                waiters.push(rx);
                sink.feed(request).await.map_err(io::Error::other)?;
            }
            sink.flush().await.map_err(io::Error::other)?;
        }
        // The reader drops every waiter when the connection closes, then sets `closed`;
        // a waiter added after that drop would wait for ever (a peer closed at accept
        // read as a timeout instead of a refusal).
        if *self.closed.borrow() {
            return Err(closed_error());
        }
        let mut out = Vec::with_capacity(waiters.len());
        for rx in waiters {
            match tokio::time::timeout(self.timeout, rx).await {
                Ok(Ok(response)) => out.push(response),
                Ok(Err(_)) => return Err(closed_error()),
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no response in time",
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Sends a oneway request: no response is expected.
    pub async fn oneway(&self, mut request: RemotingCommand) -> io::Result<()> {
        request.mark_oneway();
        request.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        self.sink
            .lock()
            .await
            .send(request)
            .await
            .map_err(io::Error::other)
    }

    /// True once the server has closed the connection; waits up to `within` for it.
    pub async fn wait_closed(&self, within: Duration) -> bool {
        let mut closed = self.closed.clone();
        tokio::time::timeout(within, closed.wait_for(|c| *c))
            .await
            .is_ok()
    }

    /// Number of responses that arrived for no pending request (should stay 0).
    pub fn pending_count(&self) -> usize {
        self.pending.lock().expect("pending map").len()
    }

    /// Closes the connection (both directions).
    pub async fn close(self) {
        let mut sink = self.sink.into_inner();
        let _ = sink.close().await;
    }
}

async fn read_loop(
    mut stream: SplitStream<Framed<TcpStream, RemotingCodec>>,
    pending: Pending,
    closed: watch::Sender<bool>,
) {
    while let Some(Ok(frame)) = stream.next().await {
        if !frame.is_response() {
            continue;
        }
        let waiter = pending.lock().expect("pending map").remove(&frame.opaque);
        if let Some(tx) = waiter {
            let _ = tx.send(frame);
        }
    }
    pending.lock().expect("pending map").clear();
    let _ = closed.send(true);
}
