//! `admin-burst` mode: what a burst of admin topic creates does to another client's
//! sends, against one master broker.
//!
//! 1. **baseline**: a victim sends one message at a time at `--victim-rate` for
//!    `--baseline-s` seconds; nothing else runs.
//! 2. **burst**: `--connections` admin connections create `--topics` topics
//!    (UPDATE_AND_CREATE_TOPIC, each connection waiting for an answer before its next
//!    create, as admin tools loop) while the victim keeps sending at the same rate; the
//!    phase ends with the last create.
//!
//! The victim's latency is measured from each send's scheduled time (open loop), so a
//! broker stall counts for every send it delayed, not only the one in flight; its
//! service time (from the send's start to its answer) is reported beside it. The summary
//! gives both phases' p50 / p99 / max, and the creates' rate and latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use hdrhistogram::Histogram;
use protocol::body::TopicConfig;
use remoting::client::message::OutgoingMessage;
use remoting::client::send::SendTo;
use remoting::client::{Client, Peer};
use serde::Serialize;
use serde_json::json;

use crate::args::{AdminBurstArgs, RunArgs};

/// Latencies in microseconds, up to one hour.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

fn record(h: &mut Histogram<u64>, latency: Duration) {
    h.saturating_record(
        u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1),
    );
}

/// Latency percentiles of one series, in milliseconds.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub count: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>, errors: u64) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            count: h.len(),
            errors,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        }
    }

    fn line(&self) -> String {
        format!(
            "{} ok, {} errors, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.count, self.errors, self.p50_ms, self.p99_ms, self.max_ms
        )
    }
}

/// What the victim saw in one phase.
struct Victim {
    /// From each send's due time to its answer.
    latency: Histogram<u64>,
    /// From each send's start to its answer.
    service: Histogram<u64>,
    errors: u64,
}

/// The victim: one send at a time, each due `1 / rate` after the previous one, until
/// `done` says the phase is over.
async fn victim(
    client: &Client,
    broker: &Peer,
    msg: &OutgoingMessage,
    rate: u64,
    done: impl Fn() -> bool,
) -> Victim {
    let mut v = Victim {
        latency: histogram(),
        service: histogram(),
        errors: 0,
    };
    let start = Instant::now();
    let to = SendTo {
        broker,
        queue_id: 0,
        producer_group: "rmq_bench_admin_burst_victim",
    };
    for seq in 0u64.. {
        if done() {
            break;
        }
        let due = start + Duration::from_secs_f64(seq as f64 / rate as f64);
        tokio::time::sleep_until(due.into()).await;
        let started = Instant::now();
        match client.send(to, msg, false).await {
            Ok(_) => {
                record(&mut v.latency, due.elapsed());
                record(&mut v.service, started.elapsed());
            }
            Err(e) => {
                v.errors += 1;
                eprintln!("victim send failed: {e}");
            }
        }
    }
    v
}

/// One admin connection: claims topic numbers from `next` and creates them in turn.
async fn creator(
    client: Client,
    broker: Peer,
    prefix: String,
    topics: usize,
    next: Arc<AtomicUsize>,
) -> (Histogram<u64>, u64) {
    let (mut h, mut errors) = (histogram(), 0);
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= topics {
            return (h, errors);
        }
        let mut config = TopicConfig::new(format!("{prefix}_{n:05}"));
        config.read_queue_nums = 4;
        config.write_queue_nums = 4;
        let started = Instant::now();
        match client.create_topic(&broker, &config).await {
            Ok(()) => record(&mut h, started.elapsed()),
            Err(e) => {
                errors += 1;
                eprintln!("create {} failed: {e}", config.topic_name);
            }
        }
    }
}

pub async fn run(
    cli_namesrv: &str,
    args: AdminBurstArgs,
    run: &RunArgs,
    as_json: bool,
) -> Result<bool> {
    if args.victim_rate == 0 || args.connections == 0 {
        bail!("--victim-rate and --connections must be at least 1");
    }
    let timeout = Duration::from_millis(run.timeout_ms);
    let victim_client = Client::new(cli_namesrv, timeout);
    let broker = victim_client
        .master_brokers(None)
        .await?
        .first()
        .map(|b| b.peer())
        .context("the nameserver knows no master broker")?;
    let mut config = TopicConfig::new(args.topic.clone());
    config.read_queue_nums = 4;
    config.write_queue_nums = 4;
    victim_client
        .create_topic(&broker, &config)
        .await
        .with_context(|| format!("creating the victim topic {}", args.topic))?;
    let msg = OutgoingMessage::new(args.topic.clone(), Bytes::from(vec![b'v'; args.size]));

    eprintln!(
        "baseline: victim at {} sends/s for {} s",
        args.victim_rate, args.baseline_s
    );
    let until = Instant::now() + Duration::from_secs(args.baseline_s);
    let base = victim(&victim_client, &broker, &msg, args.victim_rate, || {
        Instant::now() >= until
    })
    .await;
    let baseline = Latency::of(&base.latency, base.errors);
    let baseline_service = Latency::of(&base.service, base.errors);

    eprintln!(
        "burst: {} topic creates over {} connections, victim at {} sends/s",
        args.topics, args.connections, args.victim_rate
    );
    let next = Arc::new(AtomicUsize::new(0));
    let over = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let creators: Vec<_> = (0..args.connections)
        .map(|_| {
            tokio::spawn(creator(
                Client::new(cli_namesrv, timeout),
                broker.clone(),
                args.prefix.clone(),
                args.topics,
                Arc::clone(&next),
            ))
        })
        .collect();
    let flag = Arc::clone(&over);
    let creates = async move {
        let mut all = histogram();
        let mut errors = 0;
        for c in creators {
            let (h, e) = c.await.context("a creator task failed")?;
            all.add(&h).context("merging histograms")?;
            errors += e;
        }
        flag.store(true, Ordering::Release);
        anyhow::Ok((all, errors))
    };
    let during = victim(&victim_client, &broker, &msg, args.victim_rate, || {
        over.load(Ordering::Acquire)
    });
    let (created, sent) = tokio::join!(creates, during);
    let (created, create_errors) = created?;
    let elapsed = started.elapsed().as_secs_f64();
    let burst = Latency::of(&sent.latency, sent.errors);
    let burst_service = Latency::of(&sent.service, sent.errors);
    let creates = Latency::of(&created, create_errors);
    let creates_per_s = creates.count as f64 / elapsed.max(f64::EPSILON);

    if as_json {
        let doc = json!({
            "mode": "admin-burst",
            "namesrv": cli_namesrv,
            "config": {
                "topics": args.topics, "connections": args.connections,
                "victimRate": args.victim_rate, "baselineS": args.baseline_s,
                "size": args.size,
            },
            "baseline": { "victim": baseline, "victimService": baseline_service },
            "burst": {
                "victim": burst, "victimService": burst_service, "creates": creates,
                "elapsedS": elapsed, "createsPerS": creates_per_s,
            },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!("admin-burst summary");
        println!(
            "  victim, baseline ({} s): {}",
            args.baseline_s,
            baseline.line()
        );
        println!(
            "  victim, during creates ({elapsed:.1} s): {}",
            burst.line()
        );
        println!("  creates: {} ({creates_per_s:.0}/s)", creates.line());
    }
    Ok(baseline.errors == 0 && burst.errors == 0 && creates.errors == 0)
}
