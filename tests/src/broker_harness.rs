//! Starting a real `rmq-broker` process next to a nameserver, and building the raw
//! requests the broker suites send (owned by the broker helper).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::message::record::records;
use tempfile::TempDir;

use crate::{Client, binary, http, ports};

/// A running broker; killed (SIGKILL) when dropped. Its store lives in `dir`, which
/// outlives the process so the broker can be restarted on the same data.
pub struct BrokerProcess {
    child: Option<Child>,
    pub port: u16,
    pub http_port: u16,
    /// The 5.x gRPC port (`grpcServerPort`; 0 when a suite turned it off).
    pub grpc_port: u16,
    dir: PathBuf,
    conf: Vec<(String, String)>,
    launch: Launch,
}

/// How a broker is started and reached: by default directly, at 127.0.0.1; with a
/// command prefix (e.g. `ip netns exec <ns>`) and the host it is reachable at.
#[derive(Debug, Clone)]
pub struct Launch {
    pub prefix: Vec<String>,
    pub host: String,
}

impl Default for Launch {
    fn default() -> Self {
        Self {
            prefix: Vec::new(),
            host: "127.0.0.1".to_owned(),
        }
    }
}

/// `key=value` lines every test broker gets; `extra` entries override them.
fn base_conf(
    dir: &Path,
    port: u16,
    http_port: u16,
    namesrv_port: Option<u16>,
) -> Vec<(String, String)> {
    let mut c = vec![
        ("brokerClusterName", "TestCluster".to_owned()),
        ("brokerName", "broker-e2e".to_owned()),
        ("brokerId", "0".to_owned()),
        ("listenPort", port.to_string()),
        ("metricsPort", http_port.to_string()),
        ("bindAddress", "127.0.0.1".to_owned()),
        ("brokerIP1", "127.0.0.1".to_owned()),
        ("storePathRootDir", dir.join("store").display().to_string()),
        ("mappedFileSizeCommitLog", (8 * 1024 * 1024).to_string()),
        ("mappedFileSizeConsumeQueue", (300 * 20).to_string()),
        ("flushDiskType", "ASYNC_FLUSH".to_owned()),
        // listenPort - 2 is not reserved by `free_port`; suites that test the VIP port
        // turn it on with a port of their own.
        ("fastListenPortEnable", "false".to_owned()),
        // Replication needs a group secret; every test broker runs it as before.
        ("haSecret", "e2e-ha-secret".to_owned()),
        // Each broker its own 5.x gRPC port (the default 8081 would collide).
        ("grpcServerPort", ports::free_port().to_string()),
    ];
    if let Some(ns) = namesrv_port {
        c.push(("namesrvAddr", format!("127.0.0.1:{ns}")));
    }
    c.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

impl BrokerProcess {
    /// Starts a broker with its data in `dir`, registered with the nameserver on
    /// `namesrv_port` (if any); `extra` config lines override the defaults.
    pub fn start_in(dir: &Path, namesrv_port: Option<u16>, extra: &[(&str, &str)]) -> Self {
        Self::start_with(dir, namesrv_port, extra, Launch::default())
    }

    /// [`Self::start_in`], started and probed as `launch` says.
    pub fn start_with(
        dir: &Path,
        namesrv_port: Option<u16>,
        extra: &[(&str, &str)],
        launch: Launch,
    ) -> Self {
        let (port, http_port) = (ports::free_port(), ports::free_port());
        let mut conf = base_conf(dir, port, http_port, namesrv_port);
        for (k, v) in extra {
            conf.retain(|(key, _)| key != k);
            conf.push(((*k).to_owned(), (*v).to_owned()));
        }
        let grpc_port = conf
            .iter()
            .rev()
            .find(|(k, _)| k == "grpcServerPort")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut b = Self {
            child: None,
            port,
            http_port,
            grpc_port,
            dir: dir.to_path_buf(),
            conf,
            launch,
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let text: String = self
            .conf
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        fs::write(self.conf_path(), text).expect("write broker.conf");
        self.launch();
    }

    /// The broker.conf the process is started with (`-c`).
    pub fn conf_path(&self) -> PathBuf {
        self.dir.join("broker.conf")
    }

    /// Starts the process on the broker.conf as it is on disk.
    fn launch(&mut self) {
        let conf_path = self.conf_path();
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.dir.join("broker.log"))
            .expect("open broker log");
        let mut cmd = match self.launch.prefix.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(binary::path("rmq-broker"));
                cmd
            }
            None => Command::new(binary::path("rmq-broker")),
        };
        let child = cmd
            .arg("-c")
            .arg(&conf_path)
            .env(
                "RMQ_LOG",
                std::env::var("E2E_BROKER_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .env_remove("NAMESRV_ADDR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn rmq-broker");
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(60));
    }

    /// Waits until /readyz says ready (store recovered, listener up).
    fn wait_ready(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("rmq-broker exited early ({status}); log:\n{}", self.log());
            }
            if let Ok((200, _)) =
                rt.block_on(http::get_at(&self.launch.host, self.http_port, "/readyz"))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "rmq-broker not ready in time; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("broker.log")).unwrap_or_default()
    }

    pub fn addr(&self) -> String {
        format!("{}:{}", self.launch.host, self.port)
    }

    /// Sends SIGTERM and returns at once (see [`Self::wait_exit`]).
    pub fn signal_term(&self) {
        let child = self.child.as_ref().expect("broker running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
    }

    /// SIGTERM, then waits for a clean exit; panics if it does not stop in time.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal_term();
        self.wait_exit(Duration::from_secs(30))
    }

    /// Waits for the process to exit; panics after `within`.
    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let child = self.child.as_mut().expect("broker running");
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "broker ignored SIGTERM; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP: the process freezes (its sockets stay open, nothing answers) until
    /// [`Self::resume`]; a process killed meanwhile is gone.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after [`Self::pause`].
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on our own, not yet reaped child's pid.
            unsafe {
                libc::kill(child.id() as libc::pid_t, sig);
            }
        }
    }

    /// SIGKILL: no flush, no shutdown hooks.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sets (or replaces) one config line; it takes effect at the next (re)start, as a
    /// rewritten ConfigMap does for a recreated pod.
    pub fn set_conf(&mut self, key: &str, value: &str) {
        self.conf.retain(|(k, _)| k != key);
        self.conf.push((key.to_owned(), value.to_owned()));
    }

    /// The value of one config line.
    pub fn conf(&self, key: &str) -> Option<&str> {
        self.conf
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Resident anonymous memory (heap and stacks, not the mapped store files), KiB:
    /// what a client can make the broker hold.
    pub fn anon_rss_kib(&self) -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Whether the process is running (not killed, not exited).
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Starts the broker again on the same ports and data.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker first");
        self.spawn();
    }

    /// Starts the broker again on the same ports and data with broker.conf as it is on
    /// disk (what the broker or the test wrote into it kept), not rendered anew.
    pub fn restart_with_conf_as_is(&mut self) {
        assert!(self.child.is_none(), "stop the broker first");
        self.launch();
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A temp directory plus a broker in it.
pub struct TempBroker {
    pub broker: BrokerProcess,
    _dir: TempDir,
}

impl TempBroker {
    pub fn start(namesrv_port: Option<u16>, extra: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = BrokerProcess::start_in(dir.path(), namesrv_port, extra);
        Self { broker, _dir: dir }
    }
}

/// Properties string from `(name, value)` pairs (U+0001 / U+0002 separators).
pub fn properties(entries: &[(&str, &str)]) -> String {
    entries
        .iter()
        .map(|(k, v)| format!("{k}\u{1}{v}"))
        .collect::<Vec<_>>()
        .join("\u{2}")
}

/// SEND_MESSAGE_V2 as the Java producer builds it (`queue_id` -1 lets the broker pick).
pub fn send_v2(topic: &str, queue_id: i32, body: &[u8], props: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(request::SEND_MESSAGE_V2).with_body(body.to_vec());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    for (k, v) in [
        ("a", "PG_E2E".to_owned()),
        ("b", topic.to_owned()),
        ("c", "TBW102".to_owned()),
        ("d", "4".to_owned()),
        ("e", queue_id.to_string()),
        ("f", "0".to_owned()),
        ("g", now.to_string()),
        ("h", "0".to_owned()),
        ("i", props.to_owned()),
        ("j", "0".to_owned()),
        ("k", "false".to_owned()),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    cmd
}

/// PULL_MESSAGE with the subscription carried in the request.
pub fn pull(
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max: i32,
    suspend_ms: Option<i64>,
    expr: &str,
) -> RemotingCommand {
    // COMMIT_OFFSET is not set; SUSPEND when a hold time is given; SUBSCRIPTION always.
    let sys_flag = if suspend_ms.is_some() { 0x2 | 0x4 } else { 0x4 };
    let mut cmd = RemotingCommand::bare_request(request::PULL_MESSAGE);
    for (k, v) in [
        ("consumerGroup", group.to_owned()),
        ("topic", topic.to_owned()),
        ("queueId", queue_id.to_string()),
        ("queueOffset", offset.to_string()),
        ("maxMsgNums", max.to_string()),
        ("sysFlag", sys_flag.to_string()),
        ("commitOffset", "0".to_owned()),
        ("suspendTimeoutMillis", suspend_ms.unwrap_or(0).to_string()),
        ("subscription", expr.to_owned()),
        ("subVersion", "0".to_owned()),
        ("expressionType", "TAG".to_owned()),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    cmd
}

/// UPDATE_AND_CREATE_TOPIC for `topic` with `queues` read and write queues (perm 6, one
/// tag filter), as mqadmin's updateTopic sends it.
pub fn create_topic_request(topic: &str, queues: i32) -> RemotingCommand {
    with_fields(
        request::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", topic.to_owned()),
            ("defaultTopic", "TBW102".to_owned()),
            ("readQueueNums", queues.to_string()),
            ("writeQueueNums", queues.to_string()),
            ("perm", "6".to_owned()),
            ("topicFilterType", "SINGLE_TAG".to_owned()),
            ("order", "false".to_owned()),
        ],
    )
}

/// A request with the given extFields.
pub fn with_fields(code: i32, fields: &[(&str, String)]) -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(code);
    for (k, v) in fields {
        cmd.ext_fields.insert(*k, v.clone());
    }
    cmd
}

/// One decoded record of a pull / query / view body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub body: Vec<u8>,
    pub properties: String,
}

/// Decodes every record of a body (CRC checked); panics on a malformed one.
pub fn decode_records(body: &[u8]) -> Vec<Pulled> {
    records(body, true)
        .map(|r| {
            let v = r.expect("well-formed record");
            Pulled {
                topic: v.topic().to_owned(),
                queue_id: v.queue_id(),
                queue_offset: v.queue_offset().get(),
                physical_offset: v.physical_offset().get(),
                body: v.body().to_vec(),
                properties: v.properties().to_owned(),
            }
        })
        .collect()
}

/// Every record of one queue, read from queue offset 0 in pulls of 32 as `group`, up to
/// the first pull that answers anything but SUCCESS.
pub async fn pull_queue(c: &Client, group: &str, topic: &str, queue_id: i32) -> Vec<Pulled> {
    let mut out = Vec::new();
    let mut next = 0i64;
    loop {
        let r = c
            .request(pull(group, topic, queue_id, next, 32, None, "*"))
            .await
            .expect("pull");
        if r.code != response::SUCCESS {
            return out;
        }
        let records = decode_records(&r.body);
        let Some(last) = records.last() else {
            return out;
        };
        next = last.queue_offset + 1;
        out.extend(records);
    }
}

/// The value of property `name` in a properties string.
pub fn property<'a>(props: &'a str, name: &str) -> Option<&'a str> {
    props
        .split('\u{2}')
        .filter_map(|s| s.split_once('\u{1}'))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// GET_BROKER_HA_STATUS (907) as JSON.
pub async fn ha_status(c: &Client) -> serde_json::Value {
    let r = c
        .request(with_fields(request::GET_BROKER_HA_STATUS, &[]))
        .await
        .expect("GET_BROKER_HA_STATUS");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    serde_json::from_slice(&r.body).expect("HA status JSON")
}

/// The pulls parked at the broker (GET_BROKER_RUNTIME_INFO `pullHoldCount`, the waiters
/// of its `PullRequestHoldService`). An arrival that wakes a pull takes it off this list
/// while it is dispatched, so once it is dispatched the count shows who stayed parked.
pub async fn parked_pulls(c: &Client) -> i64 {
    let r = c
        .request(RemotingCommand::bare_request(
            request::GET_BROKER_RUNTIME_INFO,
        ))
        .await
        .expect("GET_BROKER_RUNTIME_INFO");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let info: serde_json::Value = serde_json::from_slice(&r.body).expect("runtime info JSON");
    info["table"]["pullHoldCount"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .expect("pullHoldCount")
}

/// VIEW_MESSAGE_BY_ID by physical offset: the body, or `None` when the broker has no
/// message there.
pub async fn view(c: &Client, offset: i64) -> Option<Vec<u8>> {
    let r = c
        .request(with_fields(
            request::VIEW_MESSAGE_BY_ID,
            &[("offset", offset.to_string())],
        ))
        .await
        .expect("VIEW_MESSAGE_BY_ID");
    (r.code == response::SUCCESS).then(|| decode_records(&r.body).remove(0).body)
}

/// HEART_BEAT of one consumer of `group` subscribing to every tag of `topics`: the
/// broker then knows what the group consumes (CONSUMER_SEND_MSG_BACK takes only that).
pub fn consumer_heartbeat(client_id: &str, group: &str, topics: &[&str]) -> RemotingCommand {
    use protocol::body::{
        ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, SubscriptionData,
    };
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.to_owned(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            subscription_data_set: topics
                .iter()
                .map(|t| SubscriptionData {
                    class_filter_mode: false,
                    topic: (*t).to_owned(),
                    sub_string: "*".to_owned(),
                    tags_set: Default::default(),
                    code_set: Default::default(),
                    sub_version: 1,
                    expression_type: "TAG".to_owned(),
                })
                .collect(),
            unit_mode: false,
        }],
    };
    RemotingCommand::bare_request(request::HEART_BEAT).with_body(protocol::body::encode(&data))
}
