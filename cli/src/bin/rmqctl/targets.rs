//! Resolving which brokers a command talks to.

use anyhow::{Context, Result, bail};
use protocol::body::TopicRouteData;
use remoting::client::{Client, Peer};

use crate::args::Targets;

/// A broker to talk to: its name (when known) and address.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub peer: Peer,
}

impl Target {
    pub fn addr(&self) -> &str {
        self.peer.addr()
    }
}

/// `-b` alone, the masters of `-c`, or every master.
pub async fn resolve(client: &Client, targets: &Targets) -> Result<Vec<Target>> {
    if let Some(addr) = &targets.broker {
        return Ok(vec![Target {
            name: "-".to_owned(),
            peer: Peer::Broker(addr.clone()),
        }]);
    }
    let masters = client.master_brokers(targets.cluster.as_deref()).await?;
    if masters.is_empty() {
        bail!(
            "nameserver {} lists no master broker{}",
            client.namesrv_addrs().join(";"),
            targets
                .cluster
                .as_deref()
                .map(|c| format!(" in cluster {c}"))
                .unwrap_or_default()
        );
    }
    Ok(masters
        .into_iter()
        .map(|b| Target {
            name: b.broker_name,
            peer: Peer::Broker(b.addr),
        })
        .collect())
}

/// The master of every broker in `route`.
pub fn route_masters(route: &TopicRouteData) -> Vec<Target> {
    route
        .broker_datas
        .iter()
        .filter_map(|b| {
            b.master_addr().map(|addr| Target {
                name: b.broker_name.clone(),
                peer: Peer::Broker(addr.to_owned()),
            })
        })
        .collect()
}

/// Writes `config` to every target (`create` also serves as update on a broker); an error
/// names the broker it came from.
pub async fn write_each<C>(
    targets: &[Target],
    what: &str,
    config: &C,
    write: impl AsyncFn(&Target, &C) -> Result<()>,
) -> Result<()> {
    for t in targets {
        write(t, config)
            .await
            .with_context(|| format!("{what} on broker {} ({})", t.name, t.addr()))?;
    }
    Ok(())
}

/// Read-modify-write of an existing config on every target: `fetch` finds the broker's
/// current one (an error names the `create` subcommand when it is missing), `apply`
/// changes it, `write` stores it. Returns the last config written.
pub async fn update_each<C>(
    targets: &[Target],
    kind: &str,
    name: &str,
    fetch: impl AsyncFn(&Target) -> Result<Option<C>>,
    apply: impl Fn(&mut C) -> Result<()>,
    write: impl AsyncFn(&Target, &C) -> Result<()>,
) -> Result<C> {
    let mut last = None;
    for t in targets {
        let Some(mut config) = fetch(t).await? else {
            bail!(
                "{kind} {name} does not exist on broker {} ({}); use `{kind} create`",
                t.name,
                t.addr()
            );
        };
        apply(&mut config)?;
        write(t, &config).await.with_context(|| {
            format!("updating {kind} {name} on broker {} ({})", t.name, t.addr())
        })?;
        last = Some(config);
    }
    last.context("no broker to update")
}
