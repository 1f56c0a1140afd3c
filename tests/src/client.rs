//! The suites' remoting client: the shared [`remoting::client::Connection`] (one TCP
//! connection, requests matched to responses by opaque, so several may be in flight at
//! once) behind the small `io::Result` surface the suites use, with a 10 s answer
//! timeout.

use std::io;
use std::time::Duration;

use protocol::RemotingCommand;
use remoting::client::{ClientError, Connection, Peer};
use tokio::net::TcpStream;

/// How long a request waits for its answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Client {
    conn: Connection,
}

fn io_error(e: ClientError) -> io::Error {
    match e {
        ClientError::Connect { error, .. } => error,
        ClientError::Closed { .. } => io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "connection closed by server",
        ),
        ClientError::Timeout { .. } => {
            io::Error::new(io::ErrorKind::TimedOut, "no response in time")
        }
        other => io::Error::other(other),
    }
}

impl Client {
    pub async fn connect(port: u16) -> io::Result<Self> {
        Self::connect_addr(&format!("127.0.0.1:{port}")).await
    }

    /// Connects to `host:port`.
    pub async fn connect_addr(addr: &str) -> io::Result<Self> {
        Self::over(addr, TcpStream::connect(addr).await?).await
    }

    /// Connects to 127.0.0.1:`port` from `source` (another loopback address, to stand
    /// for a second host).
    pub async fn connect_from(source: std::net::IpAddr, port: u16) -> io::Result<Self> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind((source, 0).into())?;
        let stream = socket.connect(([127, 0, 0, 1], port).into()).await?;
        Self::over(&format!("127.0.0.1:{port}"), stream).await
    }

    async fn over(addr: &str, stream: TcpStream) -> io::Result<Self> {
        let peer = Peer::Broker(addr.to_owned());
        let conn = Connection::over(peer, stream, ANSWER_TIMEOUT, None, None)
            .await
            .map_err(io_error)?;
        Ok(Self { conn })
    }

    /// Sends `request` (its opaque is assigned here) and waits for the response.
    pub async fn request(&self, request: RemotingCommand) -> io::Result<RemotingCommand> {
        self.conn
            .request(request, ANSWER_TIMEOUT)
            .await
            .map_err(io_error)
    }

    /// Writes all requests back to back in one flush, then collects every response,
    /// returned in request order whatever order they arrived in.
    pub async fn pipeline(
        &self,
        requests: Vec<RemotingCommand>,
    ) -> io::Result<Vec<RemotingCommand>> {
        self.conn
            .request_all(requests, ANSWER_TIMEOUT)
            .await
            .map_err(io_error)
    }

    /// Sends a oneway request: no response is expected.
    pub async fn oneway(&self, request: RemotingCommand) -> io::Result<()> {
        self.conn.oneway(request).await.map_err(io_error)
    }

    /// True once the server has closed the connection; waits up to `within` for it.
    pub async fn wait_closed(&self, within: Duration) -> bool {
        self.conn.wait_closed(within).await
    }

    /// Number of requests still waiting for their response (0 once all were answered).
    pub fn pending_count(&self) -> usize {
        self.conn.pending()
    }

    /// Closes the connection (both directions).
    pub async fn close(self) {
        drop(self.conn);
    }
}
