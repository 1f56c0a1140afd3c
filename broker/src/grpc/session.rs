//! 5.x clients as the broker's client registry sees them. A 5.x client has no remoting
//! connection; each client id gets one registry [`Channel`] (its own connection id), so
//! it is listed, bounded and expired like a 4.x client, and what the broker pushes to
//! the channel (CHECK_TRANSACTION_STATE from the transaction checker) waits in the
//! channel's queue for the client's Telemetry stream to carry it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use protocol::RemotingCommand;
use security::conn_gate::ExemptSources;
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
    /// When a call last named this client.
    last_used: Mutex<Instant>,
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

/// The sessions by client id. Bounded by `grpcMaxConnections`, and per source address
/// by `grpcMaxConnectionsPerIp` (the sources in `connectionLimitExemptAddresses` aside):
/// the id is whatever `x-mq-client-id` says, so without a share one source naming made-up
/// ids took every session. Before a new one is refused, the sessions that are over are
/// dropped: those whose registry channel was closed (expired, or the client said
/// goodbye) and those without a Telemetry stream that no call named for
/// `channelExpiredTimeout` (a client that never joins a group has no membership to
/// expire; it comes back with its next call). That sweep scans every session, so it runs
/// at most once a second; the share is kept as a count per source.
///
/// A client id is whatever `x-mq-client-id` says, so a live session belongs to the
/// address that opened it: a call naming it from another address is refused rather than
/// allowed to use it (a Telemetry stream there would carry the owner's transaction
/// check-backs) or end it (NotifyClientTermination). 5.x clients talk to a broker from
/// one host; one that moved gets its id back once the old session expires.
pub struct Sessions {
    table: Mutex<Table>,
    limits: SessionLimits,
}

/// How often a full table may be scanned for sessions that are over: a refused call
/// costs a lookup, not a scan of every session under the lock.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The sessions, with a count per source address so the per-source share is decided
/// without a scan.
#[derive(Default)]
struct Table {
    by_client: HashMap<String, Arc<Session>>,
    per_ip: HashMap<IpAddr, usize>,
    /// When the table was last swept.
    swept: Option<Instant>,
}

impl Table {
    fn insert(&mut self, client_id: String, session: Arc<Session>) {
        *self.per_ip.entry(session.channel.peer.ip()).or_default() += 1;
        if let Some(old) = self.by_client.insert(client_id, session) {
            self.uncount(&old);
        }
    }

    fn remove(&mut self, client_id: &str) -> Option<Arc<Session>> {
        let s = self.by_client.remove(client_id)?;
        self.uncount(&s);
        Some(s)
    }

    fn uncount(&mut self, s: &Session) {
        let ip = s.channel.peer.ip();
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }

    fn sessions_of(&self, ip: IpAddr) -> usize {
        self.per_ip.get(&ip).copied().unwrap_or(0)
    }
}

/// What bounds [`Sessions`].
pub struct SessionLimits {
    /// `grpcMaxConnections`.
    pub cap: usize,
    /// `grpcMaxConnectionsPerIp` (0: no per-source share).
    pub per_source: usize,
    /// `connectionLimitExemptAddresses`.
    pub exempt: ExemptSources,
    /// `channelExpiredTimeout`.
    pub idle: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("too many 5.x clients on this broker (grpcMaxConnections = {0})")]
    Full(usize),
    #[error("too many 5.x clients from {ip} (grpcMaxConnectionsPerIp = {cap})")]
    SourceFull { ip: std::net::IpAddr, cap: usize },
    #[error("client id {client_id} is in use by a client at another address")]
    Foreign { client_id: String },
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            limits: SessionLimits {
                cap: limits.cap.max(1),
                ..limits
            },
        }
    }

    /// `client_id`'s session, opened (and its channel added to the registry) on first use.
    pub fn get_or_open(
        &self,
        broker: &Broker,
        client_id: &str,
        peer: SocketAddr,
    ) -> Result<Arc<Session>, SessionError> {
        let now = Instant::now();
        let mut map = self.table.lock();
        let mut gone = Vec::new();
        if let Some(s) = map.by_client.get(client_id) {
            if !s.channel.close.is_cancelled() {
                if s.channel.peer.ip() != peer.ip() {
                    return Err(SessionError::Foreign {
                        client_id: client_id.to_owned(),
                    });
                }
                *s.last_used.lock() = now;
                return Ok(Arc::clone(s));
            }
            gone.extend(map.remove(client_id));
        }
        let refused = match self.refusal(&map, peer) {
            Some(_)
                if map
                    .swept
                    .is_none_or(|at| now.duration_since(at) >= SWEEP_EVERY) =>
            {
                map.swept = Some(now);
                gone.extend(self.sweep(&mut map, now));
                self.refusal(&map, peer)
            }
            refused => refused,
        };
        let opened = match refused {
            Some(e) => Err(e),
            None => {
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
                    last_used: Mutex::new(now),
                    streams: AtomicUsize::new(0),
                    published: Mutex::new(Vec::new()),
                });
                map.insert(client_id.to_owned(), Arc::clone(&session));
                Ok(session)
            }
        };
        drop(map);
        for s in gone {
            end(broker, &s);
        }
        opened
    }

    /// Why a new session from `peer` does not fit now.
    fn refusal(&self, map: &Table, peer: SocketAddr) -> Option<SessionError> {
        let l = &self.limits;
        if map.by_client.len() >= l.cap {
            return Some(SessionError::Full(l.cap));
        }
        let ip = peer.ip();
        if l.per_source > 0 && !l.exempt.contains(ip) && map.sessions_of(ip) >= l.per_source {
            return Some(SessionError::SourceFull {
                ip,
                cap: l.per_source,
            });
        }
        None
    }

    /// Takes out the sessions that are over: closed, or idle without a Telemetry stream.
    fn sweep(&self, map: &mut Table, now: Instant) -> Vec<Arc<Session>> {
        let over = |s: &Session| {
            s.channel.close.is_cancelled()
                || (s.streams.load(Ordering::Acquire) == 0
                    && now.saturating_duration_since(*s.last_used.lock()) >= self.limits.idle)
        };
        let ids: Vec<String> = map
            .by_client
            .iter()
            .filter(|(_, s)| over(s))
            .map(|(id, _)| id.clone())
            .collect();
        ids.iter().filter_map(|id| map.remove(id)).collect()
    }

    /// NotifyClientTermination: the client leaves every group, as a closed 4.x
    /// connection does. A session opened from another address is not `peer`'s to end.
    pub fn close(&self, broker: &Broker, client_id: &str, peer: SocketAddr) {
        let s = {
            let mut map = self.table.lock();
            match map.by_client.get(client_id) {
                Some(s) if s.channel.peer.ip() == peer.ip() => map.remove(client_id),
                _ => None,
            }
        };
        if let Some(s) = s {
            end(broker, &s);
        }
    }
}

/// A session taken out of the map: its client leaves every group and its registry
/// channel goes, as a closed 4.x connection's does.
fn end(broker: &Broker, s: &Session) {
    s.channel.close.cancel();
    crate::services::membership::connection_closed(broker, s.channel.id);
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
            last_used: Mutex::new(Instant::now()),
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

    fn sessions(cap: usize, per_source: usize, idle: Duration) -> Sessions {
        Sessions::new(SessionLimits {
            cap,
            per_source,
            exempt: "10.9.9.9".parse().unwrap(),
            idle,
        })
    }

    #[test]
    fn one_source_opens_its_share_and_idle_sessions_make_room() {
        let dir = tempfile::tempdir().unwrap();
        let b = crate::test_fixture::broker(dir.path(), "");
        let s = sessions(4, 2, Duration::from_secs(3600));
        let a: SocketAddr = "10.0.0.1:1".parse().unwrap();
        s.get_or_open(&b, "a1", a).unwrap();
        s.get_or_open(&b, "a2", a).unwrap();
        assert!(matches!(
            s.get_or_open(&b, "a3", a),
            Err(SessionError::SourceFull { cap: 2, .. })
        ));
        // Its own sessions are still its to use.
        s.get_or_open(&b, "a1", a).unwrap();
        // An exempt source is not held to the share.
        let nat: SocketAddr = "10.9.9.9:1".parse().unwrap();
        s.get_or_open(&b, "n1", nat).unwrap();
        s.get_or_open(&b, "n2", nat).unwrap();
        assert!(matches!(
            s.get_or_open(&b, "x", "10.0.0.2:1".parse().unwrap()),
            Err(SessionError::Full(4))
        ));
        assert_eq!(b.clients.connection_count(), 4);

        // Idle sessions without a Telemetry stream give way; one with a stream stays,
        // and the registry channels of those dropped go with them.
        let s = sessions(2, 0, Duration::ZERO);
        let idle = s.get_or_open(&b, "idle", a).unwrap();
        let streaming = s.get_or_open(&b, "streaming", a).unwrap();
        let _slot = StreamSlot::take(&streaming, 1).unwrap();
        s.get_or_open(&b, "new", a).unwrap();
        assert!(idle.channel.close.is_cancelled());
        assert!(!streaming.channel.close.is_cancelled());
        assert!(b.clients.channel(idle.channel.id).is_none());
        assert_eq!(b.clients.connection_count(), 4 + 2);
    }

    #[test]
    fn the_count_per_source_follows_every_way_a_session_goes() {
        let dir = tempfile::tempdir().unwrap();
        let b = crate::test_fixture::broker(dir.path(), "");
        let s = sessions(8, 2, Duration::from_secs(3600));
        let a: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let count = || s.table.lock().sessions_of(a.ip());
        s.get_or_open(&b, "a1", a).unwrap();
        let a2 = s.get_or_open(&b, "a2", a).unwrap();
        assert_eq!(count(), 2);
        // Said goodbye: its place is free at once.
        s.close(&b, "a1", a);
        assert_eq!(count(), 1);
        s.get_or_open(&b, "a3", a).unwrap();
        // Expired in the registry: reopened under the same id, counted once.
        a2.channel.close.cancel();
        s.get_or_open(&b, "a2", a).unwrap();
        assert_eq!(count(), 2);
        assert!(matches!(
            s.get_or_open(&b, "a4", a),
            Err(SessionError::SourceFull { cap: 2, .. })
        ));
        assert_eq!(s.table.lock().by_client.len(), 2);
    }
}
