//! Clients that live inside a network namespace for the partition test: a nameserver
//! started there, and the real `rmqctl` run with `ip netns exec` against it.

use std::fs::{self, File};
use std::process::Stdio;
use std::time::Duration;

use e2e::netns::{Netns, NsChild};
use e2e::wait::eventually_sync;
use e2e::{binary, ports};

pub const TOPIC: &str = "Part";

/// A nameserver inside the namespace, for clients that live there.
pub struct InnerNameServer {
    _child: NsChild,
    pub port: u16,
    _dir: tempfile::TempDir,
}

pub fn start_inner_nameserver(netns: &Netns) -> InnerNameServer {
    let dir = tempfile::tempdir().unwrap();
    let (port, http_port) = (ports::free_port(), ports::free_port());
    let conf = dir.path().join("namesrv.conf");
    fs::write(
        &conf,
        format!(
            "listenPort={port}\nmetricsPort={http_port}\nbindAddress=0.0.0.0\nkvConfigPath={}\n",
            dir.path().join("kv.json").display()
        ),
    )
    .unwrap();
    let log = File::create(dir.path().join("namesrv.log")).unwrap();
    let mut cmd = netns.command(binary::path("rmq-nameserver"));
    cmd.arg("-c")
        .arg(&conf)
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    let mut child = NsChild::spawn(cmd).expect("spawn rmq-nameserver in the namespace");
    eventually_sync(
        Duration::from_secs(20),
        "the inner nameserver to listen",
        || {
            if let Some(status) = child.exited() {
                panic!(
                    "inner nameserver exited ({status}): {}",
                    fs::read_to_string(dir.path().join("namesrv.log")).unwrap_or_default()
                );
            }
            std::net::TcpStream::connect((netns.ns_ip.as_str(), port)).is_ok()
        },
    );
    InnerNameServer {
        _child: child,
        port,
        _dir: dir,
    }
}

/// What the real `rmqctl`, run inside the namespace, printed.
#[derive(Debug)]
struct Ctl {
    exit: i32,
    json: serde_json::Value,
    stderr: String,
}

/// `ip netns exec <ns> rmqctl -n <inner nameserver> -o json <args>`.
async fn ctl(netns_name: &str, inner_port: u16, args: &[&str]) -> Ctl {
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", netns_name])
        .arg(binary::path("rmqctl"))
        .args(["-n", &format!("127.0.0.1:{inner_port}"), "-o", "json"])
        .args(args)
        .env_remove("NAMESRV_ADDR")
        .stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("run rmqctl in the namespace");
    Ctl {
        exit: out.status.code().unwrap_or(-1),
        json: serde_json::from_slice(&out.stdout).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `message send` through rmqctl inside the namespace: (exit, status, physical offset).
#[derive(Debug)]
pub struct CtlSend {
    pub exit: i32,
    pub status: Option<String>,
    pub offset: Option<i64>,
    pub stderr: String,
}

pub async fn ctl_send(netns_name: &str, inner_port: u16, body: &str) -> CtlSend {
    let args = ["message", "send", "-t", TOPIC, "-q", "0", "--body", body];
    let r = ctl(netns_name, inner_port, &args).await;
    let result = &r.json["result"];
    CtlSend {
        exit: r.exit,
        status: result["status"].as_str().map(str::to_owned),
        offset: result["offsetMsgId"].as_str().map(offset_of),
        stderr: r.stderr,
    }
}

/// Bodies of queue 0 as a consumer inside the namespace reads them.
pub async fn ctl_consume(netns_name: &str, inner_port: u16) -> Vec<String> {
    let args = [
        "message", "consume", "-t", TOPIC, "-q", "0", "--offset", "0",
    ];
    let r = ctl(
        netns_name,
        inner_port,
        &[&args[..], &["--max", "1000"]].concat(),
    )
    .await;
    assert_eq!(r.exit, 0, "rmqctl consume: {}", r.stderr);
    r.json["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| m["body"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub fn offset_of(msg_id: &str) -> i64 {
    i64::from_str_radix(&msg_id[msg_id.len().saturating_sub(16)..], 16).unwrap_or(-1)
}
