//! Transactional vs plain send throughput against one running broker, measured in the
//! same run: first plain SEND_MESSAGE_V2 for `seconds`, then transactions (half message
//! send, answered, then a oneway END_TRANSACTION commit, as producers do) for `seconds`.
//! Afterwards it waits for every commit to reach the real topic and counts the stored
//! messages, so a commit the broker dropped or stored twice shows up.
//!
//! ```sh
//! cargo run --release -p rmq-broker --example transaction_bench -- 127.0.0.1:10911 64 10 1024
//! ```
//! Arguments: broker address, producers, seconds per phase, body bytes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::message::{MessageSysFlag, parse_offset_msg_id};

mod common;

use common::conn::Conn;

fn send(topic: &str, queue_id: usize, body: &[u8], n: u64, half: bool) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(request::SEND_MESSAGE_V2).with_body(body.to_vec());
    let (sys_flag, props) = if half {
        (
            MessageSysFlag::TRANSACTION_PREPARED_TYPE,
            format!(
                "TAGS\u{1}bench\u{2}TRAN_MSG\u{1}true\u{2}PGROUP\u{1}BENCH_PG\u{2}UNIQ_KEY\u{1}{n:032X}"
            ),
        )
    } else {
        (0, "TAGS\u{1}bench".to_owned())
    };
    for (k, v) in [
        ("a", "BENCH_PG".to_owned()),
        ("b", topic.to_owned()),
        ("c", "TBW102".to_owned()),
        ("d", "8".to_owned()),
        ("e", queue_id.to_string()),
        ("f", sys_flag.to_string()),
        ("g", "0".to_owned()),
        ("h", "0".to_owned()),
        ("i", props),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    cmd
}

/// END_TRANSACTION commit for the half message a send answer describes.
fn commit(sent: &RemotingCommand, uniq: u64) -> Option<RemotingCommand> {
    let msg_id = sent.ext_fields.get("msgId")?;
    let (_, offset) = parse_offset_msg_id(msg_id).ok()?;
    let queue_offset = sent.ext_fields.get("queueOffset")?;
    let mut cmd = RemotingCommand::bare_request(request::END_TRANSACTION);
    for (k, v) in [
        ("producerGroup", "BENCH_PG".to_owned()),
        ("tranStateTableOffset", queue_offset.to_owned()),
        ("commitLogOffset", offset.get().to_string()),
        (
            "commitOrRollback",
            MessageSysFlag::TRANSACTION_COMMIT_TYPE.to_string(),
        ),
        ("fromTransactionCheck", "false".to_owned()),
        ("msgId", format!("{uniq:032X}")),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    Some(cmd)
}

fn max_offset(topic: &str, queue_id: usize) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(request::GET_MAX_OFFSET);
    cmd.ext_fields.insert("topic", topic.to_owned());
    cmd.ext_fields.insert("queueId", queue_id.to_string());
    cmd
}

/// Runs `producers` loops for `seconds`; returns completed operations and errors.
async fn phase(
    conns: &[Arc<Conn>],
    producers: usize,
    seconds: u64,
    topic: &str,
    body: &[u8],
    half: bool,
) -> (u64, u64, Duration) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..producers {
        let conn = Arc::clone(&conns[p % conns.len()]);
        let (topic, body) = (topic.to_owned(), body.to_vec());
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut errors) = (0u64, 0u64);
            let mut n = (p as u64) << 40;
            while Instant::now() < deadline {
                n += 1;
                match conn.call(send(&topic, p % 8, &body, n, half)).await {
                    Ok(r) if r.code == response::SUCCESS => {
                        if half {
                            match commit(&r, n).map(|c| conn.oneway(c)) {
                                Some(Ok(())) => ok += 1,
                                _ => errors += 1,
                            }
                        } else {
                            ok += 1;
                        }
                    }
                    _ => errors += 1,
                }
            }
            (ok, errors)
        }));
    }
    let (mut ok, mut errors) = (0, 0);
    for t in tasks {
        if let Ok((o, e)) = t.await {
            ok += o;
            errors += e;
        }
    }
    (ok, errors, started.elapsed())
}

async fn stored(conn: &Conn, topic: &str) -> anyhow::Result<i64> {
    let mut total = 0;
    for q in 0..8 {
        let r = conn.call(max_offset(topic, q)).await?;
        total += r
            .ext_fields
            .get("offset")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0);
    }
    Ok(total)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let addr = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:10911".to_owned());
    let producers: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(64);
    let seconds: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10);
    let size: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let body = vec![b'x'; size];
    let plain_topic = format!("BenchPlain{}", std::process::id());
    let tx_topic = format!("BenchTx{}", std::process::id());

    let mut conns = Vec::new();
    for _ in 0..8 {
        conns.push(Conn::connect(&addr).await?);
    }
    for topic in [&plain_topic, &tx_topic] {
        let r = conns[0].call(send(topic, 0, &body, 0, false)).await?;
        anyhow::ensure!(
            r.code == response::SUCCESS,
            "warm-up send failed: {} {:?}",
            r.code,
            r.remark
        );
    }

    let (plain, plain_err, plain_time) =
        phase(&conns, producers, seconds, &plain_topic, &body, false).await;
    let plain_rate = plain as f64 / plain_time.as_secs_f64();
    println!(
        "plain send:         {plain} msgs in {plain_time:.2?} = {plain_rate:.0} msg/s, errors {plain_err}"
    );
    let (tx, tx_err, tx_time) = phase(&conns, producers, seconds, &tx_topic, &body, true).await;
    let tx_rate = tx as f64 / tx_time.as_secs_f64();
    println!(
        "transactional send: {tx} half+commit in {tx_time:.2?} = {tx_rate:.0} tx/s, errors {tx_err}"
    );
    println!(
        "ratio transactional/plain: {:.1}%",
        100.0 * tx_rate / plain_rate
    );

    // Every commit must land once in the real topic (plus the warm-up message).
    let want = tx as i64 + 1;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut have = stored(&conns[0], &tx_topic).await?;
    while have < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        have = stored(&conns[0], &tx_topic).await?;
    }
    println!("committed messages stored: {have} of {want} expected");
    anyhow::ensure!(
        have == want,
        "stored {have} committed messages, expected {want}"
    );
    Ok(())
}
