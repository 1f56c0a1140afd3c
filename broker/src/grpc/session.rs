//! 5.x clients as the broker's client registry sees them. A 5.x client has no remoting
//! connection; each client id gets one registry [`Channel`] (its own connection id), so
//! it is listed, bounded and expired like a 4.x client, and what the broker pushes to
//! the channel (CHECK_TRANSACTION_STATE from the transaction checker) waits in the
//! channel's queue for the client's Telemetry stream to carry it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use protocol::RemotingCommand;
use tokio::sync::mpsc;

use crate::services::Broker;
use crate::services::clients::{Channel, Conn};

/// Pushes queued for a client whose Telemetry stream is not reading (the checker drops
/// a check-back that does not fit and asks again later).
const PUSH_QUEUE: usize = 64;

/// Publishing topics a session keeps from its Settings: the producer groups one 5.x
/// client is registered under (see `transaction::producer_group`).
pub const MAX_PUBLISHED_TOPICS: usize = 64;

pub struct Session {
    pub channel: Channel,
    /// The push queue's receiving end, held by one Telemetry stream at a time.
    pub pushes: tokio::sync::Mutex<mpsc::Receiver<RemotingCommand>>,
    /// Telemetry streams open now (`grpcMaxTelemetryStreamsPerClient`).
    pub streams: AtomicUsize,
    /// The topics the client's last Settings publishes to (at most
    /// [`MAX_PUBLISHED_TOPICS`] valid names): all the broker needs of the Settings after
    /// answering them. Keeping the whole Settings would let each client id hold a message
    /// as large as the decode limit for as long as its session lives.
    pub published: Mutex<Vec<String>>,
}

impl Session {
    /// Remembers what `settings` says the client publishes to.
    pub fn remember(&self, settings: &grpc_api::v2::Settings) {
        let topics = match &settings.pub_sub {
            Some(grpc_api::v2::settings::PubSub::Publishing(p)) => p
                .topics
                .iter()
                .map(|t| t.name.as_str())
                .filter(|t| !t.is_empty() && t.len() <= protocol::message::record::MAX_TOPIC_LEN)
                .take(MAX_PUBLISHED_TOPICS)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        *self.published.lock() = topics;
    }

    pub fn conn(&self) -> Conn {
        Conn {
            id: self.channel.id,
            peer: self.channel.peer,
            channel: self.channel.clone(),
        }
    }
}

/// The sessions by client id. Bounded by `grpcMaxConnections`: a session whose registry
/// channel was closed (expired, or the client said goodbye) is dropped before a new one
/// is refused.
///
/// A client id is whatever `x-mq-client-id` says, so a live session belongs to the
/// address that opened it: a call naming it from another address is refused rather than
/// allowed to use it (a Telemetry stream there would carry the owner's transaction
/// check-backs) or end it (NotifyClientTermination). 5.x clients talk to a broker from
/// one host; one that moved gets its id back once the old session expires.
pub struct Sessions {
    by_client: Mutex<HashMap<String, Arc<Session>>>,
    cap: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("too many 5.x clients on this broker (grpcMaxConnections = {0})")]
    Full(usize),
    #[error("client id {client_id} is in use by a client at another address")]
    Foreign { client_id: String },
}

impl Sessions {
    pub fn new(cap: usize) -> Self {
        Self {
            by_client: Mutex::new(HashMap::new()),
            cap: cap.max(1),
        }
    }

    /// `client_id`'s session, opened (and its channel added to the registry) on first use.
    pub fn get_or_open(
        &self,
        broker: &Broker,
        client_id: &str,
        peer: SocketAddr,
    ) -> Result<Arc<Session>, SessionError> {
        let mut map = self.by_client.lock();
        if let Some(s) = map.get(client_id)
            && !s.channel.close.is_cancelled()
        {
            if s.channel.peer.ip() != peer.ip() {
                return Err(SessionError::Foreign {
                    client_id: client_id.to_owned(),
                });
            }
            return Ok(Arc::clone(s));
        }
        if map.len() >= self.cap {
            map.retain(|_, s| !s.channel.close.is_cancelled());
            if map.len() >= self.cap {
                return Err(SessionError::Full(self.cap));
            }
        }
        let (tx, rx) = mpsc::channel(PUSH_QUEUE);
        let channel = Channel {
            id: broker.next_conn_id(),
            peer,
            outbound: tx,
            close: broker.shutdown.child_token(),
        };
        broker.clients.add_channel(channel.clone());
        let session = Arc::new(Session {
            channel,
            pushes: tokio::sync::Mutex::new(rx),
            streams: AtomicUsize::new(0),
            published: Mutex::new(Vec::new()),
        });
        map.insert(client_id.to_owned(), Arc::clone(&session));
        Ok(session)
    }

    /// NotifyClientTermination: the client leaves every group, as a closed 4.x
    /// connection does. A session opened from another address is not `peer`'s to end.
    pub fn close(&self, broker: &Broker, client_id: &str, peer: SocketAddr) {
        let s = {
            let mut map = self.by_client.lock();
            match map.get(client_id) {
                Some(s) if s.channel.peer.ip() == peer.ip() => map.remove(client_id),
                _ => None,
            }
        };
        let Some(s) = s else {
            return;
        };
        s.channel.close.cancel();
        crate::services::membership::connection_closed(broker, s.channel.id);
    }
}

/// A Telemetry stream's hold on its session's stream count.
pub struct StreamSlot(pub Arc<Session>);

impl StreamSlot {
    /// One more stream for `session`, unless it holds `max` already.
    pub fn take(session: &Arc<Session>, max: usize) -> Option<Self> {
        let prev = session.streams.fetch_add(1, Ordering::AcqRel);
        if prev >= max {
            session.streams.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Self(Arc::clone(session)))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Arc<Session> {
        let (tx, rx) = mpsc::channel(1);
        Arc::new(Session {
            channel: Channel {
                id: 1,
                peer: "127.0.0.1:1".parse().unwrap(),
                outbound: tx,
                close: tokio_util::sync::CancellationToken::new(),
            },
            pushes: tokio::sync::Mutex::new(rx),
            streams: AtomicUsize::new(0),
            published: Mutex::new(Vec::new()),
        })
    }

    #[test]
    fn telemetry_streams_per_client_are_bounded_and_given_back() {
        let s = session();
        let first = StreamSlot::take(&s, 2).expect("first");
        let second = StreamSlot::take(&s, 2).expect("second");
        assert!(StreamSlot::take(&s, 2).is_none(), "over the bound");
        assert_eq!(s.streams.load(Ordering::Acquire), 2);
        drop(first);
        let third = StreamSlot::take(&s, 2).expect("a closed stream frees its slot");
        drop((second, third));
        assert_eq!(s.streams.load(Ordering::Acquire), 0);
    }
}
