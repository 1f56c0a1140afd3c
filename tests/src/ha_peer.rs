//! A hand-made HA peer (a slave), for suites that need a master to see a slave
//! that behaves exactly as they say: acknowledges only some bytes, lies about its
//! history, or stalls.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A hand-made slave speaking the HA protocol (version 2, see the broker's
/// `services/ha/handshake.rs`), to misbehave on purpose.
pub struct HaPeer {
    stream: TcpStream,
    key: ring::hmac::Key,
    nonces: Vec<u8>,
}

impl HaPeer {
    /// Connects and runs the handshake; returns the master's status byte.
    pub async fn connect(port: u16, group: &str, secret: &str) -> (Self, u8) {
        use ring::hmac;
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut hello = [0u8; 21];
        stream.read_exact(&mut hello).await.unwrap();
        assert_eq!(&hello[..5], b"RMQH\x02");
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
        let (id, epoch) = (9i64, 0i32);
        let mut nonces = hello[5..].to_vec();
        nonces.extend_from_slice(&[7u8; 16]);
        let mut mac_in = b"rmq-ha-v2 slave".to_vec();
        mac_in.extend_from_slice(&nonces);
        mac_in.extend_from_slice(group.as_bytes());
        mac_in.extend_from_slice(&id.to_be_bytes());
        mac_in.extend_from_slice(&epoch.to_be_bytes());
        let mut out = (group.len() as u16).to_be_bytes().to_vec();
        out.extend_from_slice(group.as_bytes());
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&epoch.to_be_bytes());
        out.extend_from_slice(&[7u8; 16]);
        out.extend_from_slice(hmac::sign(&key, &mac_in).as_ref());
        stream.write_all(&out).await.unwrap();
        // status, epoch, max offset, entry count, entries, MAC.
        let mut head = [0u8; 1 + 4 + 8 + 2];
        stream.read_exact(&mut head).await.unwrap();
        let count = u16::from_be_bytes([head[13], head[14]]) as usize;
        let mut rest = vec![0u8; count * 12 + 32];
        stream.read_exact(&mut rest).await.unwrap();
        (
            Self {
                stream,
                key,
                nonces,
            },
            head[0],
        )
    }

    /// Sends the history proof of an empty log; returns the master's verdict.
    pub async fn prove_empty(&mut self) -> u8 {
        self.prove(0, 0, 0, &[]).await
    }

    /// Sends a history proof: log end, the epoch entry below it, the bytes below it.
    pub async fn prove(&mut self, end: i64, epoch: i32, start: i64, tail: &[u8]) -> u8 {
        let mut body = end.to_be_bytes().to_vec();
        body.extend_from_slice(&epoch.to_be_bytes());
        body.extend_from_slice(&start.to_be_bytes());
        body.extend_from_slice(&(tail.len() as u16).to_be_bytes());
        body.extend_from_slice(tail);
        let mut mac_in = b"rmq-ha-v2 proof".to_vec();
        mac_in.extend_from_slice(&self.nonces);
        mac_in.extend_from_slice(&body);
        body.extend_from_slice(ring::hmac::sign(&self.key, &mac_in).as_ref());
        self.stream.write_all(&body).await.unwrap();
        self.stream.read_u8().await.unwrap()
    }

    /// Reads stream frames until one ends at or beyond `offset`.
    pub async fn read_until(&mut self, offset: i64) {
        loop {
            let at = self.stream.read_i64().await.unwrap();
            let size = self.stream.read_i32().await.unwrap() as usize;
            let mut body = vec![0u8; size];
            self.stream.read_exact(&mut body).await.unwrap();
            if at + size as i64 >= offset {
                return;
            }
        }
    }

    pub async fn report(&mut self, offset: i64) {
        self.stream.write_all(&offset.to_be_bytes()).await.unwrap();
    }

    /// True when the master closed the connection within `within`.
    pub async fn dropped_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut buf = vec![0u8; 64 * 1024];
        while Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_millis(200), self.stream.read(&mut buf)).await
            {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                _ => {}
            }
        }
        false
    }

    /// The connection, after the handshake (and the proof, when sent).
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }
}
