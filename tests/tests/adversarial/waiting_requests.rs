//! Requests that cannot finish on their first poll (a SYNC_FLUSH send waiting for the
//! group commit, a SYNC_MASTER send waiting for its slave, a parked long-poll pull) are
//! driven per connection by one task (`broker/src/transport/waiting.rs`). These attacks
//! go at that driver with raw frames: pipelines cut mid-flight, a peer that never reads
//! while its parked pulls are all woken at once, oneway requests that wait, instant and
//! waiting requests mixed under hostile opaques, a stalled slave holding every permit,
//! and a shutdown with waiting requests everywhere. Besides the suite's three checks
//! (the broker lives, other clients are served, memory stays bounded), each checks what
//! it attacks: every opaque answered exactly once with its own result, no permit or
//! parked pull left counted once its connection is gone, no SYNC_FLUSH send acknowledged
//! before it is in the log, and no client's waiting requests holding up another's.

mod parked;
mod pipelines;
mod slave;
mod slow_peers;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use e2e::Client;
use e2e::broker_harness::{
    BrokerProcess, TempBroker, create_topic_request, decode_records, ha_status, pull, send_v2,
    with_fields,
};
use e2e::ports;
use e2e::wait::{eventually, runtime};
use futures::StreamExt;
use protocol::code::{request, response};
use protocol::{RemotingCodec, RemotingCommand};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::codec::{Encoder, FramedRead};

use crate::common::{heartbeat, metric, victim_is_served};

const PARKED: &str = "rocketmq_broker_parked_pulls";
const CONNECTIONS: &str = "rocketmq_broker_connections";
const WRITE_TIMEOUTS: &str = "rocketmq_broker_write_timeouts_total";

/// One raw remoting connection: frames written as given (opaques chosen by the test),
/// answers read as they come.
struct Raw {
    read: FramedRead<OwnedReadHalf, RemotingCodec>,
    write: OwnedWriteHalf,
}

impl Raw {
    /// Connects; `rst` makes dropping the connection a reset (SO_LINGER 0) instead of
    /// an orderly close; `window` shrinks the receive buffer (a peer that reads slowly).
    async fn connect(port: u16, rst: bool, window: Option<u32>) -> Self {
        let socket = TcpSocket::new_v4().unwrap();
        if let Some(w) = window {
            socket.set_recv_buffer_size(w).unwrap();
        }
        let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
        stream.set_nodelay(true).unwrap();
        if rst {
            stream.set_zero_linger().unwrap();
        }
        let (read, write) = stream.into_split();
        Self {
            read: FramedRead::new(read, RemotingCodec::default()),
            write,
        }
    }

    async fn send(&mut self, requests: &[(i32, RemotingCommand)]) {
        self.write.write_all(&encode(requests)).await.unwrap();
    }

    /// The next response (requests the broker pushes are skipped); `None` when none
    /// comes within `within` or the connection ends.
    async fn next_answer(&mut self, within: Duration) -> Option<RemotingCommand> {
        tokio::time::timeout(within, async {
            loop {
                match self.read.next().await {
                    Some(Ok(cmd)) if cmd.is_response() => return Some(cmd),
                    Some(Ok(_)) => continue,
                    _ => return None,
                }
            }
        })
        .await
        .ok()
        .flatten()
    }

    /// `n` responses; panics naming `what` when they do not all come within `within`.
    async fn answers(&mut self, n: usize, within: Duration, what: &str) -> Vec<RemotingCommand> {
        let deadline = Instant::now() + within;
        let mut got = Vec::with_capacity(n);
        while got.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_answer(left).await {
                Some(a) => got.push(a),
                None => panic!("{what}: {} of {n} answers came", got.len()),
            }
        }
        got
    }
}

fn encode(requests: &[(i32, RemotingCommand)]) -> BytesMut {
    let mut codec = RemotingCodec::default();
    let mut out = BytesMut::new();
    for (opaque, r) in requests {
        let mut r = r.clone();
        r.opaque = *opaque;
        codec.encode(r, &mut out).expect("encode");
    }
    out
}

fn oneway(mut r: RemotingCommand) -> RemotingCommand {
    r.mark_oneway();
    r
}

/// A pull that parks: `topic` has no message at `offset`, the hold is long.
fn parked_pull(group: &str, topic: &str, queue_id: i32, hold_ms: i64) -> RemotingCommand {
    pull(group, topic, queue_id, 0, 32, Some(hold_ms), "*")
}

fn max_offset_request(topic: &str, queue_id: i32) -> RemotingCommand {
    with_fields(
        request::GET_MAX_OFFSET,
        &[
            ("topic", topic.to_owned()),
            ("queueId", queue_id.to_string()),
        ],
    )
}

/// The CommitLog offset a send answer's message id names.
fn offset_of(answer: &RemotingCommand) -> i64 {
    let id = answer.ext_fields.get("msgId").expect("msgId");
    i64::from_str_radix(&id[id.len() - 16..], 16).expect("hex offset")
}

/// The bodies stored at `offsets` (VIEW_MESSAGE_BY_ID), `None` where nothing is stored.
async fn bodies_at(c: &Client, offsets: &[i64]) -> Vec<Option<Vec<u8>>> {
    let mut out = Vec::with_capacity(offsets.len());
    for chunk in offsets.chunks(128) {
        let views = chunk
            .iter()
            .map(|o| with_fields(request::VIEW_MESSAGE_BY_ID, &[("offset", o.to_string())]))
            .collect();
        for r in c.pipeline(views).await.expect("views") {
            out.push((r.code == response::SUCCESS).then(|| decode_records(&r.body).remove(0).body));
        }
    }
    out
}

/// Every answer's opaque is one of `expected` and none comes twice.
fn assert_each_once(answers: &[RemotingCommand], expected: &HashSet<i32>, what: &str) {
    let mut seen = HashSet::new();
    for a in answers {
        assert!(
            expected.contains(&a.opaque),
            "{what}: an answer with an opaque nobody asked for: {} (code {})",
            a.opaque,
            a.code
        );
        assert!(
            seen.insert(a.opaque),
            "{what}: opaque {} answered twice",
            a.opaque
        );
    }
}

/// Creates each `(topic, queues)` through `admin`.
async fn create_topics(admin: &Client, topics: &[(&str, i32)]) {
    for &(topic, queues) in topics {
        let r = admin
            .request(create_topic_request(topic, queues))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    }
}

/// Fails when the broker's anonymous memory grew by `limit_mib` or more since
/// `baseline` (KiB, from `anon_rss_kib`).
fn assert_memory_within(broker: &BrokerProcess, baseline: u64, limit_mib: u64) {
    let grown_mib = broker.anon_rss_kib().expect("rss").saturating_sub(baseline) / 1024;
    assert!(
        grown_mib < limit_mib,
        "resident memory grew {grown_mib} MiB"
    );
}

async fn settled(http_port: u16, connections: f64) {
    eventually(
        Duration::from_secs(10),
        "every parked pull freed",
        || async { metric(http_port, PARKED).await == 0.0 },
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "the attackers' connections gone",
        || async { metric(http_port, CONNECTIONS).await == connections },
    )
    .await;
}

/// One attacker: 8 pulls parked for a minute and 2,000 pipelined SYNC_FLUSH sends on one
/// connection, `read` of the sends' answers read (each checked), then the connection
/// reset (`rst`) or closed while the rest wait for their group commit.
async fn cut_mid_flight(port: u16, read: usize, rst: bool) {
    let Raw {
        read: mut answers,
        write,
    } = Raw::connect(port, rst, None).await;
    let mut requests: Vec<(i32, RemotingCommand)> = (0..8)
        .map(|i| (1_000_000 + i, parked_pull("G_CUT", "CutPark", 0, 60_000)))
        .collect();
    let body = vec![b's'; 200];
    requests.extend((0..2000).map(|i| (i + 1, send_v2("CutMid", i % 4, &body, ""))));
    let bytes = encode(&requests);
    let writer = tokio::spawn(async move {
        let mut write = write;
        let _ = write.write_all(&bytes).await;
        write
    });
    let mut seen = HashSet::new();
    while seen.len() < read {
        let a = tokio::time::timeout(Duration::from_secs(10), answers.next())
            .await
            .expect("answers before the cut")
            .expect("connection open")
            .expect("a frame");
        if !a.is_response() {
            continue;
        }
        assert!(
            (1..=2000).contains(&a.opaque),
            "only sends answer before the cut: opaque {}",
            a.opaque
        );
        // Over `maxInFlightPerConnection` (256 waiting) a send is refused at once.
        assert!(
            [response::SUCCESS, response::SYSTEM_BUSY].contains(&a.code),
            "{} {:?}",
            a.code,
            a.remark
        );
        assert!(seen.insert(a.opaque), "opaque {} answered twice", a.opaque);
    }
    let mut write = writer.await.unwrap();
    if !rst {
        let _ = write.shutdown().await;
    }
    drop((answers, write));
}
