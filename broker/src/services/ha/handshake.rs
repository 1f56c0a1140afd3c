//! Authentication at the start of an HA connection. **Deviation from RocketMQ 4.9**, whose
//! HA port takes the offset stream from anyone: before the 4.9 stream (slave 8-byte
//! offsets, master 12-byte headers + CommitLog bytes) both sides prove they belong to the
//! same broker group and know the shared `haSecret`, the master hands over its epoch
//! history (authenticated, so a slave never cuts its log on an unauthenticated peer's
//! word) and the slave proves its log is a prefix of the master's:
//!
//! 1. master → slave: magic `RMQH` (4), version 2 (1), master nonce (16 random bytes);
//! 2. slave → master: brokerName length (u16 BE) + UTF-8 name, brokerId (i64 BE), the
//!    slave's epoch (i32 BE), slave nonce (16), HMAC-SHA256(secret, "rmq-ha-v2 slave" ‖
//!    master nonce ‖ slave nonce ‖ name ‖ brokerId ‖ epoch) (32);
//! 3. master → slave: status (1: 0 accepted, 1 wrong group or secret, 2 slave epoch newer
//!    than the master's), the master's epoch (i32 BE), its CommitLog end (i64 BE), its
//!    epoch entries (count u16 BE, then epoch i32 BE + start offset i64 BE each; none
//!    unless accepted), HMAC-SHA256(secret, "rmq-ha-v2 master" ‖ both nonces ‖ all of
//!    that) (32). A refused slave is then disconnected. The slave nonce makes a recorded
//!    answer (an old history) useless for a later connection.
//! 4. slave → master, after cutting any tail the master does not have: the history proof
//!    (`store::ha::HistoryProof`): end (i64 BE), epoch (i32 BE) and start (i64 BE) of the
//!    entry that wrote the bytes below the end, tail length (u16 BE) and tail bytes,
//!    HMAC-SHA256(secret, "rmq-ha-v2 proof" ‖ both nonces ‖ all of that) (32);
//! 5. master → slave: verdict (1: 0 accepted, then the 4.9 stream starts at the proven
//!    end; 1 the histories differ, and the master disconnects).
//!
//! MAC checks are constant-time (`ring::hmac::verify`). An empty secret authenticates
//! nothing, so both sides refuse to run the exchange with one.

use bytes::Bytes;
use protocol::message::PhysicalOffset;
use ring::hmac;
use store::ha::{EpochEntry, HistoryProof, TAIL_LEN};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const MAGIC: &[u8; 4] = b"RMQH";
const VERSION: u8 = 2;
const NONCE_LEN: usize = 16;
const MAC_LEN: usize = 32;
/// Longest broker name accepted (RocketMQ validates names far shorter).
const MAX_NAME_LEN: usize = 255;
/// Most epoch entries a master sends (one per term; a history this long is refused).
const MAX_ENTRIES: usize = 65_535;

#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("HA handshake I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("not an HA peer of this version")]
    Protocol,
    #[error("peer is broker group {0:?}, not ours")]
    WrongGroup(String),
    #[error("HA secret mismatch")]
    BadSecret,
    #[error("haSecret is empty: replication refuses to run unauthenticated")]
    NoSecret,
    #[error("slave epoch {slave} is newer than the master's {master}")]
    StaleMaster { slave: i32, master: i32 },
    #[error("master refused the slave (status {0})")]
    Refused(u8),
    #[error("master epoch {master} is older than the slave's {slave}")]
    MasterBehind { slave: i32, master: i32 },
    #[error("the master found this replica's history differs from its own")]
    HistoryRefused,
    #[error("no randomness for the nonce")]
    Random,
}

/// The two nonces of one connection; later messages are bound to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    master_nonce: [u8; NONCE_LEN],
    slave_nonce: [u8; NONCE_LEN],
}

/// What the master learned about an accepted slave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlaveHello {
    pub broker_id: i64,
    pub epoch: i32,
    pub session: Session,
}

/// What the slave learned from an accepted handshake: the master's term and history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterHello {
    pub epoch: i32,
    pub max_offset: PhysicalOffset,
    pub entries: Vec<EpochEntry>,
    pub session: Session,
}

fn key(secret: &str) -> Result<hmac::Key, HandshakeError> {
    if secret.is_empty() {
        return Err(HandshakeError::NoSecret);
    }
    Ok(hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()))
}

fn nonce() -> Result<[u8; NONCE_LEN], HandshakeError> {
    let mut n = [0u8; NONCE_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut n)
        .map_err(|_| HandshakeError::Random)?;
    Ok(n)
}

fn slave_mac_input(s: &Session, name: &str, broker_id: i64, epoch: i32) -> Vec<u8> {
    let mut m = b"rmq-ha-v2 slave".to_vec();
    m.extend_from_slice(&s.master_nonce);
    m.extend_from_slice(&s.slave_nonce);
    m.extend_from_slice(name.as_bytes());
    m.extend_from_slice(&broker_id.to_be_bytes());
    m.extend_from_slice(&epoch.to_be_bytes());
    m
}

/// The master's answer after the status byte (epoch, end, entries), as sent and MACed.
fn master_body(epoch: i32, max: PhysicalOffset, entries: &[EpochEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + 8 + 2 + entries.len() * 12);
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&max.0.to_be_bytes());
    b.extend_from_slice(&(entries.len() as u16).to_be_bytes());
    for e in entries {
        b.extend_from_slice(&e.epoch.to_be_bytes());
        b.extend_from_slice(&e.start_offset.0.to_be_bytes());
    }
    b
}

fn master_mac_input(s: &Session, status: u8, body: &[u8]) -> Vec<u8> {
    let mut m = b"rmq-ha-v2 master".to_vec();
    m.extend_from_slice(&s.master_nonce);
    m.extend_from_slice(&s.slave_nonce);
    m.push(status);
    m.extend_from_slice(body);
    m
}

fn proof_body(p: &HistoryProof) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 4 + 8 + 2 + p.tail.len());
    b.extend_from_slice(&p.end.0.to_be_bytes());
    b.extend_from_slice(&p.epoch.epoch.to_be_bytes());
    b.extend_from_slice(&p.epoch.start_offset.0.to_be_bytes());
    b.extend_from_slice(&(p.tail.len() as u16).to_be_bytes());
    b.extend_from_slice(&p.tail);
    b
}

fn proof_mac_input(s: &Session, body: &[u8]) -> Vec<u8> {
    let mut m = b"rmq-ha-v2 proof".to_vec();
    m.extend_from_slice(&s.master_nonce);
    m.extend_from_slice(&s.slave_nonce);
    m.extend_from_slice(body);
    m
}

/// Master side. `history` is the master's epoch entries and CommitLog end, sent to an
/// accepted slave. On `Err` the caller closes the connection (a refusal was already sent).
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    group: &str,
    secret: &str,
    master_epoch: i32,
    history: (Vec<EpochEntry>, PhysicalOffset),
) -> Result<SlaveHello, HandshakeError> {
    let key = key(secret)?;
    let master_nonce = nonce()?;
    let mut hello = Vec::with_capacity(4 + 1 + NONCE_LEN);
    hello.extend_from_slice(MAGIC);
    hello.push(VERSION);
    hello.extend_from_slice(&master_nonce);
    io.write_all(&hello).await?;

    let name_len = io.read_u16().await? as usize;
    if name_len > MAX_NAME_LEN {
        return Err(HandshakeError::Protocol);
    }
    let mut name = vec![0u8; name_len];
    io.read_exact(&mut name).await?;
    let name = String::from_utf8(name).map_err(|_| HandshakeError::Protocol)?;
    let broker_id = io.read_i64().await?;
    let epoch = io.read_i32().await?;
    let mut slave_nonce = [0u8; NONCE_LEN];
    io.read_exact(&mut slave_nonce).await?;
    let mut mac = [0u8; MAC_LEN];
    io.read_exact(&mut mac).await?;
    let session = Session {
        master_nonce,
        slave_nonce,
    };

    let (status, outcome) = if name != group {
        (1, Err(HandshakeError::WrongGroup(name.clone())))
    } else if hmac::verify(
        &key,
        &slave_mac_input(&session, &name, broker_id, epoch),
        &mac,
    )
    .is_err()
    {
        (1, Err(HandshakeError::BadSecret))
    } else if epoch > master_epoch {
        (
            2,
            Err(HandshakeError::StaleMaster {
                slave: epoch,
                master: master_epoch,
            }),
        )
    } else {
        (
            0,
            Ok(SlaveHello {
                broker_id,
                epoch,
                session,
            }),
        )
    };
    let (entries, max) = history;
    let entries = if status == 0 && entries.len() <= MAX_ENTRIES {
        entries
    } else {
        Vec::new()
    };
    let body = master_body(master_epoch, max, &entries);
    let tag = hmac::sign(&key, &master_mac_input(&session, status, &body));
    let mut reply = Vec::with_capacity(1 + body.len() + MAC_LEN);
    reply.push(status);
    reply.extend_from_slice(&body);
    reply.extend_from_slice(tag.as_ref());
    io.write_all(&reply).await?;
    io.flush().await?;
    outcome
}

/// Slave side: authenticates the master and returns its term and history.
pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    group: &str,
    secret: &str,
    broker_id: i64,
    epoch: i32,
) -> Result<MasterHello, HandshakeError> {
    let key = key(secret)?;
    let mut hello = [0u8; 4 + 1 + NONCE_LEN];
    io.read_exact(&mut hello).await?;
    if &hello[..4] != MAGIC || hello[4] != VERSION {
        return Err(HandshakeError::Protocol);
    }
    let mut master_nonce = [0u8; NONCE_LEN];
    master_nonce.copy_from_slice(&hello[5..]);
    let session = Session {
        master_nonce,
        slave_nonce: nonce()?,
    };
    let name = &group.as_bytes()[..group.len().min(MAX_NAME_LEN)];
    let name = std::str::from_utf8(name).unwrap_or_default();
    let tag = hmac::sign(&key, &slave_mac_input(&session, name, broker_id, epoch));
    let mut out = Vec::with_capacity(2 + name.len() + 8 + 4 + NONCE_LEN + MAC_LEN);
    out.extend_from_slice(&(name.len() as u16).to_be_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&broker_id.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out.extend_from_slice(&session.slave_nonce);
    out.extend_from_slice(tag.as_ref());
    io.write_all(&out).await?;
    io.flush().await?;

    let status = io.read_u8().await?;
    let master_epoch = io.read_i32().await?;
    let max = PhysicalOffset(io.read_i64().await?);
    let count = io.read_u16().await? as usize;
    let mut entries = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let epoch = io.read_i32().await?;
        let start = io.read_i64().await?;
        entries.push(EpochEntry {
            epoch,
            start_offset: PhysicalOffset(start),
        });
    }
    let mut mac = [0u8; MAC_LEN];
    io.read_exact(&mut mac).await?;
    let body = master_body(master_epoch, max, &entries);
    if hmac::verify(&key, &master_mac_input(&session, status, &body), &mac).is_err() {
        return Err(HandshakeError::BadSecret);
    }
    if status != 0 {
        return Err(HandshakeError::Refused(status));
    }
    if master_epoch < epoch {
        return Err(HandshakeError::MasterBehind {
            slave: epoch,
            master: master_epoch,
        });
    }
    let ordered = entries
        .windows(2)
        .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset <= w[1].start_offset);
    if !ordered || max.0 < 0 || entries.iter().any(|e| e.start_offset.0 < 0) {
        return Err(HandshakeError::Protocol);
    }
    Ok(MasterHello {
        epoch: master_epoch,
        max_offset: max,
        entries,
        session,
    })
}

/// Slave side, after any cut: proves the history and waits for the master's verdict.
pub async fn prove<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    secret: &str,
    session: &Session,
    proof: &HistoryProof,
) -> Result<(), HandshakeError> {
    let key = key(secret)?;
    let body = proof_body(proof);
    let tag = hmac::sign(&key, &proof_mac_input(session, &body));
    io.write_all(&body).await?;
    io.write_all(tag.as_ref()).await?;
    io.flush().await?;
    match io.read_u8().await? {
        0 => Ok(()),
        _ => Err(HandshakeError::HistoryRefused),
    }
}

/// Master side: reads the slave's proof (the caller checks it against the log and
/// answers with [`verdict`]).
pub async fn read_proof<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    secret: &str,
    session: &Session,
) -> Result<HistoryProof, HandshakeError> {
    let key = key(secret)?;
    let end = io.read_i64().await?;
    let epoch = io.read_i32().await?;
    let start = io.read_i64().await?;
    let len = io.read_u16().await? as usize;
    if len > TAIL_LEN {
        return Err(HandshakeError::Protocol);
    }
    let mut tail = vec![0u8; len];
    io.read_exact(&mut tail).await?;
    let mut mac = [0u8; MAC_LEN];
    io.read_exact(&mut mac).await?;
    let proof = HistoryProof {
        end: PhysicalOffset(end),
        epoch: EpochEntry {
            epoch,
            start_offset: PhysicalOffset(start),
        },
        tail: Bytes::from(tail),
    };
    if hmac::verify(&key, &proof_mac_input(session, &proof_body(&proof)), &mac).is_err() {
        return Err(HandshakeError::BadSecret);
    }
    Ok(proof)
}

/// Master side: the answer to a proof.
pub async fn verdict<S: AsyncWrite + Unpin>(io: &mut S, accepted: bool) -> std::io::Result<()> {
    io.write_u8(if accepted { 0 } else { 1 }).await?;
    io.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history() -> (Vec<EpochEntry>, PhysicalOffset) {
        (
            vec![
                EpochEntry {
                    epoch: 1,
                    start_offset: PhysicalOffset(0),
                },
                EpochEntry {
                    epoch: 3,
                    start_offset: PhysicalOffset(500),
                },
            ],
            PhysicalOffset(900),
        )
    }

    async fn run(
        master: (&str, &str, i32),
        slave: (&str, &str, i32),
    ) -> (
        Result<SlaveHello, HandshakeError>,
        Result<MasterHello, HandshakeError>,
    ) {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let m = async move { accept(&mut a, master.0, master.1, master.2, history()).await };
        let s = async move { connect(&mut b, slave.0, slave.1, 7, slave.2).await };
        tokio::join!(m, s)
    }

    #[tokio::test]
    async fn same_group_and_secret_is_accepted_with_the_masters_history() {
        let (m, s) = run(("g", "k", 3), ("g", "k", 2)).await;
        let m = m.unwrap();
        assert_eq!((m.broker_id, m.epoch), (7, 2));
        let s = s.unwrap();
        assert_eq!((s.epoch, s.max_offset), (3, PhysicalOffset(900)));
        assert_eq!(s.entries, history().0);
        assert_eq!(s.session, m.session);
    }

    #[tokio::test]
    async fn wrong_secret_group_or_newer_slave_epoch_is_refused() {
        let (m, s) = run(("g", "k", 1), ("g", "other", 1)).await;
        assert!(matches!(m, Err(HandshakeError::BadSecret)));
        // The slave cannot verify the master's answer either.
        assert!(matches!(s, Err(HandshakeError::BadSecret)));
        let (m, s) = run(("g", "k", 1), ("h", "k", 1)).await;
        assert!(matches!(m, Err(HandshakeError::WrongGroup(_))));
        assert!(matches!(s, Err(HandshakeError::Refused(1))));
        let (m, s) = run(("g", "k", 1), ("g", "k", 5)).await;
        assert!(matches!(
            m,
            Err(HandshakeError::StaleMaster {
                slave: 5,
                master: 1
            })
        ));
        assert!(matches!(s, Err(HandshakeError::Refused(2))));
    }

    #[tokio::test]
    async fn an_empty_secret_is_refused_on_both_sides() {
        let (mut a, _b) = tokio::io::duplex(4096);
        let r = accept(&mut a, "g", "", 1, history()).await;
        assert!(matches!(r, Err(HandshakeError::NoSecret)));
        let (mut a, _b) = tokio::io::duplex(4096);
        let r = connect(&mut a, "g", "", 1, 0).await;
        assert!(matches!(r, Err(HandshakeError::NoSecret)));
    }

    /// A peer that is not the master (a forged NOTIFY_BROKER_ROLE_CHANGED target) cannot
    /// hand a slave a history to cut its log by: without the secret its answer fails.
    #[tokio::test]
    async fn a_forged_master_answer_is_refused_before_any_history_is_used() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let forger = async move {
            let mut hello = b"RMQH".to_vec();
            hello.push(VERSION);
            hello.extend_from_slice(&[0u8; NONCE_LEN]);
            a.write_all(&hello).await.unwrap();
            let mut sink = [0u8; 2 + 1 + 8 + 4 + NONCE_LEN + MAC_LEN];
            a.read_exact(&mut sink).await.unwrap();
            // Accepted, epoch 9, an empty history ending at 0, a made-up MAC.
            let mut reply = vec![0u8];
            reply.extend_from_slice(&master_body(9, PhysicalOffset(0), &[]));
            reply.extend_from_slice(&[0u8; MAC_LEN]);
            a.write_all(&reply).await.unwrap();
        };
        let slave = async move { connect(&mut b, "g", "k", 1, 2).await };
        let ((), s) = tokio::join!(forger, slave);
        assert!(matches!(s, Err(HandshakeError::BadSecret)), "{s:?}");
    }

    #[tokio::test]
    async fn proof_round_trip_and_tampering() {
        let (m, s) = run(("g", "k", 3), ("g", "k", 2)).await;
        let (ms, ss) = (m.unwrap().session, s.unwrap().session);
        let proof = HistoryProof {
            end: PhysicalOffset(700),
            epoch: history().0[1],
            tail: Bytes::from_static(b"tail bytes"),
        };
        let (mut a, mut b) = tokio::io::duplex(8192);
        let p = proof.clone();
        let slave = async move { prove(&mut b, "k", &ss, &p).await };
        let master = async move {
            let got = read_proof(&mut a, "k", &ms).await.unwrap();
            verdict(&mut a, got.end == PhysicalOffset(700))
                .await
                .unwrap();
            got
        };
        let (proved, got) = tokio::join!(slave, master);
        proved.unwrap();
        assert_eq!(got, proof);
        // A proof made for another connection (other nonces) does not verify.
        let other = Session {
            master_nonce: [1; NONCE_LEN],
            slave_nonce: [2; NONCE_LEN],
        };
        let (mut a, mut b) = tokio::io::duplex(8192);
        let p = proof.clone();
        let slave = async move { prove(&mut b, "k", &other, &p).await };
        let master = async move { read_proof(&mut a, "k", &ms).await };
        let (_, got) = tokio::join!(slave, master);
        assert!(matches!(got, Err(HandshakeError::BadSecret)));
    }

    #[tokio::test]
    async fn garbage_is_a_protocol_error() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        b.write_all(&[0xff; 64]).await.unwrap();
        let r = connect(&mut a, "g", "k", 1, 0).await;
        assert!(matches!(r, Err(HandshakeError::Protocol)));
    }
}
