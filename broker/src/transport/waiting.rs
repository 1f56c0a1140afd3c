//! Requests of one connection that could not finish on their first poll: a send waiting
//! for the group commit or for its slave, a parked long-poll pull, an end-transaction
//! waiting for the transaction store.
//!
//! One task per connection drives all of them (a `FuturesUnordered`) and hands what
//! completed together to the writer as one batch. A group commit that acknowledges the
//! eight sends a client pipelined on one connection therefore wakes one task, once, and
//! costs the writer one channel message, where a task per request cost eight spawns,
//! eight cross-thread wake-ups and eight messages. Requests never wait for each other:
//! every request is polled when its own waker fired, also while the writer is backed up
//! (a peer that reads slowly): completed answers then wait in the driver's out-box, so
//! work a request does after its wait (an end-transaction's op record, a transaction
//! store rebuild other connections wait on) is never held up by this peer's socket.
//!
//! Bounds: every request handed here holds its in-flight permits
//! (`maxInFlightPerConnection` or `maxParkedPullsPerConnection`, and the bytes budgets)
//! until it completes, and its answer is charged to the connection's answer budget, so
//! the hand-off channel, the set and the out-box are bounded by them. The connection
//! closing drops every waiting request at once (a parked pull leaves its queue's
//! waiters), as does the reader going away. A request that panics is answered with
//! nothing (as a task of its own would have been) and the driver goes on; should the
//! driver be gone anyway, handing it a request closes the connection rather than
//! dropping the request silently.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

use std::panic::AssertUnwindSafe;

use futures::future::CatchUnwind;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A request's remaining work; `None` when it has nothing to answer (oneway).
pub(super) type Pending<T> = Pin<Box<dyn Future<Output = Option<T>> + Send>>;

/// A waiting request whose panic is caught.
type Guarded<T> = CatchUnwind<AssertUnwindSafe<Pending<T>>>;

/// Where the reader hands its waiting requests.
pub(super) struct Waiting<T> {
    tx: mpsc::UnboundedSender<Pending<T>>,
    close: CancellationToken,
}

impl<T: Send + 'static> Waiting<T> {
    /// Starts the connection's driver: completed requests' answers go to `answers` in
    /// batches (it takes at most `max_batch` completions per poll); it ends when `close`
    /// is cancelled, the writer is gone, or every [`Waiting`] handle is dropped.
    pub(super) fn spawn(
        answers: mpsc::Sender<Vec<T>>,
        close: CancellationToken,
        max_batch: usize,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(rx, answers, close.clone(), max_batch.max(1)));
        Self { tx, close }
    }

    /// Hands over a request; `false` when the driver has ended: the connection is then
    /// closed (the request is dropped with it, and the client sees the close instead
    /// of waiting for an answer that cannot come).
    pub(super) fn push(&self, request: Pending<T>) -> bool {
        let pushed = self.tx.send(request).is_ok();
        if !pushed {
            self.close.cancel();
        }
        pushed
    }
}

async fn drive<T>(
    mut incoming: mpsc::UnboundedReceiver<Pending<T>>,
    answers: mpsc::Sender<Vec<T>>,
    close: CancellationToken,
    max_batch: usize,
) {
    let mut waiting = FuturesUnordered::new();
    // Answers completed but not yet taken by the writer.
    let mut outbox: Vec<T> = Vec::new();
    // One registration with the token for the driver's life, not one per completion.
    let cancelled = close.cancelled();
    tokio::pin!(cancelled);
    loop {
        tokio::select! {
            _ = &mut cancelled => return,
            next = incoming.recv() => match next {
                Some(request) => waiting.push(AssertUnwindSafe(request).catch_unwind()),
                None => return,
            },
            batch = ready_batch(&mut waiting, max_batch), if !waiting.is_empty() => {
                outbox.extend(batch);
            }
            room = answers.reserve(), if !outbox.is_empty() => match room {
                Ok(room) => room.send(std::mem::take(&mut outbox)),
                Err(_) => return,
            },
        }
    }
}

/// Everything that has completed (at least one request, at most `max_batch` of them);
/// the batch is empty when only requests without an answer completed. Must not be
/// polled while `waiting` is empty (it would never wake).
fn ready_batch<T>(
    waiting: &mut FuturesUnordered<Guarded<T>>,
    max_batch: usize,
) -> impl Future<Output = Vec<T>> + '_ {
    poll_fn(move |cx| {
        let mut batch = Vec::new();
        let mut completed = false;
        while batch.len() < max_batch {
            match waiting.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(answer))) => {
                    completed = true;
                    batch.extend(answer);
                }
                // A panic in one request must not end the driver and with it every
                // other waiting request of the connection: it answers nothing, as a
                // task of its own would have.
                Poll::Ready(Some(Err(_))) => {
                    completed = true;
                    tracing::error!("a waiting request panicked; it is answered with nothing");
                }
                // Nothing more ready (its waker is registered), or the set is empty.
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if completed {
            Poll::Ready(batch)
        } else {
            Poll::Pending
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    fn waiting_on(rx: oneshot::Receiver<u32>) -> Pending<u32> {
        Box::pin(async move { rx.await.ok() })
    }

    /// Requests completed together reach the writer as one batch, in any order, and a
    /// request that is still waiting holds up none of them.
    #[tokio::test]
    async fn completions_are_batched_and_nothing_waits_for_a_slow_request() {
        let (answers_tx, mut answers) = mpsc::channel(16);
        let close = CancellationToken::new();
        let waiting = Waiting::spawn(answers_tx, close.clone(), 32);
        let mut senders = Vec::new();
        for _ in 0..5 {
            let (tx, rx) = oneshot::channel();
            assert!(waiting.push(waiting_on(rx)));
            senders.push(tx);
        }
        let slow = senders.pop().unwrap();
        // Let the driver register every request before they complete together.
        tokio::task::yield_now().await;
        for (i, tx) in senders.into_iter().enumerate() {
            tx.send(i as u32).unwrap();
        }
        let mut got = Vec::new();
        while got.len() < 4 {
            let batch = tokio::time::timeout(Duration::from_secs(5), answers.recv())
                .await
                .expect("the completed requests are answered")
                .unwrap();
            got.extend(batch);
        }
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2, 3]);
        slow.send(9).unwrap();
        let last = tokio::time::timeout(Duration::from_secs(5), answers.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(last, vec![9]);
    }

    /// Oneway requests (no answer) send nothing; every answer arrives once, however
    /// the completions were cut into batches.
    #[tokio::test]
    async fn oneway_requests_send_nothing_and_every_answer_arrives_once() {
        let (answers_tx, mut answers) = mpsc::channel(16);
        let waiting = Waiting::spawn(answers_tx, CancellationToken::new(), 2);
        assert!(waiting.push(Box::pin(async { None })));
        for i in 0..5u32 {
            assert!(waiting.push(Box::pin(async move { Some(i) })));
        }
        let mut got = Vec::new();
        while got.len() < 5 {
            let batch = tokio::time::timeout(Duration::from_secs(5), answers.recv())
                .await
                .unwrap()
                .unwrap();
            assert!(!batch.is_empty());
            got.extend(batch);
        }
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert!(answers.try_recv().is_err(), "nothing more");
    }

    /// A request that panics answers nothing and takes no other request with it; the
    /// driver goes on serving the connection.
    #[tokio::test]
    async fn a_panicking_request_answers_nothing_and_the_others_go_on() {
        let (answers_tx, mut answers) = mpsc::channel(16);
        let waiting = Waiting::spawn(answers_tx, CancellationToken::new(), 32);
        let (tx, rx) = oneshot::channel();
        assert!(waiting.push(waiting_on(rx)));
        let (boom_tx, boom_rx) = oneshot::channel::<u32>();
        assert!(waiting.push(Box::pin(async move {
            let _ = boom_rx.await;
            panic!("a handler bug");
        })));
        boom_tx.send(0).unwrap();
        tx.send(1).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), answers.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, vec![1]);
        assert!(waiting.push(Box::pin(async { Some(2) })));
        let got = tokio::time::timeout(Duration::from_secs(5), answers.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, vec![2]);
    }

    /// While the writer takes nothing (a peer that does not read), the driver still
    /// polls every request that woke: their work after the wait is never held up, and
    /// their answers are all delivered once the writer takes them again.
    #[tokio::test]
    async fn a_backed_up_writer_does_not_stop_requests_from_running() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        // Room for one batch only, and nobody reading at first.
        let (answers_tx, mut answers) = mpsc::channel(1);
        let waiting = Waiting::spawn(answers_tx, CancellationToken::new(), 1);
        let ran = Arc::new(AtomicUsize::new(0));
        for i in 0..10u32 {
            let ran = Arc::clone(&ran);
            assert!(waiting.push(Box::pin(async move {
                tokio::task::yield_now().await;
                ran.fetch_add(1, Ordering::SeqCst);
                Some(i)
            })));
        }
        tokio::time::timeout(Duration::from_secs(5), async {
            while ran.load(Ordering::SeqCst) < 10 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("every request ran although the writer took at most one batch");
        let mut got = Vec::new();
        while got.len() < 10 {
            let batch = tokio::time::timeout(Duration::from_secs(5), answers.recv())
                .await
                .unwrap()
                .unwrap();
            got.extend(batch);
        }
        got.sort_unstable();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }

    /// Closing the connection drops every waiting request (what a parked pull relies on
    /// to leave its queue) and ends the driver.
    #[tokio::test]
    async fn closing_drops_every_waiting_request() {
        let (answers_tx, _answers) = mpsc::channel(16);
        let close = CancellationToken::new();
        let waiting = Waiting::spawn(answers_tx, close.clone(), 32);
        let (dropped_tx, dropped_rx) = oneshot::channel::<()>();
        let (_never, rx) = oneshot::channel::<u32>();
        assert!(waiting.push(Box::pin(async move {
            let _tell_on_drop = dropped_tx;
            rx.await.ok()
        })));
        tokio::task::yield_now().await;
        close.cancel();
        // The sender inside the request is dropped with it.
        let dropped = tokio::time::timeout(Duration::from_secs(5), dropped_rx).await;
        assert!(matches!(dropped, Ok(Err(_))), "the request was dropped");
        // The driver is gone: later requests are refused.
        tokio::time::timeout(Duration::from_secs(5), async {
            while waiting.push(Box::pin(async { Some(1) })) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the driver ended");
    }

    /// Should the driver be gone while the connection is open, handing it a request
    /// closes the connection instead of leaving the client waiting for an answer.
    #[tokio::test]
    async fn a_request_the_driver_cannot_take_closes_the_connection() {
        let (answers_tx, answers) = mpsc::channel::<Vec<u32>>(16);
        let close = CancellationToken::new();
        let waiting = Waiting::spawn(answers_tx, close.clone(), 32);
        // The writer is gone: the driver ends at its first batch.
        drop(answers);
        assert!(waiting.push(Box::pin(async { Some(1) })));
        tokio::time::timeout(Duration::from_secs(5), async {
            while waiting.push(Box::pin(async { Some(1) })) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the driver ended");
        assert!(close.is_cancelled(), "the connection is closed");
    }
}
