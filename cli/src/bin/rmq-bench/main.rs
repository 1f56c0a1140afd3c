//! `rmq-bench`: a load generator for RocketMQ 4.x compatible clusters, in the spirit of
//! RocketMQ's benchmark scripts. It speaks only the public remoting protocol (route
//! lookup, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, END_TRANSACTION, PULL_MESSAGE), so it
//! measures any compatible nameserver/broker the same way; `admin-burst` adds
//! UPDATE_AND_CREATE_TOPIC. With `--grpc HOST:PORT` the producer and consumer modes use
//! a broker's 5.x gRPC endpoint instead (SendMessage; ReceiveMessage + AckMessage).
//!
//! Progress lines go to stderr; the final summary goes to stdout (text, or JSON with
//! `--json`). Exit code 1 when the run could not start or no message succeeded.

mod admin_burst;
mod args;
mod consumer;
mod grpc;
mod payload;
mod producer;
mod stats;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use remoting::client::Client;
use remoting::client::send::answer_transaction_check;
use serde_json::json;

use args::{Cli, Mode};
use stats::Stats;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cli.run.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rmq-bench: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rmq-bench: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Mode::AdminBurst(a) = &cli.mode {
        let ok = admin_burst::run(&cli.namesrv, a.clone(), &cli.run, cli.json).await?;
        return Ok(if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    let mut client = Client::new(&cli.namesrv, Duration::from_millis(cli.run.timeout_ms))
        .with_credentials(cli.auth.credentials()?)
        .with_tls(cli.tls.client()?);
    if let Mode::Producer(p) = &cli.mode
        && p.transactional
    {
        // Brokers ask about half messages they have not seen a decision for; commit them.
        let group = p.group.clone();
        client = client.with_server_request_handler(Arc::new(move |cmd| {
            answer_transaction_check(&cmd, &group, true)
        }));
    }
    let client = Arc::new(client);
    let stats = Arc::new(Stats::new(Duration::from_secs(cli.run.warmup_s)));
    let interval = Duration::from_secs(cli.run.report_interval_s.max(1));
    let reporter = {
        let stats = stats.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.tick().await;
            let mut last = Instant::now();
            loop {
                tick.tick().await;
                eprintln!("{}", stats.progress_line(last.elapsed()));
                last = Instant::now();
            }
        })
    };
    let started = Instant::now();
    let (title, config, outcome) = match cli.mode {
        Mode::Producer(p) => {
            let config = json!({
                "topic": p.topic, "size": p.size, "concurrency": p.concurrency,
                "mode": format!("{:?}", p.mode).to_lowercase(), "inflight": p.inflight,
                "batch": p.batch, "rate": p.rate, "messages": p.messages, "keys": p.keys,
                "tags": p.tags, "delayLevel": p.delay_level, "transactional": p.transactional,
                "grpc": p.grpc.endpoint,
            });
            let outcome = producer::run(client, p, &cli.run, stats.clone()).await;
            ("producer", config, outcome)
        }
        Mode::Consumer(c) => {
            let config = json!({
                "topic": c.topic, "group": c.group, "from": format!("{:?}", c.from).to_lowercase(),
                "pullBatch": c.pull_batch, "messages": c.messages, "untilCaughtUp": c.until_caught_up,
                "sql": c.sql, "tags": c.tags, "groups": c.groups, "holdMs": c.hold_ms,
                "grpc": c.grpc.endpoint, "grpcReceivers": c.grpc.grpc_receivers,
            });
            let outcome = consumer::run(client, c, &cli.run, stats.clone()).await;
            ("consumer", config, outcome)
        }
        Mode::AdminBurst(_) => anyhow::bail!("admin-burst has its own summary (see above)"),
    };
    let elapsed = started.elapsed();
    reporter.abort();
    outcome?;
    let mut summary = stats.summary(elapsed);
    if cli.latency {
        let buckets = stats.latency_histogram();
        if cli.json {
            eprint!("{}", stats::render_histogram(&buckets));
        }
        summary.latency_histogram = Some(buckets);
    }
    if cli.json {
        let doc = json!({
            "mode": title,
            "namesrv": cli.namesrv,
            "durationS": cli.run.duration_s,
            "config": config,
            "summary": summary,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", summary.render_text(title));
    }
    Ok(if summary.total_ok == 0 && summary.total_errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
