//! Resolving which brokers a command talks to.

use anyhow::{Context, Result, bail};
use protocol::body::TopicRouteData;
use remoting::client::namesrv::brokers;
use remoting::client::{Client, ClientError, Peer};

use crate::args::Targets;
use crate::failure::Failure;

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
        bail!(Failure::Unreachable(format!(
            "nameserver {} lists no master broker{}: the brokers are down or cannot reach it",
            client.namesrv_addrs().join(";"),
            targets
                .cluster
                .as_deref()
                .map(|c| format!(" in cluster {c}"))
                .unwrap_or_default()
        )));
    }
    Ok(masters
        .into_iter()
        .map(|b| Target {
            name: b.broker_name,
            peer: Peer::Broker(b.addr),
        })
        .collect())
}

/// The route of `topic`, see [`explain_missing_route`] for a topic without one.
pub async fn topic_route(client: &Client, topic: &str) -> Result<TopicRouteData> {
    match client.topic_route(topic).await {
        Ok(route) => Ok(route),
        Err(e) => Err(explain_missing_route(client, e.into()).await),
    }
}

/// A route lookup that failed without the nameserver being unreachable: when the
/// nameserver lists no broker at all, the topic is not missing, its brokers are down. The
/// nameserver forgets a broker as soon as its connection closes (4.9's
/// `RouteInfoManager.onChannelDestroy`), so with every broker stopped any topic looks
/// unknown; that is reported as unreachable (exit 3) instead.
pub async fn explain_missing_route(client: &Client, e: anyhow::Error) -> anyhow::Error {
    let unreachable = e
        .chain()
        .filter_map(|c| c.downcast_ref::<ClientError>())
        .any(ClientError::is_unreachable);
    if unreachable {
        return e;
    }
    match client.cluster_info().await {
        Ok(info) if brokers(&info).is_empty() => Failure::Unreachable(format!(
            "no broker is reachable: nameserver {} lists no broker (every broker is down or \
             cannot reach the nameserver), so it knows no topic's route",
            client.namesrv_addrs().join(";")
        ))
        .into(),
        _ => e,
    }
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
