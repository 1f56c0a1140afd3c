//! Consumer mode: one puller per queue (PULL_MESSAGE with long polling), end-to-end
//! latency from the timestamp the producer mode writes into each body.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use protocol::message::{ConsumerOffset, QueueOffset};
use remoting::client::pull::{ExpressionType, PullRequest, PullStatus};
use remoting::client::{Client, Peer};

use crate::args::{ConsumerArgs, RunArgs, StartFrom};
use crate::grpc::GrpcLink;
use crate::payload;
use crate::stats::Stats;
use grpc_api::v2::MessageQueue;

/// Read permission bit of a queue's perm (`PermName.PERM_READ`).
const PERM_READ: i32 = 0x4;

struct Ctx {
    client: Arc<Client>,
    args: ConsumerArgs,
    end: Option<Instant>,
    received: AtomicU64,
    sent_back: AtomicU64,
    /// Send-backs spawned and not yet answered; the run waits for them before reporting.
    sending_back: AtomicU64,
    stats: Arc<Stats>,
}

impl Ctx {
    fn done(&self) -> bool {
        self.end.is_some_and(|e| Instant::now() >= e)
            || (self.args.messages > 0
                && self.received.load(Ordering::Relaxed) >= self.args.messages)
    }
}

async fn pull_queue(ctx: Arc<Ctx>, group: String, peer: Peer, queue_id: i32) -> Result<()> {
    let a = &ctx.args;
    let (subscription, expression_type) = match (&a.sql, &a.tags) {
        (Some(sql), _) => (sql.as_str(), ExpressionType::Sql92),
        (None, Some(tags)) => (tags.as_str(), ExpressionType::Tag),
        (None, None) => ("*", ExpressionType::Tag),
    };
    let mut offset = match a.from {
        StartFrom::Earliest => ctx.client.min_offset(&peer, &a.topic, queue_id).await?,
        StartFrom::Latest => ctx.client.max_offset(&peer, &a.topic, queue_id).await?,
    };
    while !ctx.done() {
        let req = PullRequest {
            group: &group,
            topic: &a.topic,
            queue_id,
            offset,
            max_messages: a.pull_batch,
            subscription,
            expression_type,
            suspend_ms: (!a.until_caught_up).then_some(a.hold_ms),
            commit_offset: a.commit.then_some(ConsumerOffset(offset.get())),
        };
        match ctx.client.pull(&peer, &req).await {
            Ok(r) => {
                match r.status {
                    PullStatus::Found => {
                        let now = payload::now_us();
                        for m in &r.messages {
                            let latency = payload::stamp(&m.body)
                                .map(|due| Duration::from_micros(now.saturating_sub(due)));
                            ctx.stats.success(1, m.body.len() as u64, latency, "FOUND");
                            let seen = ctx.received.fetch_add(1, Ordering::Relaxed) + 1;
                            if a.send_back_every > 0 && seen.is_multiple_of(a.send_back_every) {
                                ctx.sending_back.fetch_add(1, Ordering::AcqRel);
                                tokio::spawn(send_back(ctx.clone(), peer.clone(), m.clone()));
                            }
                        }
                    }
                    PullStatus::NoNewMsg if a.until_caught_up => return Ok(()),
                    _ => {}
                }
                offset = next_offset(offset, r.next_begin_offset);
            }
            Err(e) => {
                ctx.stats.failure(1, &e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(())
}

/// Hands `msg` back as a failed consumption (delay level 0: the broker's retry schedule).
async fn send_back(ctx: Arc<Ctx>, peer: Peer, msg: remoting::client::message::Message) {
    match ctx.client.send_back(&peer, &ctx.args.group, &msg, 0).await {
        Ok(()) => {
            ctx.sent_back.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => ctx.stats.failure(1, &e),
    }
    ctx.sending_back.fetch_sub(1, Ordering::AcqRel);
}

/// One gRPC receiver: ReceiveMessage (long polling) over the topic's queues in turn,
/// then one AckMessage for what it got.
async fn grpc_receiver(
    ctx: Arc<Ctx>,
    link: Arc<GrpcLink>,
    queues: Arc<Vec<MessageQueue>>,
    first: usize,
) {
    let a = &ctx.args;
    let filter = match (&a.sql, &a.tags) {
        (Some(sql), _) => Some((sql.as_str(), true)),
        (None, Some(tags)) => Some((tags.as_str(), false)),
        (None, None) => None,
    };
    let hold = Duration::from_millis(a.hold_ms.max(0) as u64);
    let mut turn = first;
    while !ctx.done() {
        let queue = &queues[turn % queues.len()];
        turn += 1;
        match link
            .receive(&a.group, queue, filter, a.pull_batch, hold)
            .await
        {
            Ok(got) if got.is_empty() => {
                if a.until_caught_up {
                    return;
                }
            }
            Ok(got) => {
                let now = payload::now_us();
                for m in &got {
                    let latency = payload::stamp(&m.body)
                        .map(|due| Duration::from_micros(now.saturating_sub(due)));
                    ctx.stats
                        .success(1, m.body.len() as u64, latency, "RECEIVED");
                }
                ctx.received.fetch_add(got.len() as u64, Ordering::Relaxed);
                if let Err(label) = link.ack(&a.group, &a.topic, &got).await {
                    ctx.stats.failure_labelled(got.len() as u64, label);
                }
            }
            Err(label) => {
                ctx.stats.failure_labelled(1, label);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Consumption through a broker's gRPC endpoint (`--grpc`): POP, not offsets, so
/// `--from`, `--commit`, `--groups` and send-backs do not apply.
async fn run_grpc(ctx: Arc<Ctx>, endpoint: &str, timeout: Duration) -> Result<()> {
    let a = &ctx.args;
    if a.groups > 1 || a.send_back_every > 0 || a.commit {
        bail!("--grpc consumes as one POP group: no --groups, --send-back-every or --commit");
    }
    let link = Arc::new(GrpcLink::connect(endpoint, a.grpc.grpc_connections, timeout).await?);
    let queues = Arc::new(link.queues(&a.topic).await?);
    if queues.is_empty() {
        bail!("topic {} has no queue at {endpoint}", a.topic);
    }
    let tasks: Vec<_> = (0..a.grpc.grpc_receivers.max(1))
        .map(|i| tokio::spawn(grpc_receiver(ctx.clone(), link.clone(), queues.clone(), i)))
        .collect();
    for t in tasks {
        t.await.context("a receiver task failed")?;
    }
    Ok(())
}

/// The broker's next offset; never moves backwards.
fn next_offset(current: QueueOffset, next: QueueOffset) -> QueueOffset {
    if next.get() > current.get() {
        next
    } else {
        current
    }
}

pub async fn run(
    client: Arc<Client>,
    args: ConsumerArgs,
    run: &RunArgs,
    stats: Arc<Stats>,
) -> Result<()> {
    if args.pull_batch <= 0 {
        bail!("--pull-batch must be positive");
    }
    if args.groups == 0 {
        bail!("--groups must be at least 1");
    }
    if args.groups > 1 && args.send_back_every > 0 {
        bail!("--send-back-every hands messages back for one group; use it with --groups 1");
    }
    if run.duration_s == 0 && args.messages == 0 && !args.until_caught_up {
        bail!("give --duration-s, --messages or --until-caught-up, or the run never ends");
    }
    if let Some(endpoint) = args.grpc.endpoint.clone() {
        let ctx = Arc::new(Ctx {
            client,
            end: (run.duration_s > 0).then(|| Instant::now() + Duration::from_secs(run.duration_s)),
            args,
            received: AtomicU64::new(0),
            sent_back: AtomicU64::new(0),
            sending_back: AtomicU64::new(0),
            stats,
        });
        return run_grpc(ctx, &endpoint, Duration::from_millis(run.timeout_ms)).await;
    }
    let route = client
        .topic_route(&args.topic)
        .await
        .with_context(|| format!("looking up the route of topic {}", args.topic))?;
    let mut queues = Vec::new();
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
        if q.perm & PERM_READ != 0 {
            queues.extend((0..q.read_queue_nums).map(|i| (Peer::Broker(addr.to_owned()), i)));
        }
    }
    if queues.is_empty() {
        bail!("topic {} has no readable queue on any master", args.topic);
    }
    if args.send_back_every > 0 {
        // Registered as a consumer of the topic: a broker takes a message back only from
        // a group that subscribes to its topic.
        let client_id = format!("rmq-bench@{}", std::process::id());
        let mut brokers: Vec<&Peer> = queues.iter().map(|(p, _)| p).collect();
        brokers.dedup();
        for peer in brokers {
            client
                .consumer_heartbeat(peer, &client_id, &args.group, &args.topic)
                .await
                .with_context(|| format!("registering group {} with the broker", args.group))?;
        }
    }
    let ctx = Arc::new(Ctx {
        client,
        args,
        end: (run.duration_s > 0).then(|| Instant::now() + Duration::from_secs(run.duration_s)),
        received: AtomicU64::new(0),
        sent_back: AtomicU64::new(0),
        sending_back: AtomicU64::new(0),
        stats,
    });
    let groups: Vec<String> = if ctx.args.groups == 1 {
        vec![ctx.args.group.clone()]
    } else {
        (0..ctx.args.groups)
            .map(|i| format!("{}-{i}", ctx.args.group))
            .collect()
    };
    let tasks: Vec<_> = groups
        .iter()
        .flat_map(|g| {
            queues
                .iter()
                .map(move |(peer, q)| (g.clone(), peer.clone(), *q))
        })
        .map(|(g, peer, q)| tokio::spawn(pull_queue(ctx.clone(), g, peer, q)))
        .collect();
    for t in tasks {
        t.await.context("a puller task failed")??;
    }
    // Each send-back ends within the request timeout, answered or failed.
    while ctx.sending_back.load(Ordering::Acquire) > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if ctx.args.send_back_every > 0 {
        eprintln!(
            "handed back {} messages with CONSUMER_SEND_MSG_BACK",
            ctx.sent_back.load(Ordering::Relaxed)
        );
    }
    Ok(())
}
