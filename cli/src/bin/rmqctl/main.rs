//! `rmqctl`: RocketMQ administration from the command line, in the spirit of `mqadmin`.
//!
//! Exit codes: 0 success; 1 the nameserver or a broker refused the request (or the
//! thing asked for does not exist); 2 bad command line; 3 a nameserver or broker could
//! not be reached (or the nameserver lists no broker). With `-o json` a failure is also
//! printed on stdout as `{"error": ..., "exitCode": ...}`.

mod args;
mod broker;
mod consumer;
mod dlq;
mod failure;
mod group;
mod message;
mod ops;
mod ops_args;
mod output;
mod targets;
mod topic;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use remoting::client::{Client, ClientError};

use args::{Cli, Command};
use output::Report;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            let _ = e.print();
            if json_requested(std::env::args().skip(1)) {
                // clap's own text, without the usage and "try --help" paragraphs.
                let rendered = e.render().to_string();
                let first = rendered.split("\n\n").next().unwrap_or_default();
                let message = first
                    .trim_start_matches("error: ")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                let doc = serde_json::json!({ "error": message, "exitCode": 2 });
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            }
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return fail(
                cli.output,
                &format!("cannot start the async runtime: {e}"),
                1,
            );
        }
    };
    let credentials = match cli.auth.credentials() {
        Ok(c) => c,
        Err(e) => return fail(cli.output, &e.to_string(), 2),
    };
    let tls = match cli.tls.client() {
        Ok(t) => t,
        Err(e) => return fail(cli.output, &e.to_string(), 2),
    };
    let client = Client::new(&cli.namesrv, Duration::from_millis(cli.timeout_ms))
        .with_credentials(credentials)
        .with_tls(tls);
    match runtime.block_on(run(&client, cli.command)) {
        Ok(report) => {
            print!("{}", report.render(cli.output));
            ExitCode::from(report.exit_code)
        }
        Err(e) => fail(cli.output, &format!("{e:#}"), exit_code(&e)),
    }
}

/// Whether a command line that did not parse still asked for `-o json`.
fn json_requested(args: impl Iterator<Item = String>) -> bool {
    let mut prev_is_flag = false;
    for a in args {
        if prev_is_flag && a == "json" {
            return true;
        }
        if matches!(a.as_str(), "-ojson" | "--output=json") {
            return true;
        }
        prev_is_flag = matches!(a.as_str(), "-o" | "--output");
    }
    false
}

/// Reports a failure: always as text on stderr; with `-o json` also as
/// `{"error": ..., "exitCode": ...}` on stdout, so a script reading stdout gets a document.
fn fail(format: output::Format, message: &str, code: u8) -> ExitCode {
    eprintln!("rmqctl: error: {message}");
    if format == output::Format::Json {
        let doc = serde_json::json!({ "error": message, "exitCode": code });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    }
    ExitCode::from(code)
}

fn exit_code(e: &anyhow::Error) -> u8 {
    if let Some(f) = e.chain().find_map(|c| c.downcast_ref::<failure::Failure>()) {
        return f.exit_code();
    }
    match e.chain().find_map(|c| c.downcast_ref::<ClientError>()) {
        Some(c) if c.is_unreachable() => 3,
        Some(ClientError::NoNameServer) => 2,
        _ => 1,
    }
}

async fn run(client: &Client, command: Command) -> anyhow::Result<Report> {
    match command {
        Command::Cluster(c) => topic::cluster(client, c).await,
        Command::Topic(c) => topic::run(client, c).await,
        Command::Group(c) => group::run(client, c).await,
        Command::Consumer(c) => consumer::run(client, c).await,
        Command::Message(c) => message::run(client, c).await,
        Command::Broker(c) => broker::run(client, c).await,
        Command::Kv(c) => broker::kv(client, c).await,
        Command::Producer(c) => ops::producer(client, c).await,
        Command::Nameserver(c) => ops::nameserver(client, c).await,
    }
}
