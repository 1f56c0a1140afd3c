//! ReceiveMessage answers under the byte budgets the remoting port's answers have
//! (`maxInFlightBytesPerConnection`, `maxInFlightBytesTotal`) and its write timeout
//! (`writeTimeoutMillis`).
//!
//! A receive's messages are read from the store and held until HTTP/2 flow control lets
//! them out. A client that never reads its answers (a zero window) would have the broker
//! hold every message it popped, call after call, for as long as the connection lives.
//! So an answer's bytes are charged to the connection and the broker until the answer is
//! gone, a receive on a connection (or broker) over its budget is refused, and an answer
//! the client does not take for `writeTimeoutMillis` is dropped: its call ends with
//! DEADLINE_EXCEEDED, and its messages are delivered again once their invisible time
//! has passed, as those of a consumer that died.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use grpc_api::v2::ReceiveMessageResponse;
use grpc_api::v2::receive_message_response::Content;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tonic::Status;

use crate::in_flight::{InFlightLimit, InFlightPermit};
use crate::metrics::limits::Refusals;
use crate::services::Broker;

/// Bytes an answer costs besides its messages' bodies and properties.
const ANSWER_OVERHEAD: usize = 512;

/// The budget a receive on `connection` would exceed now, if any (its key).
pub fn over_budget(broker: &Broker, connection: Option<&InFlightLimit>) -> Option<&'static str> {
    if connection.is_some_and(InFlightLimit::is_over) {
        return Some("maxInFlightBytesPerConnection");
    }
    broker
        .in_flight_bytes
        .is_over()
        .then_some("maxInFlightBytesTotal")
}

/// The bytes `answer` holds.
fn weight(answer: &ReceiveMessageResponse) -> usize {
    ANSWER_OVERHEAD
        + match &answer.content {
            Some(Content::Message(m)) => {
                m.body.len()
                    + m.user_properties
                        .iter()
                        .map(|(k, v)| k.len() + v.len())
                        .sum::<usize>()
            }
            _ => 0,
        }
}

/// What a charged answer holds until it is taken or dropped.
struct Held {
    items: VecDeque<ReceiveMessageResponse>,
    permits: Vec<InFlightPermit>,
    /// When the client last took an item (or the answer was made).
    progress: Instant,
    expired: bool,
}

/// `answers` as the call's response stream, charged to `connection` and the broker's
/// total whether they fit or not (the messages are popped already; what the budget
/// withholds is the next receive).
pub fn charged(
    broker: &Broker,
    connection: Option<Arc<InFlightLimit>>,
    answers: Vec<ReceiveMessageResponse>,
) -> Pin<Box<dyn Stream<Item = Result<ReceiveMessageResponse, Status>> + Send>> {
    let bytes: usize = answers.iter().map(weight).sum();
    let mut permits = vec![broker.in_flight_bytes.acquire_units(bytes)];
    permits.extend(connection.map(|c| c.acquire_units(bytes)));
    let held = Arc::new(Mutex::new(Held {
        items: answers.into(),
        permits,
        progress: Instant::now(),
        expired: false,
    }));
    let timeout = broker.config.broker.write_timeout();
    let done = CancellationToken::new();
    let refusals = broker.metrics.limits.refusals.clone();
    tokio::spawn(watch(Arc::clone(&held), timeout, done.clone(), refusals));
    Box::pin(Answer {
        held,
        _done: done.drop_guard(),
        timeout,
    })
}

/// Drops what `held` holds once the client has taken nothing for `timeout`.
async fn watch(
    held: Arc<Mutex<Held>>,
    timeout: Duration,
    done: CancellationToken,
    refusals: Refusals,
) {
    loop {
        let due = held.lock().progress + timeout;
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep_until(due) => {}
        }
        let mut h = held.lock();
        if h.items.is_empty() {
            return;
        }
        if h.progress + timeout <= Instant::now() {
            h.items.clear();
            h.permits.clear();
            h.expired = true;
            refusals.count("writeTimeoutMillis");
            return;
        }
    }
}

struct Answer {
    held: Arc<Mutex<Held>>,
    _done: DropGuard,
    timeout: Duration,
}

impl Stream for Answer {
    type Item = Result<ReceiveMessageResponse, Status>;

    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut h = self.held.lock();
        if h.expired {
            h.expired = false;
            return Poll::Ready(Some(Err(Status::deadline_exceeded(format!(
                "the answer was not read within {} ms (writeTimeoutMillis); its messages \
                 are delivered again after their invisible time",
                self.timeout.as_millis()
            )))));
        }
        let next = h.items.pop_front();
        h.progress = Instant::now();
        if h.items.is_empty() {
            h.permits.clear();
        }
        Poll::Ready(next.map(Ok))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use grpc_api::v2::Message;

    fn message(body: usize) -> ReceiveMessageResponse {
        ReceiveMessageResponse {
            content: Some(Content::Message(Message {
                body: vec![0; body],
                ..Default::default()
            })),
        }
    }

    #[tokio::test]
    async fn an_answer_holds_its_bytes_until_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let b = crate::test_fixture::broker(dir.path(), "maxInFlightBytesTotal=1000\n");
        let conn = InFlightLimit::new(1000);
        let mut answer = charged(
            &b,
            Some(Arc::clone(&conn)),
            vec![message(600), message(300)],
        );
        let held = 600 + 300 + 2 * ANSWER_OVERHEAD;
        assert_eq!((conn.in_use(), b.in_flight_bytes.in_use()), (held, held));
        // Over the budgets now: the next receive is refused.
        assert_eq!(
            over_budget(&b, Some(&conn)),
            Some("maxInFlightBytesPerConnection")
        );
        assert_eq!(over_budget(&b, None), Some("maxInFlightBytesTotal"));
        assert!(answer.next().await.is_some_and(|r| r.is_ok()));
        assert!(answer.next().await.is_some_and(|r| r.is_ok()));
        // Everything read: the bytes are free.
        assert_eq!((conn.in_use(), b.in_flight_bytes.in_use()), (0, 0));
        assert!(answer.next().await.is_none());
        assert_eq!(over_budget(&b, Some(&conn)), None);
    }
}
