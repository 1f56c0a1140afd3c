//! The load generators' connection: one multiplexed remoting connection whose writer task
//! sends everything queued in one write, so the generator spends little CPU per request and
//! the broker, sharing the machine, is what gets measured.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use futures::SinkExt;
use futures::stream::StreamExt;
use protocol::{RemotingCodec, RemotingCommand};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::Framed;

type Pending = Arc<parking_lot::Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>>;

/// One multiplexed connection; a writer task sends everything queued in one write.
pub struct Conn {
    outbox: mpsc::UnboundedSender<RemotingCommand>,
    pending: Pending,
    opaque: AtomicI32,
}

impl Conn {
    pub async fn connect(addr: &str) -> anyhow::Result<Arc<Self>> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut sink, mut stream) = Framed::new(stream, RemotingCodec::default()).split();
        let pending: Pending = Arc::default();
        let p = Arc::clone(&pending);
        tokio::spawn(async move {
            while let Some(Ok(cmd)) = stream.next().await {
                if let Some(tx) = p.lock().remove(&cmd.opaque) {
                    let _ = tx.send(cmd);
                }
            }
        });
        let (outbox, mut queued) = mpsc::unbounded_channel::<RemotingCommand>();
        tokio::spawn(async move {
            while let Some(cmd) = queued.recv().await {
                if sink.feed(cmd).await.is_err() {
                    return;
                }
                while let Ok(cmd) = queued.try_recv() {
                    if sink.feed(cmd).await.is_err() {
                        return;
                    }
                }
                if sink.flush().await.is_err() {
                    return;
                }
            }
        });
        Ok(Arc::new(Self {
            outbox,
            pending,
            opaque: AtomicI32::new(1),
        }))
    }

    pub async fn call(&self, mut cmd: RemotingCommand) -> anyhow::Result<RemotingCommand> {
        cmd.opaque = self.opaque.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(cmd.opaque, tx);
        self.outbox
            .send(cmd)
            .map_err(|_| anyhow::anyhow!("connection closed"))?;
        Ok(tokio::time::timeout(Duration::from_secs(10), rx).await??)
    }

    #[allow(dead_code)] // only transaction_bench answers oneway
    pub fn oneway(&self, mut cmd: RemotingCommand) -> anyhow::Result<()> {
        cmd.opaque = self.opaque.fetch_add(1, Ordering::Relaxed);
        cmd.mark_oneway();
        self.outbox
            .send(cmd)
            .map_err(|_| anyhow::anyhow!("connection closed"))
    }
}
