//! Starting and stopping a real `rmq-nameserver` process.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::{binary, ports};

/// Options for [`NameServer::start`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Extra `key=value` lines for namesrv.conf.
    pub config: Vec<(String, String)>,
    /// Extra command-line arguments.
    pub args: Vec<String>,
}

impl Options {
    pub fn config(mut self, key: &str, value: impl ToString) -> Self {
        self.config.push((key.to_owned(), value.to_string()));
        self
    }
}

/// A running nameserver; killed (SIGKILL) when dropped.
pub struct NameServer {
    child: Child,
    pub port: u16,
    pub http_port: u16,
    data_dir: PathBuf,
    _temp: Option<TempDir>,
}

impl NameServer {
    /// Starts a nameserver with a fresh temporary data directory.
    pub fn start(options: Options) -> Self {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().to_path_buf();
        let mut server = Self::start_in(&dir, options);
        server._temp = Some(temp);
        server
    }

    /// Starts a nameserver whose config, KV file and log live in `dir` (kept after it
    /// stops, so a restart can reuse it).
    pub fn start_in(dir: &Path, options: Options) -> Self {
        let port = ports::free_port();
        let http_port = ports::free_port();
        let mut conf = format!(
            "listenPort={port}\nmetricsPort={http_port}\nbindAddress=127.0.0.1\nkvConfigPath={}\n",
            dir.join("kvConfig.json").display()
        );
        for (k, v) in &options.config {
            conf.push_str(&format!("{k}={v}\n"));
        }
        let conf_path = dir.join("namesrv.conf");
        fs::write(&conf_path, conf).expect("write namesrv.conf");
        let log = File::create(dir.join("namesrv.log")).expect("create log file");
        let child = Command::new(binary::path("rmq-nameserver"))
            .arg("-c")
            .arg(&conf_path)
            .args(&options.args)
            .env("HOME", dir)
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn rmq-nameserver");
        let mut server = Self {
            child,
            port,
            http_port,
            data_dir: dir.to_path_buf(),
            _temp: None,
        };
        server.wait_ready(Duration::from_secs(30));
        server
    }

    fn wait_ready(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "rmq-nameserver exited early ({status}); log:\n{}",
                    self.log()
                );
            }
            if readyz(self.http_port) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "rmq-nameserver did not listen on {} in time; log:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The process's stderr so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.data_dir.join("namesrv.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident anonymous memory (`RssAnon` of /proc/<pid>/status), in KiB.
    pub fn anon_rss_kib(&self) -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self, within: Duration) -> Option<std::process::ExitStatus> {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for NameServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `GET /readyz` on the metrics port answers 200. The nameserver binds both ports
/// before it reports ready, so this proves the remoting port listens without opening a
/// remoting connection: a probe there would hold one of a connection-capped server's
/// slots until the server got round to accepting and closing it (a race the cap tests
/// lost under load). Blocking I/O: callers may be inside a runtime.
fn readyz(http_port: u16) -> bool {
    use std::io::{Read, Write};
    let probe = || -> std::io::Result<bool> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", http_port))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head)?;
        Ok(head.starts_with(b"HTTP/1.1 200"))
    };
    probe().unwrap_or(false)
}
