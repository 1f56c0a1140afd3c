//! `rmq-bench` against real rmq-nameserver + rmq-broker processes: the message counts it
//! reports match what the broker stored (counts only; speed is never asserted).

use std::time::Duration;

use e2e::NameServer;
use e2e::broker_harness::TempBroker;
use e2e::cli::{CliOutput, rmqctl_json, run};
use e2e::nameserver::Options;
use e2e::wait::{eventually_ok_sync, eventually_sync};
use serde_json::Value;

const TOPIC: &str = "BenchCount";

fn bench(ns_port: u16, args: &[&str]) -> Value {
    let ns = format!("127.0.0.1:{ns_port}");
    let mut all = vec!["-n", ns.as_str(), "--json", "--report-interval-s", "1"];
    all.extend_from_slice(args);
    let out: CliOutput = run("rmq-bench", &all).ok();
    out.json()["summary"].clone()
}

/// Sum of the max offsets of the topic's queues: the number of messages stored.
fn stored(ns_port: u16) -> u64 {
    let status = rmqctl_json(ns_port, &["topic", "status", "-t", TOPIC])
        .ok()
        .json();
    status["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["maxOffset"].as_u64().expect("maxOffset"))
        .sum()
}

fn wait_stored(ns_port: u16, want: u64) {
    let what = format!("the broker to store the {want} messages the bench reported");
    eventually_ok_sync(Duration::from_secs(10), &what, || match stored(ns_port) {
        n if n == want => Ok(()),
        n => Err(format!("{n} stored")),
    });
}

/// `rocketmq_retry_messages_total{group}` from the broker's metrics endpoint.
fn retries_counted(http_port: u16, group: &str) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (status, text) = rt
        .block_on(e2e::http::get(http_port, "/metrics"))
        .expect("metrics");
    assert_eq!(status, 200);
    let series = format!("rocketmq_retry_messages_total{{group=\"{group}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn counts(summary: &Value) -> (u64, u64) {
    (
        summary["totalOk"].as_u64().expect("totalOk"),
        summary["totalErrors"].as_u64().expect("totalErrors"),
    )
}

#[test]
fn reported_counts_match_what_the_broker_stored() {
    let ns = NameServer::start(Options::default());
    let broker = TempBroker::start(Some(ns.port), &[]);
    eventually_sync(Duration::from_secs(15), "the broker to register", || {
        rmqctl_json(ns.port, &["cluster", "list"]).json()["brokers"]
            .as_array()
            .is_some_and(|b| !b.is_empty())
    });

    // Async single sends, creating the topic; keys and tags on every message.
    let s = bench(
        ns.port,
        &[
            "-d",
            "0",
            "producer",
            "-t",
            TOPIC,
            "--create-topic-queues",
            "4",
            "--messages",
            "600",
            "--mode",
            "async",
            "-c",
            "4",
            "-s",
            "256",
            "--keys",
            "--tags",
            "bench",
        ],
    );
    assert_eq!(counts(&s), (600, 0), "{s}");
    assert_eq!(s["outcomes"]["SEND_OK"], 600);
    assert!(s["latencyMs"]["p99"].as_f64().is_some(), "{s}");
    wait_stored(ns.port, 600);

    // Sync batches of 8 (the last batch is partial).
    let s = bench(
        ns.port,
        &[
            "-d",
            "0",
            "producer",
            "-t",
            TOPIC,
            "--messages",
            "403",
            "--batch",
            "8",
            "-c",
            "2",
        ],
    );
    assert_eq!(counts(&s), (403, 0), "{s}");
    wait_stored(ns.port, 1003);

    // Oneway: no answers, but every message written must be stored.
    let s = bench(
        ns.port,
        &[
            "-d",
            "0",
            "producer",
            "-t",
            TOPIC,
            "--messages",
            "200",
            "--mode",
            "oneway",
            "-c",
            "2",
        ],
    );
    assert_eq!(counts(&s), (200, 0), "{s}");
    assert!(s["latencyMs"].is_null());
    wait_stored(ns.port, 1203);

    // Fixed rate for one second: whatever it reports as sent is what was stored.
    let s = bench(
        ns.port,
        &[
            "-d", "1", "producer", "-t", TOPIC, "--rate", "300", "-c", "4",
        ],
    );
    let (ok, errors) = counts(&s);
    assert_eq!(errors, 0, "{s}");
    assert!(ok > 0);
    wait_stored(ns.port, 1203 + ok);

    // The consumer reads back exactly everything stored, with end-to-end latencies.
    let s = bench(
        ns.port,
        &[
            "-d",
            "30",
            "consumer",
            "-t",
            TOPIC,
            "--from",
            "earliest",
            "--until-caught-up",
        ],
    );
    assert_eq!(counts(&s), (1203 + ok, 0), "{s}");
    assert_eq!(s["latencyMs"]["samples"].as_u64(), Some(1203 + ok));

    // Three groups at once, each subscribed to tag "bench" (only the first 600 carry it),
    // with the latency histogram: every group reads those 600, and the histogram holds
    // exactly the timed samples.
    let s = bench(
        ns.port,
        &[
            "--latency",
            "-d",
            "30",
            "consumer",
            "-t",
            TOPIC,
            "-g",
            "bench_groups",
            "--groups",
            "3",
            "--tags",
            "bench",
            "--from",
            "earliest",
            "--until-caught-up",
        ],
    );
    assert_eq!(counts(&s), (1800, 0), "{s}");
    let buckets = s["latencyHistogram"].as_array().expect("latencyHistogram");
    let in_buckets: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(in_buckets, 1800, "{s}");
    let last = buckets.last().expect("a bucket");
    assert_eq!(last["cumulativePct"].as_f64(), Some(100.0), "{s}");

    // Handing back every 4th message: the broker counts exactly the send-backs the bench made.
    let total = 1203 + ok;
    let out = run(
        "rmq-bench",
        &[
            "-n",
            &format!("127.0.0.1:{}", ns.port),
            "--json",
            "-d",
            "30",
            "consumer",
            "-t",
            TOPIC,
            "-g",
            "bench_sendback",
            "--from",
            "earliest",
            "--until-caught-up",
            "--send-back-every",
            "4",
        ],
    )
    .ok();
    assert_eq!(counts(&out.json()["summary"]), (total, 0), "{out:?}");
    let handed_back = total / 4;
    assert!(
        out.stderr
            .contains(&format!("handed back {handed_back} messages")),
        "{out:?}"
    );
    assert_eq!(
        retries_counted(broker.broker.http_port, "bench_sendback"),
        handed_back
    );

    // A bench against an unknown topic fails with a clear error and exit code 1.
    let ns_addr = format!("127.0.0.1:{}", ns.port);
    let out = run(
        "rmq-bench",
        &["-n", &ns_addr, "consumer", "-t", "NoSuchTopic", "-d", "1"],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("TOPIC_NOT_EXIST (17)"), "{out:?}");
}
