//! The slave side (`HAService.HAClient`): follows the master's HA stream. On each
//! connection it authenticates the master, which hands over its epoch history in the
//! same exchange; it cuts its own CommitLog, ConsumeQueues and IndexFiles back to the
//! last point both logs share (a former master's divergent tail, never below the confirm
//! offset without an operator), proves the rest is a prefix of the master's log, then
//! reports its max offset, places every frame through the store's validating
//! [`store::ha::ReplicaWriter`] and reports again after each batch or heartbeat.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use protocol::RemotingCommand;
use protocol::body::ha::HaRuntimeInfo;
use protocol::code::{request, response};
use protocol::message::PhysicalOffset;
use security::tls::MaybeTls;
use store::BrokerRole;
use store::ha::{EpochEntry, ReplicaError, last_consistent_point};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::Ha;
use super::handshake::{self, HandshakeError};
use super::transfer_frame::next_frame;
use crate::remoting_client::{ClientError, RemotingClient};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum SlaveError {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error("timed out ({0})")]
    Timeout(&'static str),
    #[error("master closed the connection")]
    Closed,
    #[error(transparent)]
    Frame(#[from] super::transfer_frame::FrameError),
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    #[error("master {addr}: {reason}")]
    Master { addr: String, reason: String },
    #[error(transparent)]
    Remoting(#[from] ClientError),
    #[error("truncation failed: {0}")]
    Truncate(String),
    #[error("the role or the master changed")]
    Superseded,
    #[error("{0}")]
    UnsafeTruncation(super::truncation::Refusal),
}

/// Runs until shutdown: while this broker is a slave with a known master, follows it
/// (over TLS when `tls.enable` is on, as the broker's other outbound connections).
pub async fn run(ha: Arc<Ha>, shutdown: CancellationToken) {
    let mut changes = ha.subscribe_changes();
    loop {
        changes.borrow_and_update();
        let target = ha.target();
        let active = ha.role() == BrokerRole::Slave
            && (target.master_ha_addr.is_some() || target.master_addr.is_some());
        if active {
            let result = tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = changes.changed() => { deactivate(&ha); continue; }
                r = follow(&ha, target.master_ha_addr.clone(), target.master_addr.clone()) => r,
            };
            deactivate(&ha);
            if let Err(e) = result {
                tracing::warn!(error = %e, "replication from the master stopped; retrying");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changes.changed() => {}
            _ = tokio::time::sleep(RETRY) => {}
        }
    }
}

fn deactivate(ha: &Ha) {
    ha.client.activated.store(false, Ordering::Release);
}

async fn follow(
    ha: &Arc<Ha>,
    ha_addr: Option<String>,
    master_addr: Option<String>,
) -> Result<(), SlaveError> {
    let expected = ha.target();
    let ha_addr = match ha_addr {
        Some(a) => a,
        None => {
            let master = master_addr.unwrap_or_default();
            ask_ha_addr(ha, &master).await?
        }
    };
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&ha_addr))
        .await
        .map_err(|_| SlaveError::Timeout("connect"))??;
    let _ = tcp.set_nodelay(true);
    let mut stream = security::tls::connect(ha.settings.tls_client.as_ref(), tcp, &ha_addr).await?;
    let s = &ha.settings;
    let my_epoch = ha.store.epochs().current_epoch();
    // The master is authenticated (and its history received over the authenticated
    // exchange) before anything of this replica is cut.
    let master = tokio::time::timeout(
        Duration::from_secs(5),
        handshake::connect(
            &mut stream,
            &s.group,
            s.secret.expose(),
            s.broker_id,
            my_epoch,
        ),
    )
    .await
    .map_err(|_| SlaveError::Timeout("handshake"))??;
    // Its own task: the slave loop drops `follow` on any role change, and a cut that
    // stopped between truncating and adopting the master's epochs (with its blocking
    // truncation still running after the gate was released) would corrupt the epoch
    // file. The blocking cut keeps the gate until both are done.
    let cut = tokio::task::spawn_blocking({
        let (ha, entries) = (Arc::clone(ha), master.entries.clone());
        let (end, expected) = (master.max_offset, expected.clone());
        move || cut_to_master(&ha, &expected, entries, end)
    });
    cut.await
        .map_err(|e| SlaveError::Truncate(e.to_string()))??;
    let proof = ha.store.history_proof();
    tokio::time::timeout(
        Duration::from_secs(5),
        handshake::prove(&mut stream, s.secret.expose(), &master.session, &proof),
    )
    .await
    .map_err(|_| SlaveError::Timeout("history proof"))??;
    tracing::info!(master = %ha_addr, master_epoch = master.epoch, from = %proof.end, "following the master");
    *ha.client.master_addr.lock() = ha_addr;
    ha.client.activated.store(true, Ordering::Release);
    stream_from(ha, stream).await
}

/// Reads frames, places them, reports progress.
async fn stream_from(ha: &Arc<Ha>, stream: MaybeTls) -> Result<(), SlaveError> {
    match stream {
        // Plaintext keeps the socket's lock-free owned halves; TLS shares one session.
        MaybeTls::Plain(tcp) => {
            let (rd, wr) = tcp.into_split();
            place_frames(ha, rd, wr).await
        }
        tls => {
            let (rd, wr) = tokio::io::split(tls);
            place_frames(ha, rd, wr).await
        }
    }
}

/// Acks `written` to the master; flushed, so that over TLS the ack cannot wait in the
/// stream for the next one while a SYNC send waits for it.
async fn report(
    wr: &mut (impl AsyncWrite + Unpin),
    written: PhysicalOffset,
) -> std::io::Result<()> {
    wr.write_i64(written.0).await?;
    wr.flush().await
}

async fn place_frames(
    ha: &Arc<Ha>,
    mut rd: impl AsyncRead + Unpin,
    mut wr: impl AsyncWrite + Unpin,
) -> Result<(), SlaveError> {
    let mut writer = ha.store.replica_writer();
    let mut reported = writer.written_offset();
    report(&mut wr, reported).await?;
    let heartbeat = ha.settings.heartbeat;
    let housekeeping = ha.settings.housekeeping;
    let mut last_report = Instant::now();
    let mut last_read = Instant::now();
    let mut buf = BytesMut::with_capacity(256 * 1024);
    loop {
        {
            let _gate = ha.replica_gate.lock().await;
            if ha.role() != BrokerRole::Slave {
                return Ok(());
            }
            while let Some(frame) = next_frame(&mut buf)? {
                ha.client
                    .master_max
                    .fetch_max(frame.end().0, Ordering::AcqRel);
                if !frame.body.is_empty() {
                    writer.accept(frame.offset, &frame.body)?;
                }
            }
        }
        let written = writer.written_offset();
        if written != reported || last_report.elapsed() >= heartbeat {
            report(&mut wr, written).await?;
            reported = written;
            last_report = Instant::now();
        }
        if last_read.elapsed() > housekeeping {
            return Err(SlaveError::Timeout("no data from the master"));
        }
        let wait = heartbeat
            .saturating_sub(last_report.elapsed())
            .max(Duration::from_millis(1));
        match tokio::time::timeout(wait, rd.read_buf(&mut buf)).await {
            Ok(Ok(0)) => return Err(SlaveError::Closed),
            Ok(Ok(_)) => {
                last_read = Instant::now();
                ha.client
                    .last_read_ms
                    .store(crate::now_ms(), Ordering::Release);
            }
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {}
        }
    }
}

async fn invoke(ha: &Ha, master: &str, code: i32) -> Result<RemotingCommand, SlaveError> {
    let client = RemotingClient::new(remoting::client::Peer::Broker(master.to_owned()))
        .with_credentials(ha.settings.credentials.clone())
        .with_tls(ha.settings.tls_client.clone());
    let cmd = RemotingCommand::request(code, &());
    let r = client.invoke(cmd, Duration::from_secs(3)).await?;
    if r.code != response::SUCCESS {
        return Err(SlaveError::Master {
            addr: master.to_owned(),
            reason: format!("code {} {}", r.code, r.remark.unwrap_or_default()),
        });
    }
    Ok(r)
}

/// The master's HA address, from its GET_BROKER_HA_STATUS answer.
async fn ask_ha_addr(ha: &Ha, master: &str) -> Result<String, SlaveError> {
    let r = invoke(ha, master, request::GET_BROKER_HA_STATUS).await?;
    let info: HaRuntimeInfo = protocol::body::decode(&r.body).map_err(|e| SlaveError::Master {
        addr: master.to_owned(),
        reason: e.to_string(),
    })?;
    Ok(info.ha_server_addr)
}

/// Truncates beyond the last point shared with the master (whose log is `remote` up to
/// `remote_end`, as its authenticated handshake said) and adopts its epochs. A broker
/// that was promoted, or told to follow another master, while this waited for the gate
/// is left alone: the cut was computed for a master it no longer follows.
///
/// A cut below the confirm offset (bytes this broker, as master, saw acknowledged by a
/// replica) or to zero is never made on the master's word alone: it is refused, counted,
/// shown in GET_BROKER_HA_STATUS (`truncationRefused`) and logged until an operator
/// allows exactly that cut (`docs/runbooks/ha-truncation.md`).
pub(crate) fn cut_to_master(
    ha: &Ha,
    expected: &super::Target,
    remote: Vec<EpochEntry>,
    remote_end: PhysicalOffset,
) -> Result<(), SlaveError> {
    let _gate = ha.replica_gate.blocking_lock();
    if ha.role() != BrokerRole::Slave || ha.target() != *expected {
        return Err(SlaveError::Superseded);
    }
    let store = &ha.store;
    let local = store.epochs().entries();
    let local_end = store.max_phy_offset();
    let point =
        last_consistent_point(&local, local_end, &remote, remote_end).unwrap_or(PhysicalOffset(0));
    if point < local_end {
        let confirm = store.confirm_offset().get();
        if point < confirm || point.0 == 0 {
            let refusal = super::truncation::Refusal {
                keep: point,
                end: local_end,
                confirm,
            };
            if !super::truncation::operator_allows(&**store, &refusal) {
                ha.counters
                    .refused_truncations
                    .fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    keep = %point, end = %local_end, %confirm,
                    allow_file = %super::truncation::allow_path(&**store).display(),
                    "refusing to cut this replica below its confirm offset or to zero; \
                     see docs/runbooks/ha-truncation.md"
                );
                *ha.truncation_refused.lock() = Some(refusal);
                return Err(SlaveError::UnsafeTruncation(refusal));
            }
            tracing::warn!(keep = %point, end = %local_end, %confirm, "cut allowed by the operator");
        }
        tracing::warn!(
            keep = %point, end = %local_end,
            "this replica holds a tail the master does not have; truncating it"
        );
        ha.counters.truncations.fetch_add(1, Ordering::Relaxed);
        ha.counters
            .truncated_bytes
            .fetch_add((local_end.0 - point.0) as u64, Ordering::Relaxed);
        store
            .truncate_beyond(point)
            .map_err(|e| SlaveError::Truncate(e.to_string()))?;
    }
    *ha.truncation_refused.lock() = None;
    if store.epochs().entries() != remote {
        store
            .epochs()
            .replace(remote)
            .map_err(|e| SlaveError::Truncate(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "slave_tests.rs"]
mod tests;
