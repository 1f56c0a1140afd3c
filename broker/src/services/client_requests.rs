//! Requests the broker sends to its clients over their own connections and the answers
//! it waits for (`RemotingServer.invokeSync` / `invokeOneway` on a client channel in
//! 4.9's `Broker2Client`): GET_CONSUMER_STATUS_FROM_CLIENT waits for the client's answer,
//! RESET_CONSUMER_CLIENT_OFFSET is oneway. Answers are matched by connection and opaque;
//! one that comes after its caller gave up is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use protocol::RemotingCommand;
use tokio::sync::oneshot;

use crate::services::clients::{Channel, ConnId};

/// Most requests awaiting a client's answer at once; more are refused, not queued.
pub const MAX_PENDING: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum ClientRequestError {
    #[error("client {peer} connection is closed or its write queue is full")]
    NotSent { peer: std::net::SocketAddr },
    #[error("client {peer} did not answer within {timeout:?}")]
    Timeout {
        peer: std::net::SocketAddr,
        timeout: Duration,
    },
    #[error("too many requests to clients awaiting an answer ({MAX_PENDING})")]
    TooMany,
}

#[derive(Default)]
pub struct ClientRequests {
    next_opaque: AtomicI32,
    pending: Mutex<HashMap<(ConnId, i32), oneshot::Sender<RemotingCommand>>>,
}

/// Removes the pending entry however the wait ends (answer, timeout, caller dropped).
struct PendingGuard<'a> {
    owner: &'a ClientRequests,
    key: (ConnId, i32),
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.owner.pending.lock().remove(&self.key);
    }
}

impl ClientRequests {
    fn opaque(&self) -> i32 {
        // Positive and distinct from nothing the client sends: clients match answers to
        // their own requests, and a broker request carries the broker's opaque.
        self.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX
    }

    /// Sends `request` to the client and waits up to `timeout` for its answer.
    pub async fn invoke(
        &self,
        channel: &Channel,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientRequestError> {
        request.opaque = self.opaque();
        let key = (channel.id, request.opaque);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock();
            if pending.len() >= MAX_PENDING {
                return Err(ClientRequestError::TooMany);
            }
            pending.insert(key, tx);
        }
        let _guard = PendingGuard { owner: self, key };
        if channel.outbound.try_send(request).is_err() {
            return Err(ClientRequestError::NotSent { peer: channel.peer });
        }
        let timed_out = || ClientRequestError::Timeout {
            peer: channel.peer,
            timeout,
        };
        tokio::select! {
            answer = rx => answer.map_err(|_| timed_out()),
            _ = channel.close.cancelled() => Err(ClientRequestError::NotSent { peer: channel.peer }),
            _ = tokio::time::sleep(timeout) => Err(timed_out()),
        }
    }

    /// Sends a oneway request to the client.
    pub fn oneway(
        &self,
        channel: &Channel,
        mut request: RemotingCommand,
    ) -> Result<(), ClientRequestError> {
        request.opaque = self.opaque();
        request.mark_oneway();
        channel
            .outbound
            .try_send(request)
            .map_err(|_| ClientRequestError::NotSent { peer: channel.peer })
    }

    /// A response read from connection `conn`; true when a caller was waiting for it.
    pub fn on_response(&self, conn: ConnId, response: RemotingCommand) -> bool {
        match self.pending.lock().remove(&(conn, response.opaque)) {
            Some(tx) => tx.send(response).is_ok(),
            None => false,
        }
    }

    pub fn pending(&self) -> usize {
        self.pending.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use protocol::code::response;
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn channel(id: ConnId) -> (Channel, mpsc::Receiver<RemotingCommand>) {
        let (tx, rx) = mpsc::channel(4);
        let ch = Channel {
            id,
            peer: SocketAddr::from(([127, 0, 0, 1], 4000)),
            outbound: tx,
            close: CancellationToken::new(),
        };
        (ch, rx)
    }

    #[tokio::test]
    async fn answers_match_by_connection_and_opaque_and_timeouts_clean_up() {
        let requests = ClientRequests::default();
        let (ch, mut rx) = channel(7);
        let call = requests.invoke(
            &ch,
            RemotingCommand::bare_request(221),
            Duration::from_secs(5),
        );
        let answer = async {
            let sent = rx.recv().await.unwrap();
            // The same opaque on another connection is not the answer.
            let mut wrong = RemotingCommand::response_to(&sent, response::SUCCESS);
            assert!(!requests.on_response(8, wrong.clone()));
            wrong.remark = Some("right".into());
            assert!(requests.on_response(7, wrong));
        };
        let (got, ()) = tokio::join!(call, answer);
        assert_eq!(got.unwrap().remark.as_deref(), Some("right"));
        assert_eq!(requests.pending(), 0);

        let timed_out = requests
            .invoke(
                &ch,
                RemotingCommand::bare_request(221),
                Duration::from_millis(20),
            )
            .await;
        assert!(matches!(timed_out, Err(ClientRequestError::Timeout { .. })));
        assert_eq!(requests.pending(), 0);

        drop(rx);
        let closed = requests
            .invoke(
                &ch,
                RemotingCommand::bare_request(221),
                Duration::from_secs(5),
            )
            .await;
        assert!(matches!(closed, Err(ClientRequestError::NotSent { .. })));
        assert_eq!(requests.pending(), 0);
    }
}
