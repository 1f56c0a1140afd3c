//! Resolving which brokers a command talks to.

use anyhow::{Result, bail};
use protocol::body::TopicRouteData;
use rmq_cli::client::{Client, Peer};

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
