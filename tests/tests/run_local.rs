//! `scripts/run-local.sh` as a newcomer runs it, with the binaries of this build
//! (`BIN_DIR`): a second instance on the same ports refuses to start and says which port
//! is taken, a process that fails to start has the cause (the end of its log) printed on
//! the terminal, and a misspelt config key is shown there too.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use e2e::ports::free_port;
use e2e::wait::eventually_sync;

struct Ports {
    namesrv: u16,
    namesrv_metrics: u16,
    broker: u16,
    broker_metrics: u16,
    broker_grpc: u16,
}

impl Ports {
    fn free() -> Self {
        Self {
            namesrv: free_port(),
            namesrv_metrics: free_port(),
            broker: free_port(),
            broker_metrics: free_port(),
            broker_grpc: free_port(),
        }
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/run-local.sh")
}

fn command(ports: &Ports, data: &Path) -> Command {
    let bin_dir = e2e::binary::path("rmq-broker")
        .parent()
        .expect("binary directory")
        .to_path_buf();
    e2e::binary::path("rmq-nameserver");
    let mut cmd = Command::new("bash");
    cmd.arg(script())
        .env("BIN_DIR", bin_dir)
        .env("DATA_DIR", data)
        .env("NAMESRV_PORT", ports.namesrv.to_string())
        .env("NAMESRV_METRICS_PORT", ports.namesrv_metrics.to_string())
        .env("BROKER_PORT", ports.broker.to_string())
        .env("BROKER_METRICS_PORT", ports.broker_metrics.to_string())
        .env("BROKER_GRPC_PORT", ports.broker_grpc.to_string())
        .stdin(Stdio::null());
    cmd
}

/// A running run-local.sh; stopped with SIGTERM (its trap stops both servers).
struct Instance(Child);

impl Instance {
    /// Starts the script, waits for its "is up" line and returns what it wrote to
    /// stderr until then.
    fn start(ports: &Ports, data: &Path) -> (Self, String) {
        let stderr_path = data.join("run-local.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("create stderr file");
        let mut child = command(ports, data)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn run-local.sh");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut instance = Self(child);
        let mut lines = BufReader::new(stdout).lines();
        let up = lines.any(|l| l.is_ok_and(|l| l.starts_with("rmq-rs is up")));
        // Keep the pipe open and drained: the servers share it and must not get EPIPE.
        std::thread::spawn(move || lines.for_each(drop));
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        if !up {
            let status = instance.0.wait();
            panic!("run-local.sh ended without saying it is up: {status:?}\n{stderr}");
        }
        (instance, stderr)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let pid = self.0.id() as libc::pid_t;
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn run(ports: &Ports, data: &Path) -> (Output, String, String) {
    let out = command(ports, data)
        .output()
        .expect("run run-local.sh to completion");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

#[test]
fn a_second_instance_on_the_same_ports_refuses_to_start() {
    let ports = Ports::free();
    let first_data = tempfile::tempdir().expect("temp dir");
    // The user's own broker.conf, with a misspelt key.
    let broker_dir = first_data.path().join("broker");
    std::fs::create_dir_all(&broker_dir).expect("create broker dir");
    std::fs::write(
        broker_dir.join("broker.conf"),
        format!(
            "brokerIP1=127.0.0.1\nstorePathRootDir={}\nmappedFileSizeCommitLog=1048576\n\
             autoCreateTopicEnabel=true\n",
            broker_dir.join("store").display()
        ),
    )
    .expect("write broker.conf");
    let (_first, first_stderr) = Instance::start(&ports, first_data.path());
    assert!(
        first_stderr.contains("autoCreateTopicEnabel")
            && first_stderr.contains("autoCreateTopicEnable"),
        "the misspelt key is not on the terminal: {first_stderr}"
    );
    let log = std::fs::read_to_string(broker_dir.join("broker.log")).expect("broker.log");
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in the log file: {log}"
    );

    let second_data = tempfile::tempdir().expect("temp dir");
    let (out, stdout, stderr) = run(&ports, second_data.path());
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stdout.contains("is up"), "claims success: {stdout}");
    assert!(
        stderr.contains(&format!("port {} (nameserver", ports.namesrv))
            && stderr.contains(&format!("port {} (broker,", ports.broker))
            && stderr.contains("already in use"),
        "{stderr}"
    );
    // It started nothing, so the first instance still answers.
    eventually_sync(
        Duration::from_secs(5),
        "the first instance to answer",
        || std::net::TcpStream::connect(("127.0.0.1", ports.namesrv)).is_ok(),
    );
}

#[test]
fn a_broker_that_fails_to_start_has_its_cause_printed() {
    let ports = Ports::free();
    let data = tempfile::tempdir().expect("temp dir");
    let broker_dir = data.path().join("broker");
    std::fs::create_dir_all(&broker_dir).expect("create broker dir");
    std::fs::write(
        broker_dir.join("broker.conf"),
        format!(
            "brokerName=broker-a\nstorePathRootDir={}\nflushDiskType=SOMETIMES\n",
            broker_dir.join("store").display()
        ),
    )
    .expect("write broker.conf");
    let (out, stdout, stderr) = run(&ports, data.path());
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("rmq-broker failed to start")
            && stderr.contains("expected one of ASYNC_FLUSH, SYNC_FLUSH"),
        "the cause is not on the terminal: {stderr}"
    );
    // Said once, without a backtrace burying it.
    assert_eq!(stderr.matches("SOMETIMES").count(), 1, "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
}
