//! `rmq-nameserver`: a RocketMQ 4.9-compatible nameserver.
//!
//! Configuration follows `mqnamesrv`: `-c namesrv.conf` (Java properties with
//! RocketMQ's key names), `-p` prints the effective configuration and exits, and the
//! flags below override the file.

mod acl;
mod admin_gate;
mod config;
mod connection;
mod dispatch;
mod handlers;
mod kv_config;
mod limits;
mod metrics;
mod route_table;
mod server;
mod state;

use std::io::IsTerminal;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use remoting::properties;
use tokio_util::sync::CancellationToken;

use crate::config::NamesrvConfig;
use crate::kv_config::KvConfig;
use crate::state::Shared;

#[derive(Debug, Parser)]
#[command(
    name = "rmq-nameserver",
    version,
    about = "RocketMQ-compatible nameserver"
)]
struct Cli {
    /// Properties file with RocketMQ nameserver keys (listenPort, kvConfigPath, ...).
    #[arg(short = 'c', long = "configFile")]
    config_file: Option<PathBuf>,
    /// Print the effective configuration and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
    /// Remoting port (listenPort).
    #[arg(long, env = "RMQ_NAMESRV_LISTEN_PORT")]
    listen_port: Option<u16>,
    /// Address to bind both ports to (bindAddress).
    #[arg(long)]
    bind_address: Option<IpAddr>,
    /// HTTP port for /metrics, /healthz, /readyz (metricsPort).
    #[arg(long)]
    metrics_port: Option<u16>,
    /// KV config file (kvConfigPath).
    #[arg(long)]
    kv_config_path: Option<PathBuf>,
    /// Fill orderTopicConf of routes from the ORDER_TOPIC_CONFIG namespace.
    #[arg(long)]
    order_message_enable: Option<bool>,
    /// Drop a broker silent this long, in ms (brokerChannelExpiredMillis).
    #[arg(long)]
    broker_expiry_ms: Option<u64>,
    /// Check brokers for expiry this often, in ms (scanNotActiveBrokerIntervalMillis).
    #[arg(long)]
    scan_interval_ms: Option<u64>,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long)]
    log_json: bool,
}

impl Cli {
    fn effective_config(&self) -> anyhow::Result<NamesrvConfig> {
        let mut config = NamesrvConfig::default();
        if let Some(path) = &self.config_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config file {}", path.display()))?;
            let unknown = config
                .apply_properties(&text)
                .with_context(|| format!("in config file {}", path.display()))?;
            for key in unknown {
                tracing::warn!(%key, file = %path.display(), "unknown config key ignored");
            }
        }
        // The operator passes secrets through the environment, never a ConfigMap.
        if config.admin_secrets.is_empty()
            && let Ok(secrets) = std::env::var("RMQ_ADMIN_SECRET")
        {
            config
                .set("adminSecret", &secrets)
                .context("environment variable RMQ_ADMIN_SECRET")?;
        }
        if let Some(v) = self.listen_port {
            config.listen_port = v;
        }
        if let Some(v) = self.bind_address {
            config.bind_address = v;
        }
        if let Some(v) = self.metrics_port {
            config.metrics_port = v;
        }
        if let Some(v) = &self.kv_config_path {
            config.kv_config_path = v.clone();
        }
        if let Some(v) = self.order_message_enable {
            config.order_message_enable = v;
        }
        if let Some(ms) = self.broker_expiry_ms.filter(|&ms| ms > 0) {
            config.broker_channel_expired = Duration::from_millis(ms);
        }
        if let Some(ms) = self.scan_interval_ms.filter(|&ms| ms > 0) {
            config.scan_not_active_broker_interval = Duration::from_millis(ms);
        }
        Ok(config)
    }
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: a log file or collector gets plain text.
        .with_ansi(std::io::stderr().is_terminal());
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Start-up errors go to stderr once, cause chain on one line, without a backtrace.
fn main() -> std::process::ExitCode {
    match start() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmq-nameserver: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn start() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    let config = cli.effective_config()?;
    if cli.print_config {
        print!("{}", properties::render(config.entries()));
        return Ok(());
    }
    let kv = KvConfig::load(config.kv_config_path(), config.table_limits.kv.clone())
        .context("loading KV config")?;
    let acl = if config.acl_enable {
        let path = config.acl_file_path();
        let store = security::acl::AclStore::open(&path)
            .with_context(|| "aclEnable=true needs a valid aclFile".to_string())?;
        tracing::info!(path = %path.display(), "ACL enabled: state-changing requests need an admin signature");
        Some(Arc::new(store))
    } else {
        None
    };
    let acl_interval = config.acl_file_check_interval;
    let tls =
        security::tls::TlsServer::new(config.tls.clone()).context("TLS settings (tls.server.*)")?;
    let tls_interval = config.tls_file_check_interval;
    let shared = Arc::new(Shared::new(config, kv).with_acl(acl).with_tls(tls));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("namesrv")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        tokio::spawn(wait_for_signal(shutdown.clone()));
        if let Some(acl) = &shared.acl {
            acl.spawn_watcher(acl_interval, shutdown.clone());
        }
        if let Some(tls) = &shared.tls {
            tracing::info!(mode = %tls.mode(), "TLS on the remoting port");
            tls.spawn_watcher(tls_interval, shutdown.clone());
        }
        server::run(shared, shutdown).await
    })
}

/// SIGTERM or SIGINT starts a graceful shutdown.
async fn wait_for_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM");
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
    }
    shutdown.cancel();
}
