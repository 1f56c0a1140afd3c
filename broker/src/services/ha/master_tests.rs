use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

use super::*;
use crate::config::Config;
use crate::services::ha::HaSettings;

/// A SYNC_MASTER's HA service over a store in `dir` (`extra` config lines) holding
/// `count` messages with bodies padded by `padding` bytes; and the store's max offset.
async fn master_with_messages(
    dir: &std::path::Path,
    extra: &str,
    count: usize,
    padding: usize,
) -> (Arc<Ha>, i64) {
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog=8388608\nhaListenPort=0\nbrokerRole=SYNC_MASTER\n{extra}\n",
        dir.display()
    );
    let config = Config::from_properties(&text).unwrap();
    let store = Arc::new(store::MessageStore::open(config.store.clone()).unwrap());
    let ha = Ha::new(
        HaSettings::from_config(&config),
        Arc::clone(&store) as _,
        None,
    );
    for i in 0..count {
        let body = format!("m{i}-{}", "x".repeat(padding));
        let m = crate::test_fixture::message("T", 0, &body, String::new());
        store.put_message(&m).await;
    }
    let max = ha.store.max_phy_offset().0;
    (ha, max)
}

/// A slave socket that checks, at every write, that the master already counts what it is
/// writing as streamed: the slave could ack those bytes the moment they land.
struct CheckingSocket {
    streamed: Arc<AtomicI64>,
    /// Offset the next frame starts at.
    at: i64,
    frames: usize,
    violations: Vec<String>,
}

impl AsyncWrite for CheckingSocket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        // One frame per write: offset (8), size (4), body.
        let size = i32::from_be_bytes(buf[8..12].try_into().unwrap()) as i64;
        let end = self.at + size;
        let counted = self.streamed.load(Ordering::Acquire);
        if counted < end {
            let v = format!("frame up to {end} written while {counted} was counted");
            self.violations.push(v);
        }
        self.at = end;
        self.frames += 1;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Under load an honest slave's ack could be read before the transfer task had counted
/// the bytes it had just written, and the connection was dropped as forged (a reconnect
/// a second in the failover suite's logs).
#[tokio::test]
async fn bytes_count_as_streamed_before_they_reach_the_slave() {
    let dir = tempfile::tempdir().unwrap();
    let (ha, max) = master_with_messages(dir.path(), "haTransferBatchSize=1024", 20, 200).await;
    let streamed = Arc::new(AtomicI64::new(0));
    let socket = Arc::new(parking_lot::Mutex::new(None::<CheckingSocket>));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (ha, streamed, cancel) = (Arc::clone(&ha), Arc::clone(&streamed), cancel.clone());
        let socket = Arc::clone(&socket);
        async move {
            let mut wr = CheckingSocket {
                streamed: Arc::clone(&streamed),
                at: 0,
                frames: 0,
                violations: Vec::new(),
            };
            let mut sink = Pin::new(&mut wr);
            transfer(ha, &mut sink, PhysicalOffset(0), streamed, cancel).await;
            *socket.lock() = Some(wr);
        }
    });
    while streamed.load(Ordering::Acquire) < max {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    cancel.cancel();
    task.await.unwrap();
    let wr = socket.lock().take().unwrap();
    assert!(wr.frames > 1, "the log went out in several frames");
    assert_eq!(wr.violations, Vec::<String>::new());
}

/// A stream that holds bytes back until flushed (TLS records the socket did not take at
/// once; here a `BufWriter` larger than the whole log) still delivers every frame.
#[tokio::test]
async fn every_frame_is_flushed_to_the_slave() {
    use tokio::io::AsyncReadExt;

    let dir = tempfile::tempdir().unwrap();
    let (ha, max) = master_with_messages(dir.path(), "", 5, 0).await;
    let (master_end, mut slave_end) = tokio::io::duplex(1 << 20);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(transfer(
        Arc::clone(&ha),
        tokio::io::BufWriter::with_capacity(1 << 20, master_end),
        PhysicalOffset(0),
        Arc::new(AtomicI64::new(0)),
        cancel.clone(),
    ));
    // Frames: offset (8), size (4), body; the bodies add up to the whole log.
    let mut received = 0i64;
    while received < max {
        let header = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            let _offset = slave_end.read_i64().await.unwrap();
            slave_end.read_i32().await.unwrap()
        })
        .await
        .expect("frames stayed in the master's stream");
        let mut body = vec![0; header as usize];
        slave_end.read_exact(&mut body).await.unwrap();
        received += i64::from(header);
    }
    assert_eq!(received, max);
    cancel.cancel();
    task.await.unwrap();
}
