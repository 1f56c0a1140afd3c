//! `rmq-operator`: `run` starts the controllers, `crd` prints the CRDs (`crd apply`
//! applies them to the cluster), `render` prints what the operator would create for given
//! custom resources.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use operator::builders::Settings;
use operator::controller::{RunConfig, run};

#[derive(Parser)]
#[command(
    name = "rmq-operator",
    version,
    about = "Kubernetes operator for rmq-rs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers.
    Run(RunArgs),
    /// Print the CustomResourceDefinitions as YAML (`crd apply`: apply them to the cluster).
    Crd {
        #[command(subcommand)]
        action: Option<CrdCommand>,
    },
    /// Print the objects the operator would create for the NameServer/Broker/Topic
    /// resources in a YAML file (`-` for stdin).
    Render {
        file: PathBuf,
        #[command(flatten)]
        images: ImageArgs,
    },
}

#[derive(Subcommand)]
enum CrdCommand {
    /// Server-side apply the CustomResourceDefinitions (field manager `rmq-operator-crds`,
    /// taking over conflicting fields) and wait until each is Established. What the Helm
    /// chart's pre-install/pre-upgrade hook runs; needs get/create/patch on
    /// customresourcedefinitions.
    Apply {
        /// Let the API server validate and admit the CRDs without storing them.
        #[arg(long)]
        dry_run: bool,
        /// How long the CRDs may take to become Established.
        #[arg(long, default_value_t = 120)]
        timeout_secs: u64,
    },
}

#[derive(clap::Args)]
struct ImageArgs {
    /// Cluster DNS domain used in the stable addresses.
    #[arg(long, env = "RMQ_CLUSTER_DOMAIN", default_value = "cluster.local")]
    cluster_domain: String,
    /// Default image of NameServer pods.
    #[arg(long, env = "RMQ_NAMESERVER_IMAGE")]
    nameserver_image: Option<String>,
    /// Default image of Broker pods.
    #[arg(long, env = "RMQ_BROKER_IMAGE")]
    broker_image: Option<String>,
}

impl ImageArgs {
    fn settings(self) -> Settings {
        let defaults = Settings::default();
        Settings {
            runbook_base_url: defaults.runbook_base_url,
            monitoring_labels: defaults.monitoring_labels,
            cluster_domain: self.cluster_domain,
            nameserver_image: self.nameserver_image.unwrap_or(defaults.nameserver_image),
            broker_image: self.broker_image.unwrap_or(defaults.broker_image),
        }
    }
}

#[derive(clap::Args)]
struct RunArgs {
    /// Watch only this namespace (all namespaces when unset).
    #[arg(long, env = "RMQ_WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Address of the /metrics, /healthz and /readyz endpoint.
    #[arg(long, env = "RMQ_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Elect a leader through a Lease, so two operators never act at once (several
    /// replicas, or the old and new pod of an upgrade). `--leader-election=false` only
    /// for a single replica whose Deployment uses the Recreate strategy.
    #[arg(long, env = "RMQ_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// Namespace of the Lease (normally the operator's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    #[arg(long, env = "RMQ_LEASE_NAME", default_value = "rmq-operator")]
    lease_name: String,
    /// This replica's identity in the Lease (normally its pod name).
    #[arg(long, env = "POD_NAME", default_value = "rmq-operator")]
    identity: String,
    /// How long a lease holds without renewal before another replica may take it.
    #[arg(long, default_value_t = 15)]
    lease_duration_secs: u64,
    /// The leader steps down (stops every controller and exits) when it could not renew
    /// for this long; must be shorter than the lease so it has stopped before anyone else
    /// can take over.
    #[arg(long, default_value_t = 10)]
    renew_deadline_secs: u64,
    /// Base URL of the runbooks the per-Broker alerts link to (`runbook_url`).
    #[arg(long, env = "RMQ_RUNBOOK_BASE_URL", default_value = operator::builders::DEFAULT_RUNBOOK_BASE_URL)]
    runbook_base_url: String,
    /// Extra label (`key=value`, repeatable) on the ServiceMonitors and PrometheusRules the
    /// operator creates, e.g. the label your Prometheus selects them by.
    #[arg(long = "monitoring-label", value_parser = parse_label)]
    monitoring_labels: Vec<(String, String)>,
    /// Timeout of one admin-protocol call to a broker or nameserver.
    #[arg(long, default_value_t = 5000)]
    admin_timeout_ms: u64,
    #[command(flatten)]
    images: ImageArgs,
}

/// `key=value` of `--monitoring-label`.
fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected key=value, got {s:?}")),
    }
}

async fn apply_crds(dry_run: bool, timeout: Duration) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API (in-cluster service account or kubeconfig)")?;
    let opts = operator::crd_apply::ApplyOptions {
        dry_run,
        timeout,
        ..operator::crd_apply::ApplyOptions::default()
    };
    let applied = operator::crd_apply::apply_all(&client, &operator::crd::all(), &opts).await?;
    let suffix = if dry_run { " (server dry run)" } else { "" };
    for a in applied {
        println!(
            "customresourcedefinition.apiextensions.k8s.io/{} {}{suffix}",
            a.name, a.change
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd { action: None } => {
            print!("{}", operator::crd::render_yaml()?);
            Ok(())
        }
        Command::Crd {
            action:
                Some(CrdCommand::Apply {
                    dry_run,
                    timeout_secs,
                }),
        } => apply_crds(dry_run, Duration::from_secs(timeout_secs)).await,
        Command::Render { file, images } => {
            let input = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?
            };
            print!("{}", operator::render::render(&input, &images.settings())?);
            Ok(())
        }
        Command::Run(args) => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| "info,kube=warn".into()),
                )
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                .json()
                .init();
            let lease_duration = Duration::from_secs(args.lease_duration_secs.max(3));
            let renew_deadline = Duration::from_secs(args.renew_deadline_secs.max(1));
            anyhow::ensure!(
                renew_deadline < lease_duration,
                "--renew-deadline-secs ({}) must be shorter than --lease-duration-secs ({})",
                renew_deadline.as_secs(),
                lease_duration.as_secs()
            );
            let config = RunConfig {
                namespace: args.namespace,
                metrics_addr: args.metrics_addr,
                leader_election: args.leader_election,
                lease_namespace: args.lease_namespace,
                lease_name: args.lease_name,
                identity: args.identity,
                lease_duration,
                renew_deadline,
                admin_timeout: Duration::from_millis(args.admin_timeout_ms),
                settings: Settings {
                    runbook_base_url: args.runbook_base_url,
                    monitoring_labels: args.monitoring_labels.into_iter().collect(),
                    ..args.images.settings()
                },
            };
            run(config).await?;
            Ok(())
        }
    }
}
