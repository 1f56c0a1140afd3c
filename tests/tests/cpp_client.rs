//! The official C++ client (librocketmq, as the `rocketmq` PyPI package bundles it)
//! against a real nameserver and broker, driven by `tests/clients/cpp/driver.py`:
//!
//! - an offset reset (`rmqctl consumer reset --to-earliest`) with a C++ push consumer
//!   online: the client cannot decode RESET_CONSUMER_CLIENT_OFFSET, so the broker moves
//!   its next pull to the reset offset and ignores its stale commits meanwhile;
//! - `rmqctl consumer status` with a C++ consumer online answers at once, naming the
//!   client and why it gave no offsets (the C++ client never answers the request);
//! - a batch over 4 KiB, which the C++ client compresses whole, is stored and consumed
//!   intact.
//!
//! The client is found through `RMQ_CPP_PYTHON` (a python with `rocketmq` installed;
//! `.ci/run` sets it up). Without it the tests print why and pass, unless
//! `RMQ_REQUIRE_CPP_CLIENT=1` (CI), where they fail.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{BrokerProcess, pull};
use e2e::cli::{CliOutput, rmqctl_json};
use e2e::nameserver::{NameServer, Options};
use e2e::wait::{eventually_ok_sync, eventually_sync};
use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::header::QueryConsumerOffsetRequestHeader;
use protocol::message::record::records;

/// A python that imports `rocketmq.client`, or `None` (with the reason printed) when the
/// tests may skip.
fn python() -> Option<PathBuf> {
    let required = std::env::var("RMQ_REQUIRE_CPP_CLIENT").is_ok_and(|v| v == "1");
    let skip = |why: String| {
        assert!(!required, "RMQ_REQUIRE_CPP_CLIENT=1 but {why}");
        eprintln!("skipping the C++ client test: {why}");
        None
    };
    let Some(py) = std::env::var_os("RMQ_CPP_PYTHON").map(PathBuf::from) else {
        return skip("RMQ_CPP_PYTHON is not set (see .ci/run's C++ client step)".into());
    };
    match Command::new(&py)
        .args(["-c", "import rocketmq.client"])
        .output()
    {
        Ok(out) if out.status.success() => Some(py),
        Ok(out) => skip(format!(
            "{} cannot load the C++ client: {}",
            py.display(),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => skip(format!("{} cannot run: {e}", py.display())),
    }
}

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/cpp/driver.py")
}

struct Cluster {
    py: PathBuf,
    ns: NameServer,
    broker: BrokerProcess,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start(py: PathBuf) -> Self {
        let ns = NameServer::start(Options::default());
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = BrokerProcess::start_in(dir.path(), Some(ns.port), &[]);
        Self {
            py,
            ns,
            broker,
            dir,
        }
    }

    fn namesrv(&self) -> String {
        format!("127.0.0.1:{}", self.ns.port)
    }

    fn ctl(&self, args: &[&str]) -> CliOutput {
        rmqctl_json(self.ns.port, args)
    }

    fn create_topic(&self, topic: &str) {
        self.ctl(&["topic", "create", "-t", topic, "-r", "4", "-w", "4"])
            .ok();
        // The client reads the route from the nameserver: wait until it lists the topic.
        eventually_sync(Duration::from_secs(30), "topic route", || {
            self.ctl(&["topic", "route", "-t", topic]).code == 0
        });
    }

    /// Runs a driver subcommand to completion; panics with its output on failure.
    fn drive(&self, args: &[&str]) -> String {
        let out = Command::new(&self.py)
            .arg(driver())
            .args(args)
            .args(["--namesrv", &self.namesrv()])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("run the C++ client driver");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "driver {args:?} failed: {stdout}\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.broker.log()
        );
        stdout
    }

    fn consumer(&self, topic: &str, group: &str) -> CppConsumer {
        let out = self.dir.path().join(format!("{group}.deliveries"));
        let log = self.dir.path().join(format!("{group}.stdout"));
        let mut child = Command::new(&self.py)
            .arg(driver())
            .args(["consume", "--topic", topic, "--group", group])
            .args(["--namesrv", &self.namesrv()])
            .arg("--out")
            .arg(&out)
            .current_dir(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(fs::File::create(&log).expect("consumer log"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the C++ consumer");
        let stdin = child.stdin.take();
        eventually_sync(Duration::from_secs(30), "the C++ consumer to start", || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the C++ consumer exited ({status}): {}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
            }
            fs::read_to_string(&log).is_ok_and(|s| s.contains("started"))
        });
        CppConsumer { child, stdin, out }
    }

    /// The group's committed offset of a queue, straight from the broker.
    fn committed(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            bname: None,
        };
        let port = self.broker.port;
        e2e::wait::runtime().block_on(async {
            let c = Client::connect(port).await.expect("connect to the broker");
            let r = c
                .request(RemotingCommand::request(
                    request::QUERY_CONSUMER_OFFSET,
                    &header,
                ))
                .await
                .expect("QUERY_CONSUMER_OFFSET");
            if r.code != response::SUCCESS {
                return -1;
            }
            r.ext_fields
                .get("offset")
                .and_then(|o| o.parse().ok())
                .unwrap_or(-1)
        })
    }
}

/// One delivery as the consumer wrote it down.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Delivery {
    queue_id: i32,
    offset: i64,
    body: String,
}

struct CppConsumer {
    child: Child,
    stdin: Option<ChildStdin>,
    out: PathBuf,
}

impl CppConsumer {
    fn deliveries(&self) -> Vec<Delivery> {
        let text = fs::read_to_string(&self.out).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, ' ');
                Some(Delivery {
                    queue_id: f.next()?.parse().ok()?,
                    offset: f.next()?.parse().ok()?,
                    body: f.next()?.to_owned(),
                })
            })
            .collect()
    }

    fn bodies(&self) -> BTreeSet<String> {
        self.deliveries().into_iter().map(|d| d.body).collect()
    }
}

impl Drop for CppConsumer {
    fn drop(&mut self) {
        // Closing stdin makes the driver shut the client down; a hung one is killed.
        drop(self.stdin.take());
        for _ in 0..100 {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bodies(prefix: &str, count: usize, size: usize) -> BTreeSet<String> {
    (0..count)
        .map(|i| {
            let head = format!("{prefix}-{i:04}-");
            let pad = size.saturating_sub(head.len());
            format!("{head}{}", "x".repeat(pad))
        })
        .collect()
}

const COUNT: usize = 16;

#[test]
fn reset_to_earliest_rewinds_an_online_cpp_consumer() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py);
    let (topic, group) = ("CppResetTopic", "cpp-reset-group");
    c.create_topic(topic);
    c.drive(&[
        "produce", "--topic", topic, "--count", "16", "--prefix", "a",
    ]);
    let consumer = c.consumer(topic, group);
    let expected = bodies("a", COUNT, 32);
    eventually_ok_sync(Duration::from_secs(60), "the first delivery", || {
        let seen = consumer.bodies();
        if seen == expected {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    });
    // Where each queue ends: what the group has committed once it is idle.
    let mut per_queue: BTreeMap<i32, i64> = BTreeMap::new();
    for d in consumer.deliveries() {
        let end = per_queue.entry(d.queue_id).or_default();
        *end = (*end).max(d.offset + 1);
    }
    let first_round: BTreeMap<i32, usize> = per_queue
        .keys()
        .map(|q| {
            let n = consumer
                .deliveries()
                .iter()
                .filter(|d| d.queue_id == *q)
                .count();
            (*q, n)
        })
        .collect();
    eventually_ok_sync(Duration::from_secs(60), "the offsets committed", || {
        let now: BTreeMap<i32, i64> = per_queue
            .keys()
            .map(|q| (*q, c.committed(group, topic, *q)))
            .collect();
        if now == per_queue {
            Ok(())
        } else {
            Err(format!("committed {now:?}, expected {per_queue:?}"))
        }
    });

    c.ctl(&[
        "consumer",
        "reset",
        "-g",
        group,
        "-t",
        topic,
        "--to-earliest",
    ])
    .ok();

    // Every message comes again, from each queue's offset 0. Sampled in this order
    // (committed offset, then deliveries): the driver writes a delivery down before the
    // client can commit past it, so a queue committed at its old end must have been
    // delivered again in full by then, or the commit was the client's stale offset.
    eventually_ok_sync(Duration::from_secs(90), "the second delivery", || {
        let committed: BTreeMap<i32, i64> = per_queue
            .keys()
            .map(|q| (*q, c.committed(group, topic, *q)))
            .collect();
        let all = consumer.deliveries();
        let mut again_done = true;
        for (q, end) in &per_queue {
            let again: Vec<&Delivery> = all
                .iter()
                .filter(|d| d.queue_id == *q)
                .skip(first_round[q])
                .collect();
            let complete = again.len() >= first_round[q];
            assert!(
                committed[q] != *end || complete,
                "queue {q}: committed offset back at {end} after the reset with only {} of {} \
                 messages delivered again\n{}",
                again.len(),
                first_round[q],
                c.broker.log()
            );
            if let Some(first) = again.first() {
                assert_eq!(
                    first.offset, 0,
                    "queue {q} re-delivered from {}",
                    first.offset
                );
            }
            again_done &= complete && committed[q] == *end;
        }
        let again_bodies: BTreeSet<String> = {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for d in &all {
                *counts.entry(d.body.as_str()).or_default() += 1;
            }
            counts
                .into_iter()
                .filter(|(_, n)| *n >= 2)
                .map(|(b, _)| b.to_owned())
                .collect()
        };
        if again_done && again_bodies == expected {
            Ok(())
        } else {
            Err(format!(
                "delivered twice: {} of {COUNT}; committed {committed:?} of {per_queue:?}",
                again_bodies.len()
            ))
        }
    });
}

#[test]
fn consumer_status_names_a_cpp_client_that_cannot_answer() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py);
    let (topic, group) = ("CppStatusTopic", "cpp-status-group");
    c.create_topic(topic);
    let _consumer = c.consumer(topic, group);
    eventually_sync(
        Duration::from_secs(30),
        "the C++ consumer connected",
        || {
            let out = c.ctl(&["consumer", "connections", "-g", group]);
            out.code == 0 && out.stdout.contains("CPP")
        },
    );
    let out = c.ctl(&["consumer", "status", "-g", group, "-t", topic]);
    // Not "unreachable" (3): the broker answered, the client could not.
    assert_eq!(out.code, 1, "{out:?}");
    let j = out.json();
    let unanswered = j["unanswered"].as_object().expect("unanswered clients");
    assert_eq!(unanswered.len(), 1, "{j}");
    let (client_id, why) = unanswered.iter().next().expect("one client");
    let why = why.as_str().unwrap_or_default();
    assert!(
        why.contains(client_id.as_str()) && why.contains("CPP"),
        "the reason names the client and its language: {why}"
    );
    assert!(
        why.contains("GET_CONSUMER_STATUS_FROM_CLIENT"),
        "the reason names the request: {why}"
    );
    assert_eq!(j["clients"].as_object().map(|m| m.len()), Some(0), "{j}");
    // Table output says the same in words.
    let ns = c.namesrv();
    let text = e2e::cli::run(
        "rmqctl",
        &["-n", &ns, "consumer", "status", "-g", group, "-t", topic],
    );
    assert_eq!(text.code, 1, "{text:?}");
    assert!(
        text.stdout.contains(client_id.as_str()) && text.stdout.contains("C++ client"),
        "{text:?}"
    );
}

#[test]
fn a_compressed_cpp_batch_is_stored_and_consumed_intact() {
    let Some(py) = python() else { return };
    let c = Cluster::start(py);
    let (topic, group) = ("CppBatchTopic", "cpp-batch-group");
    c.create_topic(topic);
    // 32 × 200 bytes: over the client's 4 KiB compressMsgBodyOverHowmuch.
    let sent = c.drive(&[
        "batch", "--topic", topic, "--count", "32", "--size", "200", "--prefix", "b",
    ]);
    assert!(sent.contains("sent OK"), "{sent}");
    let consumer = c.consumer(topic, group);
    let expected = bodies("b", 32, 200);
    eventually_ok_sync(Duration::from_secs(60), "the batch consumed", || {
        let seen = consumer.bodies();
        if seen == expected {
            Ok(())
        } else {
            Err(format!("{} of 32: {seen:?}", seen.len()))
        }
    });
    // Stored as plain messages, as 4.9 stores the entries of a batch: no compressed
    // flag, bodies as sent, so consumers of every client read them unchanged.
    let port = c.broker.port;
    let stored = e2e::wait::runtime().block_on(async {
        let client = Client::connect(port).await.expect("connect to the broker");
        let mut stored = Vec::new();
        for q in 0..4 {
            let r = client
                .request(pull("raw-reader", topic, q, 0, 64, None, "*"))
                .await
                .expect("pull");
            if r.code != response::SUCCESS {
                continue;
            }
            for record in records(&r.body, true) {
                let v = record.expect("well-formed record");
                stored.push((v.sys_flag().is_compressed(), v.body().to_vec()));
            }
        }
        stored
    });
    assert_eq!(stored.len(), 32, "one stored message per batch entry");
    for (compressed, body) in &stored {
        assert!(!compressed, "stored with the compressed flag");
        assert!(
            expected.contains(&String::from_utf8_lossy(body).into_owned()),
            "stored body {body:?}"
        );
    }
}
