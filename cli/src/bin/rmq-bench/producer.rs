//! Producer mode. Senders claim message slots from one shared [`Plan`]; with a fixed
//! rate each slot has a scheduled time and latency is measured from it (open loop: a
//! stalled broker shows up as latency, not as a lower send rate — no coordinated
//! omission). Without a rate a slot is due when it is claimed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use protocol::body::TopicConfig;
use remoting::client::message::OutgoingMessage;
use remoting::client::send::{SendStatus, SendTo};
use remoting::client::{Client, Peer};

use crate::args::{ProducerArgs, RunArgs, SendMode};
use crate::grpc::GrpcLink;
use crate::payload;
use crate::stats::Stats;

/// Write permission bit of a queue's perm (`PermName.PERM_WRITE`).
const PERM_WRITE: i32 = 0x2;

/// One claim: `count` messages starting at sequence `seq`, due at `due`.
#[derive(Debug, Clone, Copy)]
struct Slot {
    seq: u64,
    count: u64,
    due: Instant,
}

struct Plan {
    next: AtomicU64,
    start: Instant,
    start_epoch_us: u64,
    end: Option<Instant>,
    limit: Option<u64>,
    rate: Option<u64>,
    batch: u64,
}

impl Plan {
    fn claim(&self) -> Option<Slot> {
        let seq = self.next.fetch_add(self.batch, Ordering::Relaxed);
        let count = match self.limit {
            Some(limit) if seq >= limit => return None,
            Some(limit) => self.batch.min(limit - seq),
            None => self.batch,
        };
        let due = match self.rate {
            Some(rate) => self.start + Duration::from_secs_f64(seq as f64 / rate as f64),
            None => Instant::now(),
        };
        if self.end.is_some_and(|end| due >= end) {
            return None;
        }
        Some(Slot { seq, count, due })
    }
}

struct Ctx {
    client: Arc<Client>,
    /// Set with `--grpc`: sends go through the broker's 5.x endpoint.
    grpc: Option<GrpcLink>,
    args: ProducerArgs,
    plan: Plan,
    queues: Vec<(Peer, i32)>,
    stats: Arc<Stats>,
}

impl Ctx {
    fn message(&self, seq: u64, sent_us: u64) -> OutgoingMessage {
        let mut m = OutgoingMessage::new(
            self.args.topic.clone(),
            Bytes::from(payload::body(self.args.size, sent_us)),
        );
        m.tags = self.args.tags.clone();
        if self.args.keys {
            m.keys = vec![format!("bench-{}-{seq}", self.plan.start_epoch_us)];
        }
        m.delay_level = self.args.delay_level;
        m.user_properties = self
            .args
            .properties
            .iter()
            .map(|p| (p.name.clone(), p.value_for(seq)))
            .collect();
        m
    }

    /// One SendMessage call with the slot's messages (the endpoint picks the queue).
    async fn send_grpc(&self, link: &GrpcLink, slot: Slot) {
        let sent_us = payload::now_us();
        let bodies: Vec<Vec<u8>> = (0..slot.count)
            .map(|_| payload::body(self.args.size, sent_us))
            .collect();
        let bytes: u64 = bodies.iter().map(|b| b.len() as u64).sum();
        let keys = self
            .args
            .keys
            .then(|| format!("bench-{}-{}", self.plan.start_epoch_us, slot.seq));
        match link
            .send(&self.args.topic, bodies, self.args.tags.as_deref(), keys)
            .await
        {
            Ok(()) => self
                .stats
                .success(slot.count, bytes, Some(slot.due.elapsed()), "SEND_OK"),
            Err(label) => self.stats.failure_labelled(slot.count, label),
        }
    }

    async fn send(self: Arc<Self>, slot: Slot) {
        if let Some(link) = &self.grpc {
            return self.send_grpc(link, slot).await;
        }
        let (peer, queue_id) =
            &self.queues[(slot.seq / self.plan.batch) as usize % self.queues.len()];
        let to = SendTo {
            broker: peer,
            queue_id: *queue_id,
            producer_group: &self.args.group,
        };
        // The body carries the wall-clock time the request is built, just before it is
        // written: a consumer's "receipt minus stamp" is then the broker's end-to-end
        // time, not the pacing timer's lateness (tokio timers fire on the next
        // millisecond tick). The send latency above still counts from `due`.
        let sent_us = payload::now_us();
        let msgs: Vec<OutgoingMessage> = (slot.seq..slot.seq + slot.count)
            .map(|s| self.message(s, sent_us))
            .collect();
        let bytes: u64 = msgs.iter().map(|m| m.body.len() as u64).sum();
        let result = match (self.args.mode, msgs.as_slice()) {
            (SendMode::Oneway, [one]) => self.client.send_oneway(to, one).await.map(|()| None),
            (_, [one]) if self.args.transactional => match self.client.send(to, one, true).await {
                Ok(r) if r.status == SendStatus::SendOk => self
                    .client
                    .end_transaction(peer, &self.args.group, &r, true)
                    .await
                    .map(|()| Some(r.status)),
                other => other.map(|r| Some(r.status)),
            },
            (_, [one]) => self
                .client
                .send(to, one, false)
                .await
                .map(|r| Some(r.status)),
            (_, many) => self
                .client
                .send_batch(to, many)
                .await
                .map(|r| Some(r.status)),
        };
        match result {
            Ok(status) => {
                let (latency, outcome) = match status {
                    Some(s) => (Some(slot.due.elapsed()), status_name(s)),
                    None => (None, "ONEWAY_SENT"),
                };
                self.stats.success(slot.count, bytes, latency, outcome);
            }
            Err(e) => self.stats.failure(slot.count, &e),
        }
    }
}

fn status_name(s: SendStatus) -> &'static str {
    match s {
        SendStatus::SendOk => "SEND_OK",
        SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
        SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
        SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
    }
}

/// Keeps up to `window` sends of this sender outstanding until the plan runs out.
async fn sender(ctx: Arc<Ctx>, window: usize) {
    let mut pending = FuturesUnordered::new();
    let mut exhausted = false;
    loop {
        if !exhausted && pending.len() < window {
            match ctx.plan.claim() {
                None => exhausted = true,
                Some(slot) => {
                    // Only a fixed rate schedules slots in the future. A timer for a slot
                    // that is already due would still wait for the timer wheel's next
                    // millisecond tick, capping each sender near 1,000 sends/s.
                    if slot.due > Instant::now() {
                        let due = tokio::time::Instant::from_std(slot.due);
                        loop {
                            tokio::select! {
                                () = tokio::time::sleep_until(due) => break,
                                Some(()) = pending.next(), if !pending.is_empty() => {}
                            }
                        }
                    }
                    pending.push(ctx.clone().send(slot));
                    continue;
                }
            }
        }
        if pending.next().await.is_none() && exhausted {
            break;
        }
    }
}

/// Writable (broker, queue) pairs of `topic`'s masters, waiting briefly for a route
/// that was just created. A topic without a route is sent on the TBW102 route (the
/// broker creates it) unless `auto_create` is off, as the Java producer does.
async fn writable_queues(
    client: &Client,
    topic: &str,
    auto_create: bool,
) -> Result<Vec<(Peer, i32)>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.publish_route(topic, auto_create).await {
            Ok(publish) => {
                let route = publish.route;
                let mut out = Vec::new();
                for b in &route.broker_datas {
                    let (Some(addr), Some(q)) = (
                        b.master_addr(),
                        route
                            .queue_datas
                            .iter()
                            .find(|q| q.broker_name == b.broker_name),
                    ) else {
                        continue;
                    };
                    if q.perm & PERM_WRITE != 0 {
                        out.extend(
                            (0..q.write_queue_nums).map(|i| (Peer::Broker(addr.to_owned()), i)),
                        );
                    }
                }
                if !out.is_empty() {
                    return Ok(out);
                }
                if Instant::now() >= deadline {
                    bail!("topic {topic} has no writable queue on any master");
                }
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(e).with_context(|| format!("looking up the route of topic {topic}"));
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn run(
    client: Arc<Client>,
    args: ProducerArgs,
    run: &RunArgs,
    stats: Arc<Stats>,
) -> Result<()> {
    if args.concurrency == 0 || args.batch == 0 || args.inflight == 0 {
        bail!("--concurrency, --batch and --inflight must be at least 1");
    }
    if args.mode == SendMode::Oneway && (args.batch > 1 || args.transactional) {
        bail!("oneway mode sends single, non-transactional messages");
    }
    if run.duration_s == 0 && args.messages == 0 {
        bail!("give --duration-s or --messages, or the run never ends");
    }
    if args.grpc.endpoint.is_some()
        && (args.mode == SendMode::Oneway
            || args.transactional
            || args.delay_level.is_some()
            || !args.properties.is_empty())
    {
        bail!("--grpc sends normal messages (no oneway, transactions, delay or properties)");
    }
    if let Some(queues) = args.create_topic_queues {
        let mut config = TopicConfig::new(args.topic.clone());
        config.read_queue_nums = queues;
        config.write_queue_nums = queues;
        for b in client.master_brokers(None).await? {
            client
                .create_topic(&b.peer(), &config)
                .await
                .with_context(|| format!("creating topic {} on {}", args.topic, b.addr))?;
        }
    }
    let grpc = match &args.grpc.endpoint {
        Some(endpoint) => Some(
            GrpcLink::connect(
                endpoint,
                args.grpc.grpc_connections,
                Duration::from_millis(run.timeout_ms),
            )
            .await?,
        ),
        None => None,
    };
    // The gRPC endpoint picks the queue itself.
    let queues = match grpc {
        Some(_) => Vec::new(),
        None => writable_queues(&client, &args.topic, !args.no_auto_create).await?,
    };
    let start = Instant::now();
    let plan = Plan {
        next: AtomicU64::new(0),
        start,
        start_epoch_us: payload::now_us(),
        end: (run.duration_s > 0).then(|| start + Duration::from_secs(run.duration_s)),
        limit: (args.messages > 0).then_some(args.messages),
        rate: (args.rate > 0).then_some(args.rate),
        batch: args.batch as u64,
    };
    let window = match args.mode {
        SendMode::Async => args.inflight,
        SendMode::Sync | SendMode::Oneway => 1,
    };
    let concurrency = args.concurrency;
    let ctx = Arc::new(Ctx {
        client,
        grpc,
        args,
        plan,
        queues,
        stats,
    });
    let senders: Vec<_> = (0..concurrency)
        .map(|_| tokio::spawn(sender(ctx.clone(), window)))
        .collect();
    for s in senders {
        s.await.context("a sender task failed")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(limit: Option<u64>, rate: Option<u64>, batch: u64) -> Plan {
        let start = Instant::now();
        Plan {
            next: AtomicU64::new(0),
            start,
            start_epoch_us: 1_000_000,
            end: Some(start + Duration::from_secs(10)),
            limit,
            rate,
            batch,
        }
    }

    #[test]
    fn claims_respect_the_limit_and_split_the_last_batch() {
        let p = plan(Some(10), None, 4);
        let counts: Vec<u64> = std::iter::from_fn(|| p.claim()).map(|s| s.count).collect();
        assert_eq!(counts, [4, 4, 2]);
        assert!(p.claim().is_none());
    }

    #[test]
    fn fixed_rate_schedules_slots_and_stops_at_the_end() {
        let p = plan(None, Some(100), 1);
        let slots: Vec<Slot> = std::iter::from_fn(|| p.claim()).collect();
        // 10 s at 100 msg/s: slots 0..1000, each 10 ms after the previous one.
        assert_eq!(slots.len(), 1000);
        assert_eq!(slots[1].due - slots[0].due, Duration::from_millis(10));
        assert_eq!(slots[100].due - p.start, Duration::from_secs(1));
    }
}
