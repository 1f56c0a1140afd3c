use super::*;
use protocol::code::response;
use tokio::net::{TcpListener, TcpStream};

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
    let conn = Connection::connect(Peer::Broker(addr.to_string()), Duration::from_secs(2), None)
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
    let second_round = writes.load(Ordering::Relaxed) - before_round_two.load(Ordering::Relaxed);
    assert!(
        second_round <= 3,
        "{SENDERS} senders woken together took {second_round} writes"
    );
    for t in tasks {
        t.await.unwrap();
    }
}

/// A listener whose connections are served by `serve`, one task each.
async fn peer<F, Fut>(serve: F) -> std::net::SocketAddr
where
    F: Fn(tokio_util::codec::Framed<TcpStream, RemotingCodec>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let framed = tokio_util::codec::Framed::new(socket, RemotingCodec::default());
            tokio::spawn(serve(framed));
        }
    });
    addr
}

async fn connect(addr: std::net::SocketAddr) -> Connection {
    Connection::connect(Peer::Broker(addr.to_string()), Duration::from_secs(5), None)
        .await
        .unwrap()
}

/// An answer whose opaque no request waits for (a stray, or one that came after its
/// request timed out) is dropped; the request it does not match still gets its own.
#[tokio::test]
async fn an_answer_nobody_waits_for_is_dropped() {
    let addr = peer(|mut framed| async move {
        while let Some(Ok(req)) = framed.next().await {
            let mut stray = RemotingCommand::response_to(&req, response::SYSTEM_ERROR);
            stray.opaque = req.opaque.wrapping_add(1000);
            framed.send(stray).await.unwrap();
            if req.code == 2 {
                // Answered late: after the request's timeout.
                continue;
            }
            let answer = RemotingCommand::response_to(&req, response::SUCCESS);
            framed.send(answer).await.unwrap();
        }
    })
    .await;
    let conn = connect(addr).await;
    let t = Duration::from_secs(5);
    let answer = conn
        .request(RemotingCommand::bare_request(1), t)
        .await
        .unwrap();
    assert_eq!(answer.code, response::SUCCESS);
    let err = conn
        .request(RemotingCommand::bare_request(2), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Timeout { request: 2, .. }),
        "{err}"
    );
    assert_eq!(conn.pending(), 0, "the timed-out request's waiter is gone");
    let answer = conn
        .request(RemotingCommand::bare_request(3), t)
        .await
        .unwrap();
    assert_eq!(answer.code, response::SUCCESS);
    assert_eq!(conn.pending(), 0);
    assert!(!conn.is_closed());
}

/// Pipelined requests are answered in their own order whatever order the answers
/// arrive in (the echo peer answers each pair in reverse).
#[tokio::test]
async fn pipelined_answers_come_back_in_request_order() {
    let addr = echo_server().await;
    let conn = connect(addr).await;
    let answers = conn
        .request_all(
            vec![
                RemotingCommand::bare_request(21),
                RemotingCommand::bare_request(22),
            ],
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    let remarks: Vec<_> = answers.iter().map(|a| a.remark.as_deref()).collect();
    assert_eq!(remarks, [Some("21"), Some("22")]);
}

/// A peer announcing a frame over the cap loses the connection, and the request
/// waiting on it fails as closed, not at its timeout.
#[tokio::test]
async fn an_oversize_answer_closes_the_connection() {
    let addr = peer(|framed| async move {
        let mut socket = framed.into_inner();
        let mut buf = [0u8; 1024];
        let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut buf).await;
        let announced = u32::try_from(protocol::frame::DEFAULT_MAX_FRAME).unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut socket, &announced.to_be_bytes())
            .await
            .unwrap();
        // Keep the connection open: only the client's cap may close it.
        std::future::pending::<()>().await;
    })
    .await;
    let conn = connect(addr).await;
    let err = conn
        .request(RemotingCommand::bare_request(5), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Closed { .. }), "{err}");
    assert!(conn.wait_closed(Duration::from_secs(5)).await);
}

/// A request over the frame cap cannot be written: the connection closes and the
/// request fails as closed at once, instead of waiting out its timeout on a peer that
/// never saw it.
#[tokio::test]
async fn an_oversize_request_is_refused_with_the_connection() {
    let addr = peer(|mut framed| async move {
        while let Some(Ok(_)) = framed.next().await {}
        // Keep the connection open after the client's side went quiet.
        std::future::pending::<()>().await;
    })
    .await;
    let conn = connect(addr).await;
    let huge =
        RemotingCommand::bare_request(6)
            .with_body(vec![0u8; protocol::frame::DEFAULT_MAX_FRAME + 1]);
    let err = conn
        .request(huge, Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Closed { .. }), "{err}");
    assert!(conn.is_closed());
    let err = conn
        .request(RemotingCommand::bare_request(7), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Closed { .. }), "{err}");
}

/// The kept-connection client reconnects after the peer closed the connection, and
/// its error names the peer when there is nobody to reconnect to.
#[tokio::test]
async fn the_kept_connection_is_reestablished_after_a_close() {
    let addr = peer(|mut framed| async move {
        // One answer per connection, then a close.
        if let Some(Ok(req)) = framed.next().await {
            let answer = RemotingCommand::response_to(&req, response::SUCCESS);
            framed.send(answer).await.unwrap();
        }
    })
    .await;
    let client = super::super::RemotingClient::new(Peer::NameServer(addr.to_string()));
    let t = Duration::from_secs(5);
    for code in [1, 2, 3] {
        let answer = client
            .invoke(RemotingCommand::bare_request(code), t)
            .await
            .unwrap();
        assert_eq!(answer.code, response::SUCCESS);
    }

    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone_addr = gone.local_addr().unwrap();
    drop(gone);
    let client = super::super::RemotingClient::new(Peer::NameServer(gone_addr.to_string()));
    let err = client
        .invoke(RemotingCommand::bare_request(1), t)
        .await
        .unwrap_err();
    assert!(err.is_unreachable());
    assert!(err.to_string().contains(&gone_addr.to_string()), "{err}");
}
