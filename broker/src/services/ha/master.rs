//! The master side (`HAService.AcceptSocketService` + `HAConnection`): the HA listener,
//! and per slave a transfer task and an ack reader. Wire format after the handshake
//! and the slave's history proof (see [`super::handshake`]) is RocketMQ 4.9's: the slave sends 8-byte big-endian
//! offsets; the master sends frames of a 12-byte header (physical offset i64, size i32)
//! and `size` raw CommitLog bytes, stopping at file ends; a frame of size 0 is a
//! heartbeat.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use bytes::BytesMut;
use protocol::message::PhysicalOffset;
use security::conn_gate::ConnSlot;
use security::tls::{MaybeTls, TlsServer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::Ha;
use super::handshake::{self, HandshakeError};

/// Shortest time a slave gets for its history proof (it may first cut its log's tail);
/// the housekeeping interval when that is longer.
const PROOF_TIMEOUT_MIN: std::time::Duration = std::time::Duration::from_secs(5);
/// Permissive TLS on the HA port: how long a fresh peer may stay silent before it is
/// taken for a plaintext slave waiting for the master's greeting (a TLS slave sends its
/// ClientHello at once).
const TLS_QUIET: std::time::Duration = std::time::Duration::from_millis(300);

/// Binds `haListenPort` (retrying while the port is taken) and serves slaves, over TLS
/// as `tls.server.mode` says (the remoting port's certificates; beyond 4.9, whose HA is
/// plaintext). Connections `gate` refuses (`haMaxConnections`, `haMaxConnectionsPerIp`,
/// the reserve) are closed at once; one that has not completed the TLS and HA handshakes
/// by its slot's deadline (`haHandshakeTimeoutMillis`) is closed then, so a peer without
/// the secret cannot keep slots from the group's slaves.
pub async fn run_listener(
    ha: Arc<Ha>,
    gate: Arc<security::conn_gate::ConnGate>,
    tls: Option<Arc<TlsServer>>,
    shutdown: CancellationToken,
) {
    let addr = ha.settings.listen;
    let listener = loop {
        match TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(e) => {
                tracing::error!(%addr, error = %e, "cannot listen on haListenPort; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
                }
            }
        }
    };
    tracing::info!(%addr, "HA listener up");
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let slot = match gate.admit(peer.ip()) {
                    Ok(slot) => slot,
                    Err(reason) => {
                        // Counted by reason; a log line per refusal would let a peer
                        // flood the log.
                        tracing::debug!(slave = %peer, %reason, "HA connection refused at accept");
                        continue;
                    }
                };
                let ha = Arc::clone(&ha);
                let stop = shutdown.child_token();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let stream = match tls {
                        Some(t) => {
                            slot.before_first_request(t.accept_server_first(stream, TLS_QUIET))
                                .await
                        }
                        None => Ok(Ok(MaybeTls::Plain(stream))),
                    };
                    let stream = match stream {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::warn!(slave = %peer, error = %e, "HA connection refused by TLS");
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(slave = %peer, error = %e, "HA TLS handshake past haHandshakeTimeoutMillis");
                            return;
                        }
                    };
                    if let Err(e) = serve_slave(&ha, stream, peer.to_string(), &slot, stop).await {
                        tracing::warn!(slave = %peer, error = %e, "HA connection closed");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "HA accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error("handshake not completed within haHandshakeTimeoutMillis")]
    HandshakeTimeout,
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("this broker is a slave; it does not serve replicas")]
    NotMaster,
    #[error("slave acknowledged {ack} beyond the {max} bytes streamed to it: dropped")]
    ForgedAck { ack: i64, max: i64 },
    #[error("slave history refused: {0}")]
    History(store::ha::ProofError),
    #[error("slave reported offset {0}, which this master does not hold")]
    BadStart(i64),
    #[error("no report from the slave within the housekeeping interval")]
    Silent,
    #[error("this broker follows another master or took a new epoch: the slave must reconnect")]
    Superseded,
}

/// Resolves once a slave connection of the master of `epoch` must close: this broker
/// now follows another master (its slaves must follow that one, and their acks must not
/// count here), or it was promoted again at a newer epoch (they reconnect and reconcile
/// against it). A master fenced without a successor yet keeps streaming: the operator's
/// election waits for a switchover target to hold everything the fenced master wrote.
pub(crate) async fn superseded(ha: &Ha, epoch: i32) {
    let mut changes = ha.subscribe_changes();
    loop {
        let follows_another = ha.is_slave() && ha.target() != super::Target::default();
        if follows_another || (!ha.is_slave() && ha.epoch() != epoch) {
            return;
        }
        if changes.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// `slot`'s first-request deadline bounds the handshake (`haHandshakeTimeoutMillis`).
async fn serve_slave(
    ha: &Arc<Ha>,
    mut stream: MaybeTls,
    peer: String,
    slot: &ConnSlot,
    stop: CancellationToken,
) -> Result<(), ConnError> {
    if ha.is_slave() {
        return Err(ConnError::NotMaster);
    }
    let _ = stream.set_nodelay(true);
    let s = &ha.settings;
    let history = (ha.store.epochs().entries(), ha.store.max_phy_offset());
    let hello = match slot
        .before_first_request(handshake::accept(
            &mut stream,
            &s.group,
            s.secret.expose(),
            ha.epoch(),
            history,
        ))
        .await
    {
        Err(_) => return Err(ConnError::HandshakeTimeout),
        Ok(Err(e)) => {
            ha.counters
                .refused_handshakes
                .fetch_add(1, Ordering::Relaxed);
            if let HandshakeError::StaleMaster { slave, .. } = e {
                ha.fence(slave);
            }
            return Err(e.into());
        }
        Ok(Ok(hello)) => hello,
    };
    // The slave cuts what this master does not have, then proves the rest is a prefix of
    // this log; only then do its reports count as acks.
    let proof = match tokio::time::timeout(
        s.housekeeping.max(PROOF_TIMEOUT_MIN),
        handshake::read_proof(&mut stream, s.secret.expose(), &hello.session),
    )
    .await
    {
        Err(_) => return Err(ConnError::Silent),
        Ok(r) => r?,
    };
    if let Err(e) = ha.store.check_history_proof(&proof) {
        ha.counters
            .refused_histories
            .fetch_add(1, Ordering::Relaxed);
        let _ = handshake::verdict(&mut stream, false).await;
        return Err(ConnError::History(e));
    }
    handshake::verdict(&mut stream, true).await?;
    let slave = Slave {
        peer,
        broker_id: hello.broker_id,
        epoch: hello.epoch,
        first: proof.end.0,
    };
    match stream {
        // Plaintext keeps the socket's lock-free owned halves; TLS shares one session.
        MaybeTls::Plain(tcp) => {
            let (rd, wr) = tcp.into_split();
            stream_to_slave(ha, rd, wr, slave, stop).await
        }
        tls => {
            let (rd, wr) = tokio::io::split(tls);
            stream_to_slave(ha, rd, wr, slave, stop).await
        }
    }
}

/// A slave that passed the handshake and proved its history up to `first`.
struct Slave {
    peer: String,
    broker_id: i64,
    epoch: i32,
    first: i64,
}

/// Streams the CommitLog to an authenticated slave and reads its acks until either side
/// stops or this master is superseded.
async fn stream_to_slave(
    ha: &Arc<Ha>,
    rd: impl AsyncRead + Unpin,
    wr: impl AsyncWrite + Unpin + Send + 'static,
    slave: Slave,
    stop: CancellationToken,
) -> Result<(), ConnError> {
    let Slave {
        peer,
        broker_id,
        epoch,
        first,
    } = slave;
    let log = ha.store.commit_log();
    // A slave with nothing starts at the beginning of the master's last file.
    let start = if first == 0 {
        let max = log.max_offset().0;
        max - max % log.file_size() as i64
    } else {
        first
    };
    if first < 0 || (first > 0 && first < log.min_offset().0) {
        return Err(ConnError::BadStart(first));
    }
    tracing::info!(slave = %peer, broker_id, epoch, from = start, "slave connected");
    let hello_epoch = ha.epoch();
    let id = ha.acks.register(peer, first);
    ha.on_ack();
    // What the transfer task has put on this connection: acks beyond it are forged.
    let streamed = Arc::new(AtomicI64::new(start.max(first)));
    let cancel = stop.child_token();
    let writer = tokio::spawn(transfer(
        Arc::clone(ha),
        wr,
        PhysicalOffset(start),
        Arc::clone(&streamed),
        cancel.clone(),
    ));
    let result = tokio::select! {
        r = read_acks(ha, rd, id, &streamed, &cancel) => r,
        () = superseded(ha, hello_epoch) => Err(ConnError::Superseded),
    };
    cancel.cancel();
    ha.acks.remove(id);
    let _ = writer.await;
    result
}

/// `HAConnection.ReadSocketService`: every 8-byte report is the slave's max offset. A
/// report beyond what this connection streamed claims bytes the slave cannot have from
/// here (RocketMQ #1155/#3015: such an ack would let SYNC_MASTER report unreplicated
/// writes as replicated); the connection is dropped.
async fn read_acks(
    ha: &Ha,
    mut rd: impl AsyncRead + Unpin,
    id: u64,
    streamed: &AtomicI64,
    cancel: &CancellationToken,
) -> Result<(), ConnError> {
    loop {
        let ack = tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            r = tokio::time::timeout(ha.settings.housekeeping, rd.read_i64()) => match r {
                Ok(r) => r?,
                Err(_) => return Err(ConnError::Silent),
            },
        };
        let max = streamed.load(Ordering::Acquire);
        if ack > max || ack < 0 {
            ha.counters.forged_acks.fetch_add(1, Ordering::Relaxed);
            return Err(ConnError::ForgedAck { ack, max });
        }
        ha.acks.update(id, ack);
        ha.on_ack();
    }
}

/// `HAConnection.WriteSocketService`: streams the CommitLog from `at`.
async fn transfer(
    ha: Arc<Ha>,
    mut wr: impl AsyncWrite + Unpin,
    mut at: PhysicalOffset,
    streamed: Arc<AtomicI64>,
    cancel: CancellationToken,
) {
    let log = Arc::clone(ha.store.commit_log());
    let batch = ha.settings.batch_size;
    let heartbeat = ha.settings.heartbeat;
    let mut buf = BytesMut::with_capacity(12 + batch);
    let mut last_write = Instant::now();
    loop {
        if cancel.is_cancelled() {
            return;
        }
        let window = log.read_to_file_end(at).filter(|w| !w.is_empty());
        let size = match &window {
            Some(w) => w.len().min(batch),
            None if at < log.min_offset() => {
                tracing::warn!(%at, "slave needs data this master no longer holds");
                cancel.cancel();
                return;
            }
            None => 0,
        };
        if size == 0 && last_write.elapsed() < heartbeat {
            let signal = log.append_signal();
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::timeout(heartbeat.saturating_sub(last_write.elapsed()), signal.wait_beyond(at)) => {}
            }
            continue;
        }
        buf.clear();
        buf.extend_from_slice(&at.0.to_be_bytes());
        buf.extend_from_slice(&(size as i32).to_be_bytes());
        if let Some(w) = &window {
            buf.extend_from_slice(&w[..size]);
        }
        // Counted before the write: once the bytes are in the socket the slave may read,
        // store and ack them before this task runs again, and an ack read first would be
        // taken for a forged one and drop an honest slave (seen under load: a reconnect
        // every second, and a switchover target cut off from its fenced master). The ack
        // bound still holds: nothing beyond what was handed to this connection counts.
        let end = at.0 + size as i64;
        streamed.fetch_max(end, Ordering::AcqRel);
        // Flushed: over TLS, records the socket did not take at once would otherwise
        // wait for the next frame, and a SYNC send for its slave until it times out.
        let written = tokio::select! {
            _ = cancel.cancelled() => return,
            r = async {
                wr.write_all(&buf).await?;
                wr.flush().await
            } => r,
        };
        if let Err(e) = written {
            tracing::debug!(error = %e, "HA transfer write failed");
            cancel.cancel();
            return;
        }
        at = PhysicalOffset(end);
        last_write = Instant::now();
    }
}

#[cfg(test)]
#[path = "master_tests.rs"]
mod tests;
