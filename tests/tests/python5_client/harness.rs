//! Real processes for the 5.x Python client suite: a nameserver, brokers with their gRPC
//! endpoint on, and `tests/clients/python5/driver.py` runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{BrokerProcess, decode_records, pull};
use e2e::cli::{CliOutput, rmqctl_json};
use e2e::nameserver::{NameServer, Options};
use e2e::ports::free_port;
use e2e::wait::eventually_sync;
use protocol::code::response;

/// A python that imports the 5.x client, or `None` (with the reason printed) when the
/// tests may skip.
pub fn python() -> Option<PathBuf> {
    let required = std::env::var("RMQ_REQUIRE_PY5_CLIENT").is_ok_and(|v| v == "1");
    let skip = |why: String| {
        assert!(!required, "RMQ_REQUIRE_PY5_CLIENT=1 but {why}");
        eprintln!("skipping the 5.x Python client test: {why}");
        None
    };
    let Some(py) = std::env::var_os("RMQ_PY5_PYTHON").map(PathBuf::from) else {
        return skip("RMQ_PY5_PYTHON is not set (see .ci/run's 5.x client step)".into());
    };
    match Command::new(&py)
        .args(["-c", "import rocketmq.v5"])
        .output()
    {
        Ok(out) if out.status.success() => Some(py),
        Ok(out) => skip(format!(
            "{} cannot load the 5.x client: {}",
            py.display(),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => skip(format!("{} cannot run: {e}", py.display())),
    }
}

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python5/driver.py")
}

/// One broker group's master with its gRPC port.
pub struct GrpcBroker {
    pub process: BrokerProcess,
    pub grpc_port: u16,
}

impl GrpcBroker {
    pub fn endpoints(&self) -> String {
        format!("127.0.0.1:{}", self.grpc_port)
    }
}

pub struct Cluster {
    pub py: PathBuf,
    pub ns: NameServer,
    pub brokers: Vec<GrpcBroker>,
    pub dir: tempfile::TempDir,
    /// The account `rmqctl` signs with (a broker with the ACL on).
    signer: Option<(String, String)>,
}

impl Cluster {
    /// A nameserver and `groups` broker groups (`py5-broker-<i>`), each one master.
    pub fn start(py: PathBuf, groups: usize, extra: &[(&str, &str)]) -> Self {
        let ns = NameServer::start(Options::default());
        let dir = tempfile::tempdir().expect("temp dir");
        let brokers = (0..groups)
            .map(|i| {
                let grpc_port = free_port();
                let name = format!("py5-broker-{i}");
                let data = dir.path().join(&name);
                fs::create_dir_all(&data).expect("broker dir");
                let port = grpc_port.to_string();
                let mut conf = vec![
                    ("brokerName", name.as_str()),
                    ("grpcServerPort", port.as_str()),
                    // Check-backs of open transactions come quickly.
                    ("transactionCheckInterval", "1000"),
                    ("transactionTimeOut", "1000"),
                ];
                conf.extend_from_slice(extra);
                let process = BrokerProcess::start_in(&data, Some(ns.port), &conf);
                GrpcBroker { process, grpc_port }
            })
            .collect();
        Self {
            py,
            ns,
            brokers,
            dir,
            signer: None,
        }
    }

    /// `rmqctl` from now on signs with this ACL account.
    pub fn sign_ctl_with(&mut self, access_key: &str, secret_key: &str) {
        self.signer = Some((access_key.to_owned(), secret_key.to_owned()));
    }

    pub fn endpoints(&self) -> String {
        self.brokers[0].endpoints()
    }

    pub fn ctl(&self, args: &[&str]) -> CliOutput {
        match &self.signer {
            None => rmqctl_json(self.ns.port, args),
            Some((ak, sk)) => {
                let mut all = vec!["--access-key", ak.as_str(), "--secret-key", sk.as_str()];
                all.extend_from_slice(args);
                rmqctl_json(self.ns.port, &all)
            }
        }
    }

    /// Creates `topic` on broker group `b` with `queues` queues and, when given, the
    /// 5.x `message.type` attribute; waits until the nameserver routes it.
    pub fn create_topic_on(&self, b: usize, topic: &str, queues: u32, message_type: Option<&str>) {
        let q = queues.to_string();
        let addr = self.brokers[b].process.addr();
        let mut args = vec![
            "topic", "create", "-t", topic, "-b", &addr, "-r", &q, "-w", &q,
        ];
        if let Some(t) = message_type {
            args.extend(["--message-type", t]);
        }
        self.ctl(&args).ok();
        let name = format!("py5-broker-{b}");
        eventually_sync(Duration::from_secs(30), "topic route", || {
            let route = self.ctl(&["topic", "route", "-t", topic]);
            route.code == 0
                && route.json()["brokerDatas"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|x| x["brokerName"] == name.as_str()))
        });
    }

    pub fn create_topic(&self, topic: &str, message_type: Option<&str>) {
        for b in 0..self.brokers.len() {
            self.create_topic_on(b, topic, 4, message_type);
        }
    }

    /// Creates a subscription group on every broker (`fifo`: consumed in order).
    pub fn create_group(&self, group: &str, fifo: bool, retry_max_times: u32) {
        let retry = retry_max_times.to_string();
        for b in &self.brokers {
            let addr = b.process.addr();
            let mut args = vec![
                "group",
                "create",
                "-g",
                group,
                "-b",
                &addr,
                "--retry-max-times",
                &retry,
            ];
            if fifo {
                args.extend(["--fifo", "true"]);
            }
            self.ctl(&args).ok();
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.py);
        cmd.arg(driver())
            .args(args)
            .args(["--endpoints", &self.endpoints()])
            .current_dir(self.dir.path());
        cmd
    }

    /// Runs a driver subcommand to completion; whether it succeeded.
    pub fn drive_status(&self, args: &[&str]) -> bool {
        self.command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run the 5.x client driver")
            .success()
    }

    /// Runs a driver subcommand to completion; panics with its output on failure.
    pub fn drive(&self, args: &[&str]) -> String {
        self.drive_env(args, &[])
    }

    /// [`Self::drive`] with extra environment variables.
    pub fn drive_env(&self, args: &[&str], env: &[(&str, &Path)]) -> String {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .expect("run the 5.x client driver");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "driver {args:?} failed: {stdout}\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.brokers
                .iter()
                .map(|b| b.process.log())
                .collect::<Vec<_>>()
                .join("\n")
        );
        stdout
    }

    /// A file consumers write their deliveries to.
    pub fn out_file(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.deliveries"))
    }

    /// A push consumer running until dropped.
    pub fn push_consumer(&self, topic: &str, group: &str, fail_first: u32) -> PushConsumer {
        let out = self.out_file(group);
        let log = self.dir.path().join(format!("{group}.stdout"));
        let fail = fail_first.to_string();
        let mut child = self
            .command(&[
                "push",
                "--topic",
                topic,
                "--group",
                group,
                "--fail-first",
                &fail,
            ])
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::piped())
            .stdout(fs::File::create(&log).expect("consumer log"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the 5.x push consumer");
        let stdin = child.stdin.take();
        eventually_sync(
            Duration::from_secs(60),
            "the push consumer to start",
            || {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "the push consumer exited ({status}): {}",
                        fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                fs::read_to_string(&log).is_ok_and(|s| s.contains("started"))
            },
        );
        PushConsumer { child, stdin, out }
    }

    /// Every message of `topic` on broker `b`, read with 4.x pulls from offset 0.
    pub fn pulled(&self, b: usize, topic: &str, queues: i32) -> Vec<e2e::broker_harness::Pulled> {
        let port = self.brokers[b].process.port;
        e2e::wait::runtime().block_on(async {
            let c = Client::connect(port).await.expect("connect to the broker");
            let mut all = Vec::new();
            for q in 0..queues {
                let r = c
                    .request(pull("py5-4x-reader", topic, q, 0, 32, None, "*"))
                    .await
                    .expect("PULL_MESSAGE");
                if r.code == response::SUCCESS {
                    all.extend(decode_records(&r.body));
                }
            }
            all
        })
    }
}

/// One delivery as a consumer wrote it down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub body: String,
    pub attempt: u32,
    pub message_id: String,
    pub tag: String,
    pub message_group: String,
}

pub fn deliveries(path: &Path) -> Vec<Delivery> {
    let text = fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Some(Delivery {
                body: (*f.first()?).to_owned(),
                attempt: f.get(1)?.parse().ok()?,
                message_id: (*f.get(2)?).to_owned(),
                tag: (*f.get(3)?).to_owned(),
                message_group: (*f.get(4)?).to_owned(),
            })
        })
        .collect()
}

pub fn bodies(prefix: &str, count: usize) -> BTreeSet<String> {
    (0..count).map(|i| format!("{prefix}-{i:04}")).collect()
}

/// Attempts seen per body.
pub fn attempts(ds: &[Delivery]) -> BTreeMap<String, Vec<u32>> {
    let mut m: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for d in ds {
        m.entry(d.body.clone()).or_default().push(d.attempt);
    }
    m
}

pub struct PushConsumer {
    child: Child,
    stdin: Option<ChildStdin>,
    pub out: PathBuf,
}

impl PushConsumer {
    pub fn deliveries(&self) -> Vec<Delivery> {
        deliveries(&self.out)
    }
}

impl Drop for PushConsumer {
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
