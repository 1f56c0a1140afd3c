//! The load generators' connection: one multiplexed remoting connection whose writer task
//! sends everything queued in one write, so the generator spends little CPU per request and
//! the broker, sharing the machine, is what gets measured. Repeated requests can be encoded
//! once as a [`Template`] and re-sent with a new opaque patched into the frame's bytes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use futures::stream::StreamExt;
use protocol::{RemotingCodec, RemotingCommand};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{Encoder, FramedRead};

type Pending = Arc<parking_lot::Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>>;

/// Every opaque this connection uses has exactly ten decimal digits (1e9 ..= 1999999999),
/// so a template's JSON header keeps its length when the opaque is patched in.
const OPAQUE_BASE: u32 = 1_000_000_000;
const OPAQUE_DIGITS: usize = 10;

/// A request frame encoded once (JSON header and body); only its opaque changes per send.
pub struct Template {
    frame: bytes::Bytes,
    /// Where the opaque's ten digits start in `frame`.
    opaque_at: usize,
}

impl Template {
    #[allow(dead_code)] // only produce_bench sends templates
    pub fn new(mut cmd: RemotingCommand) -> anyhow::Result<Self> {
        cmd.opaque = OPAQUE_BASE as i32;
        let frame = protocol::frame::encode_to_vec(&cmd)?;
        let marker = format!("\"opaque\":{OPAQUE_BASE}");
        let at = frame
            .windows(marker.len())
            .position(|w| w == marker.as_bytes())
            .ok_or_else(|| anyhow::anyhow!("template header has no JSON opaque"))?;
        Ok(Self {
            frame: frame.into(),
            opaque_at: at + marker.len() - OPAQUE_DIGITS,
        })
    }

    fn write_into(&self, buf: &mut BytesMut, opaque: i32) {
        let start = buf.len();
        buf.extend_from_slice(&self.frame);
        let digits = &mut buf[start + self.opaque_at..start + self.opaque_at + OPAQUE_DIGITS];
        let mut n = opaque as u32;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }
}

enum Outgoing {
    Command(RemotingCommand),
    Template(Arc<Template>, i32),
}

/// One multiplexed connection; a writer task sends everything queued in one write.
pub struct Conn {
    outbox: mpsc::UnboundedSender<Outgoing>,
    pending: Pending,
    opaque: AtomicU32,
}

impl Conn {
    pub async fn connect(addr: &str) -> anyhow::Result<Arc<Self>> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, mut write) = stream.into_split();
        let mut frames = FramedRead::with_capacity(read, RemotingCodec::default(), 64 * 1024);
        let pending: Pending = Arc::default();
        let p = Arc::clone(&pending);
        tokio::spawn(async move {
            while let Some(Ok(cmd)) = frames.next().await {
                if let Some(tx) = p.lock().remove(&cmd.opaque) {
                    let _ = tx.send(cmd);
                }
            }
        });
        let (outbox, mut queued) = mpsc::unbounded_channel::<Outgoing>();
        tokio::spawn(async move {
            let mut codec = RemotingCodec::default();
            let mut buf = BytesMut::with_capacity(256 * 1024);
            while let Some(first) = queued.recv().await {
                let mut next = Some(first);
                while let Some(out) = next.take() {
                    match out {
                        Outgoing::Command(cmd) => {
                            if codec.encode(&cmd, &mut buf).is_err() {
                                return;
                            }
                        }
                        Outgoing::Template(t, opaque) => t.write_into(&mut buf, opaque),
                    }
                    if buf.len() < 256 * 1024 {
                        next = queued.try_recv().ok();
                    }
                }
                if write.write_all(&buf).await.is_err() {
                    return;
                }
                buf.clear();
            }
        });
        Ok(Arc::new(Self {
            outbox,
            pending,
            opaque: AtomicU32::new(0),
        }))
    }

    fn next_opaque(&self) -> i32 {
        (OPAQUE_BASE + self.opaque.fetch_add(1, Ordering::Relaxed) % OPAQUE_BASE) as i32
    }

    fn enqueue(
        &self,
        opaque: i32,
        out: Outgoing,
    ) -> anyhow::Result<oneshot::Receiver<RemotingCommand>> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(opaque, tx);
        self.outbox
            .send(out)
            .map_err(|_| anyhow::anyhow!("connection closed"))?;
        Ok(rx)
    }

    pub async fn call(&self, mut cmd: RemotingCommand) -> anyhow::Result<RemotingCommand> {
        cmd.opaque = self.next_opaque();
        let rx = self.enqueue(cmd.opaque, Outgoing::Command(cmd))?;
        Ok(tokio::time::timeout(Duration::from_secs(10), rx).await??)
    }

    /// Sends `template` with a fresh opaque. No per-call timer: the caller bounds the
    /// whole run instead (a timer per request costs the generator measurable CPU).
    #[allow(dead_code)] // only produce_bench sends templates
    pub async fn call_template(&self, template: &Arc<Template>) -> anyhow::Result<RemotingCommand> {
        let opaque = self.next_opaque();
        let rx = self.enqueue(opaque, Outgoing::Template(Arc::clone(template), opaque))?;
        Ok(rx.await?)
    }

    #[allow(dead_code)] // only transaction_bench answers oneway
    pub fn oneway(&self, mut cmd: RemotingCommand) -> anyhow::Result<()> {
        cmd.opaque = self.next_opaque();
        cmd.mark_oneway();
        self.outbox
            .send(Outgoing::Command(cmd))
            .map_err(|_| anyhow::anyhow!("connection closed"))
    }
}
