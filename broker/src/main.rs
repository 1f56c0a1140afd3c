//! `rmq-broker`: configured like RocketMQ's `mqbroker` (`-c broker.conf`, `-n namesrv`,
//! `-p` to print the effective configuration).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use anyhow::Context;
use broker::config::Config;
use broker::metrics::Metrics;
use broker::metrics::limits::Listener;
use broker::services::Broker;
use broker::services::put_path::BrokerStore;
use broker::services::registration::{self, Registrar};
use broker::transport::http::{self, Http};
use broker::transport::server;
use clap::Parser;
use protocol::message::QueueOffset;
use security::conn_gate::GatedListener;
use tokio::net::TcpListener;

/// Dispatch's arrivals wake the pulls parked on their queue (`NotifyMessageArrivingListener`).
struct WakeParkedPulls(Weak<Broker>);

impl store::dispatch::MessageArrivalListener for WakeParkedPulls {
    fn arriving(&self, m: &store::dispatch::ArrivedMessage<'_>) {
        if let Some(b) = self.0.upgrade() {
            // The store reports the queue's new max offset; the message sits just below it.
            let offset = QueueOffset(m.max_offset.get() - 1);
            b.pull_hold
                .on_arrival(m.topic, m.queue_id, offset, m.tags_code, m.properties);
        }
    }
}

#[derive(Debug, Parser)]
#[command(name = "rmq-broker", version, about = "RocketMQ 4.x-compatible broker")]
struct Cli {
    /// Broker config file (Java properties with RocketMQ's key names).
    #[arg(short = 'c', long = "configFile")]
    config: Option<PathBuf>,
    /// Nameserver address list `host:port;host:port`, overriding namesrvAddr.
    #[arg(short = 'n', long = "namesrvAddr")]
    namesrv: Option<String>,
    /// Print the effective configuration and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    print: bool,
}

/// Start-up errors go to stderr once, cause chain on one line, without a backtrace.
fn main() -> std::process::ExitCode {
    match start() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmq-broker: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn start() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut config = match &cli.config {
        Some(path) => {
            Config::load(path).with_context(|| format!("config file {}", path.display()))?
        }
        None => Config::default(),
    };
    if let Some(ns) = cli.namesrv {
        config.set("namesrvAddr", &ns)?;
    }
    if cli.print {
        print!("{}", config.render());
        print!("{}", broker::config::keys::unknown_comment_lines(&config));
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RMQ_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: a log file or collector gets plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    for (key, suggestion) in broker::config::keys::unknown_with_suggestions(&config) {
        match suggestion {
            Some(s) => tracing::warn!(key, did_you_mean = %s, "unknown configuration key ignored"),
            None => tracing::warn!(key, "unknown configuration key ignored"),
        }
    }
    config.store.validate()?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?
        .block_on(run(config))
}

async fn run(config: Config) -> anyhow::Result<()> {
    let started = Instant::now();
    let metrics = Arc::new(Metrics::new());
    let http = Arc::new(Http {
        metrics: Arc::clone(&metrics),
        broker: OnceLock::new(),
    });
    // Built before the metrics port opens: with tls.metrics.enable it serves HTTPS from
    // the start, recovery included. A certificate that does not load stops the broker
    // here, before a long recovery.
    let tls = broker::services::state::server_tls(&config.broker).context("cannot set up TLS")?;
    let metrics_tls =
        security::http_stream::metrics_tls(tls.as_ref(), config.broker.tls_metrics_enable)?;
    let http_addr = SocketAddr::new(config.broker.bind_address, config.broker.metrics_port);
    let http_listener = GatedListener {
        inner: TcpListener::bind(http_addr)
            .await
            .with_context(|| format!("cannot listen on {http_addr} (metricsPort)"))?,
        gate: broker::gates::gate(&config.broker, &metrics.limits, Listener::Http),
        idle: Duration::from_millis(config.broker.http_idle_timeout_millis.max(100)),
        idle_closed: metrics.limits.http_idle_closed.clone(),
        tls: metrics_tls,
    };
    let http_shutdown = tokio_util::sync::CancellationToken::new();
    let http_task = tokio::spawn(http::serve_http(
        http_listener,
        Arc::clone(&http),
        http_shutdown.clone(),
    ));

    // Recovery may take long: /healthz answers meanwhile, /readyz says "recovering".
    let store_config = config.store.clone();
    let store = tokio::task::spawn_blocking(move || store::MessageStore::open(store_config))
        .await
        .context("store recovery task")?
        .context("cannot open the message store")?;
    let store = Arc::new(store);
    let replicate = broker::services::ha::enabled(&config).map_err(anyhow::Error::msg)?;
    let ha = if replicate {
        let ha = broker::services::ha::Ha::new(
            broker::services::ha::HaSettings::from_config(&config),
            Arc::clone(&store) as Arc<dyn store::ReplicaStore>,
            config.broker.ha_master_address.clone(),
        );
        ha.begin_term()
            .context("cannot record this master's new epoch")?;
        Some(ha)
    } else {
        tracing::info!(
            "haSecret is empty and brokerRole=ASYNC_MASTER: running without replication"
        );
        None
    };
    let store: Arc<BrokerStore> = store;
    let broker = Broker::open_with_tls(config, Arc::clone(&store), metrics, tls)
        .context("cannot load broker metadata")?;
    store.set_arrival_listener(Arc::new(WakeParkedPulls(Arc::downgrade(&broker))));
    let _ = http.broker.set(Arc::clone(&broker));
    let ha_tasks = match &ha {
        Some(ha) => {
            let _ = broker.ha.set(Arc::clone(ha));
            broker::services::ha::start(&broker, ha)
        }
        None => Vec::new(),
    };
    let tls_watcher = broker.tls.as_ref().map(|tls| {
        let every = Duration::from_millis(broker.config.broker.tls_file_check_interval_ms);
        tracing::info!(
            mode = %tls.mode(),
            metrics_port = broker.config.broker.tls_metrics_enable,
            "TLS on the remoting port"
        );
        tls.spawn_watcher(every, broker.shutdown.clone())
    });
    let acl_watcher = broker.acl.as_ref().map(|acl| {
        let every = Duration::from_millis(broker.config.broker.acl_file_check_interval_ms);
        tracing::info!(path = %acl.path().display(), "ACL enabled");
        acl.spawn_watcher(every, broker.shutdown.clone())
    });

    let listener = server::bind(&broker).await?;
    let fast = server::bind_fast(&broker).await?;
    let local = listener.local_addr()?;
    let fast_local = fast.as_ref().and_then(|l| l.local_addr().ok());
    let grpc = broker::grpc::server::bind(&broker).await?;
    let grpc_local = grpc.as_ref().and_then(|l| l.local_addr().ok());
    let registrar = Arc::new(Registrar::new(&broker));
    let accept = tokio::spawn(server::accept_loop(listener, Arc::clone(&broker)));
    let fast_accept = fast.map(|l| tokio::spawn(server::serve_listener(l, Arc::clone(&broker))));
    let grpc_task = grpc.map(|l| tokio::spawn(broker::grpc::server::serve(l, Arc::clone(&broker))));
    let registration = tokio::spawn(registration::run(
        Arc::clone(&broker),
        Arc::clone(&registrar),
    ));
    let tasks = [
        tokio::spawn(server::flush_offsets(Arc::clone(&broker))),
        tokio::spawn(server::expire_clients(Arc::clone(&broker))),
        tokio::spawn(broker::services::schedule::run(Arc::clone(&broker))),
        tokio::spawn(broker::services::transaction::checker::run(Arc::clone(
            &broker,
        ))),
    ];
    let b = &broker.config.broker;
    tracing::info!(remoting = %local, vip = ?fast_local, grpc = ?grpc_local, http = %http_addr, elapsed = ?started.elapsed(), "broker started");
    println!(
        "The broker[{}, {}] boot success. serializeType=JSON and name server is {}",
        b.broker_name,
        b.broker_addr(),
        b.namesrv_addr.as_deref().unwrap_or("")
    );

    wait_for_signal().await;
    // Leave the routes before closing anything: no registration may follow the
    // unregistration, then clients learn of it on their next route refresh while this
    // broker still answers them (a broker that stopped accepting before it unregistered
    // left clients sending to a closed port for up to 30 s).
    registration.abort();
    let _ = registration.await;
    registrar.unregister_all(&broker).await;
    let wait = Duration::from_millis(broker.config.broker.shutdown_unregister_wait_ms);
    tracing::info!(
        ?wait,
        "unregistered; serving until the wait is over, then shutting down"
    );
    tokio::select! {
        _ = tokio::time::sleep(wait) => {}
        // A second signal cuts the wait short.
        _ = wait_for_signal() => {}
    }
    broker.shutdown.cancel();
    let _ = accept.await;
    if let Some(t) = fast_accept {
        let _ = t.await;
    }
    if let Some(t) = grpc_task {
        let _ = t.await;
    }
    for t in tasks
        .into_iter()
        .chain(ha_tasks)
        .chain(acl_watcher)
        .chain(tls_watcher)
    {
        let _ = t.await;
    }
    let b2 = Arc::clone(&broker);
    tokio::task::spawn_blocking(move || {
        b2.persist_all();
        if let Err(e) = b2.store.shutdown() {
            tracing::error!(error = %e, "store shutdown failed");
        }
    })
    .await
    .context("shutdown task")?;
    http_shutdown.cancel();
    let _ = http_task.await;
    tracing::info!("broker stopped");
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
