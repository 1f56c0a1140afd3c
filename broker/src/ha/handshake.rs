//! Authentication at the start of an HA connection. **Deviation from RocketMQ 4.9**, whose
//! HA port takes the offset stream from anyone: before the 4.9 stream (slave 8-byte
//! offsets, master 12-byte headers + CommitLog bytes) both sides prove they belong to the
//! same broker group and know the shared `haSecret`:
//!
//! 1. master → slave: magic `RMQH` (4), version 1 (1), nonce (16 random bytes);
//! 2. slave → master: brokerName length (u16 BE) + UTF-8 name, brokerId (i64 BE), the
//!    slave's epoch (i32 BE), HMAC-SHA256(secret, "rmq-ha-v1 slave" ‖ nonce ‖ name ‖
//!    brokerId ‖ epoch) (32);
//! 3. master → slave: status (1: 0 accepted, 1 wrong group or secret, 2 slave epoch newer
//!    than the master's), the master's epoch (i32 BE), HMAC-SHA256(secret,
//!    "rmq-ha-v1 master" ‖ nonce ‖ status ‖ epoch) (32). A refused slave is then
//!    disconnected.
//!
//! The nonce makes a recorded exchange useless for a later connection; the MAC check is
//! constant-time (`ring::hmac::verify`). With an empty secret the exchange still checks the
//! group name but authenticates nothing.

use ring::hmac;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const MAGIC: &[u8; 4] = b"RMQH";
const VERSION: u8 = 1;
const NONCE_LEN: usize = 16;
const MAC_LEN: usize = 32;
/// Longest broker name accepted (RocketMQ validates names far shorter).
const MAX_NAME_LEN: usize = 255;

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
    #[error("slave epoch {slave} is newer than the master's {master}")]
    StaleMaster { slave: i32, master: i32 },
    #[error("master refused the slave (status {0})")]
    Refused(u8),
    #[error("master epoch {master} is older than the slave's {slave}")]
    MasterBehind { slave: i32, master: i32 },
    #[error("no randomness for the nonce")]
    Random,
}

/// What the master learned about an accepted slave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlaveHello {
    pub broker_id: i64,
    pub epoch: i32,
}

fn key(secret: &str) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes())
}

fn slave_mac_input(nonce: &[u8], name: &str, broker_id: i64, epoch: i32) -> Vec<u8> {
    let mut m = b"rmq-ha-v1 slave".to_vec();
    m.extend_from_slice(nonce);
    m.extend_from_slice(name.as_bytes());
    m.extend_from_slice(&broker_id.to_be_bytes());
    m.extend_from_slice(&epoch.to_be_bytes());
    m
}

fn master_mac_input(nonce: &[u8], status: u8, epoch: i32) -> Vec<u8> {
    let mut m = b"rmq-ha-v1 master".to_vec();
    m.extend_from_slice(nonce);
    m.push(status);
    m.extend_from_slice(&epoch.to_be_bytes());
    m
}

/// Master side. On `Err` the caller closes the connection (a refusal was already sent).
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    group: &str,
    secret: &str,
    master_epoch: i32,
) -> Result<SlaveHello, HandshakeError> {
    let mut nonce = [0u8; NONCE_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
        .map_err(|_| HandshakeError::Random)?;
    let mut hello = Vec::with_capacity(4 + 1 + NONCE_LEN);
    hello.extend_from_slice(MAGIC);
    hello.push(VERSION);
    hello.extend_from_slice(&nonce);
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
    let mut mac = [0u8; MAC_LEN];
    io.read_exact(&mut mac).await?;

    let key = key(secret);
    let (status, outcome) = if name != group {
        (1, Err(HandshakeError::WrongGroup(name.clone())))
    } else if hmac::verify(
        &key,
        &slave_mac_input(&nonce, &name, broker_id, epoch),
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
        (0, Ok(SlaveHello { broker_id, epoch }))
    };
    let tag = hmac::sign(&key, &master_mac_input(&nonce, status, master_epoch));
    let mut reply = Vec::with_capacity(1 + 4 + MAC_LEN);
    reply.push(status);
    reply.extend_from_slice(&master_epoch.to_be_bytes());
    reply.extend_from_slice(tag.as_ref());
    io.write_all(&reply).await?;
    io.flush().await?;
    outcome
}

/// Slave side. Returns the master's epoch.
pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    group: &str,
    secret: &str,
    broker_id: i64,
    epoch: i32,
) -> Result<i32, HandshakeError> {
    let mut hello = [0u8; 4 + 1 + NONCE_LEN];
    io.read_exact(&mut hello).await?;
    if &hello[..4] != MAGIC || hello[4] != VERSION {
        return Err(HandshakeError::Protocol);
    }
    let nonce = &hello[5..];
    let key = key(secret);
    let tag = hmac::sign(&key, &slave_mac_input(nonce, group, broker_id, epoch));
    let mut out = Vec::with_capacity(2 + group.len() + 8 + 4 + MAC_LEN);
    out.extend_from_slice(&(group.len().min(MAX_NAME_LEN) as u16).to_be_bytes());
    out.extend_from_slice(&group.as_bytes()[..group.len().min(MAX_NAME_LEN)]);
    out.extend_from_slice(&broker_id.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out.extend_from_slice(tag.as_ref());
    io.write_all(&out).await?;
    io.flush().await?;

    let status = io.read_u8().await?;
    let master_epoch = io.read_i32().await?;
    let mut mac = [0u8; MAC_LEN];
    io.read_exact(&mut mac).await?;
    if hmac::verify(&key, &master_mac_input(nonce, status, master_epoch), &mac).is_err() {
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
    Ok(master_epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(
        master: (&str, &str, i32),
        slave: (&str, &str, i32),
    ) -> (
        Result<SlaveHello, HandshakeError>,
        Result<i32, HandshakeError>,
    ) {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let m = async move { accept(&mut a, master.0, master.1, master.2).await };
        let s = async move { connect(&mut b, slave.0, slave.1, 7, slave.2).await };
        tokio::join!(m, s)
    }

    #[tokio::test]
    async fn same_group_and_secret_is_accepted() {
        let (m, s) = run(("g", "k", 3), ("g", "k", 2)).await;
        assert_eq!(
            m.unwrap(),
            SlaveHello {
                broker_id: 7,
                epoch: 2
            }
        );
        assert_eq!(s.unwrap(), 3);
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
    async fn garbage_is_a_protocol_error() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        b.write_all(&[0xff; 64]).await.unwrap();
        let r = connect(&mut a, "g", "k", 1, 0).await;
        assert!(matches!(r, Err(HandshakeError::Protocol)));
    }
}
