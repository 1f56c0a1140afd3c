//! Load generator: N concurrent synchronous producers sending fixed-size messages to a
//! running broker over its remoting port, then one consumer draining what was sent.
//! Reports throughput and latency percentiles.
//!
//! ```sh
//! cargo run --release -p rmq-broker --example produce_bench -- 127.0.0.1:10911 64 10 1024
//! ```
//! Arguments: broker address, producers, seconds, body bytes, connections (defaults as
//! above, 8 connections: the producers are spread over them like several client instances).
//!
//! Each producer's request is encoded once and re-sent with a new opaque, and the writer
//! batches whatever is queued per connection, so the generator spends as little CPU per
//! message as it can on the two cores it shares with the broker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::RemotingCommand;
use protocol::code::{request, response};

mod common;

use common::conn::{Conn, Template};

fn send(topic: &str, queue_id: usize, body: &[u8]) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(request::SEND_MESSAGE_V2).with_body(body.to_vec());
    for (k, v) in [
        ("a", "BENCH_PG".to_owned()),
        ("b", topic.to_owned()),
        ("c", "TBW102".to_owned()),
        ("d", "8".to_owned()),
        ("e", queue_id.to_string()),
        ("f", "0".to_owned()),
        ("g", "0".to_owned()),
        ("h", "0".to_owned()),
        ("i", "TAGS\u{1}bench".to_owned()),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    cmd
}

fn pull(topic: &str, queue_id: usize, offset: i64) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(request::PULL_MESSAGE);
    for (k, v) in [
        ("consumerGroup", "BENCH_CG".to_owned()),
        ("topic", topic.to_owned()),
        ("queueId", queue_id.to_string()),
        ("queueOffset", offset.to_string()),
        ("maxMsgNums", "32".to_owned()),
        ("sysFlag", "4".to_owned()),
        ("commitOffset", "0".to_owned()),
        ("suspendTimeoutMillis", "0".to_owned()),
        ("subscription", "*".to_owned()),
        ("subVersion", "0".to_owned()),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    cmd
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let addr = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:10911".to_owned());
    let producers: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(64);
    let seconds: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10);
    let size: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let connections: usize = args.get(5).and_then(|a| a.parse().ok()).unwrap_or(8).max(1);
    let queues = 8;
    let topic = format!("Bench{}", std::process::id());
    let body = vec![b'x'; size];

    let mut conns = Vec::new();
    for _ in 0..connections {
        conns.push(Conn::connect(&addr).await?);
    }
    // Create the topic once before the clock starts.
    let r = conns[0].call(send(&topic, 0, &body)).await?;
    anyhow::ensure!(
        r.code == response::SUCCESS,
        "warm-up send failed: {} {:?}",
        r.code,
        r.remark
    );

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..producers {
        let conn = Arc::clone(&conns[p % conns.len()]);
        let template = Arc::new(Template::new(send(&topic, p % queues, &body))?);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(1 << 16);
            let mut errors = 0u64;
            let mut t = Instant::now();
            while t < deadline {
                match conn.call_template(&template).await {
                    Ok(r) if r.code == response::SUCCESS => {
                        let done = Instant::now();
                        lat.push(done - t);
                        t = done;
                    }
                    _ => {
                        errors += 1;
                        t = Instant::now();
                    }
                }
            }
            (lat, errors)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    // No per-request timer: the whole phase is bounded instead.
    let limit = Duration::from_secs(seconds + 30);
    for t in tasks {
        let (l, e) = tokio::time::timeout(limit, t).await??;
        lat.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed();
    lat.sort_unstable();
    println!(
        "produce: {} msgs of {size} B in {:.2?} = {:.0} msg/s, errors {errors}, p50 {:.2?} p99 {:.2?} max {:.2?}",
        lat.len(),
        elapsed,
        lat.len() as f64 / elapsed.as_secs_f64(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or_default()
    );

    // Drain every queue from 0 with one pull in flight per queue.
    let expected = lat.len() + 1;
    let started = Instant::now();
    let mut drains = Vec::new();
    for q in 0..queues {
        let conn = Arc::clone(&conns[q % conns.len()]);
        let topic = topic.clone();
        drains.push(tokio::spawn(async move {
            let (mut offset, mut got) = (0i64, 0usize);
            loop {
                let r = conn.call(pull(&topic, q, offset)).await?;
                if r.code != response::SUCCESS {
                    return anyhow::Ok(got);
                }
                got += protocol::message::record::records(&r.body, false).count();
                offset = r
                    .ext_fields
                    .get("nextBeginOffset")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(offset);
            }
        }));
    }
    let mut drained = 0;
    for d in drains {
        drained += d.await??;
    }
    let elapsed = started.elapsed();
    println!(
        "consume: {drained} of {expected} msgs in {:.2?} = {:.0} msg/s",
        elapsed,
        drained as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}
