//! Running the command-line tools (`rmqctl`, `rmq-bench`) as real processes.

use std::process::{Command, Stdio};

/// What a finished command left behind.
#[derive(Debug)]
pub struct CliOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// stdout as JSON; panics with both streams when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// Panics unless the exit code is 0.
    pub fn ok(self) -> Self {
        assert_eq!(self.code, 0, "command failed: {self:?}");
        self
    }
}

/// Runs binary `name` (found like the servers, see [`crate::binary::path`]) to completion.
pub fn run(name: &str, args: &[&str]) -> CliOutput {
    let out = Command::new(crate::binary::path(name))
        .args(args)
        .env_remove("NAMESRV_ADDR")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
    CliOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `rmqctl -n 127.0.0.1:<port> -o json <args>`.
pub fn rmqctl_json(namesrv_port: u16, args: &[&str]) -> CliOutput {
    let ns = format!("127.0.0.1:{namesrv_port}");
    let mut all = vec!["-n", ns.as_str(), "-o", "json"];
    all.extend_from_slice(args);
    run("rmqctl", &all)
}
