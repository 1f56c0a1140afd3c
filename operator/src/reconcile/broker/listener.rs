//! External listener phase of a Broker reconcile: the per-pod Services are applied
//! first, their addresses read back, and Services no longer wanted (listener back to
//! `internal`, fewer replicas or groups) removed. Pods that have no address yet are not
//! started (see `builders::listener::startable_replicas`) and the Broker is not Ready.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ListParams};

use crate::builders::listener::{
    Advertised, LABEL_LISTENER, LISTENER_EXTERNAL, advertised, allocated_node_ports,
    external_services, service_name,
};
use crate::conditions::{self, Desired};
use crate::crd::{Broker, ExternalAddress};
use crate::names::{BrokerNames, selector_string};
use crate::reconcile::apply::apply;
use crate::reconcile::{Context, Error};

/// What the external listener looks like after this reconcile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listener {
    /// What each pod whose Service has an address advertises.
    pub hosts: BTreeMap<String, Advertised>,
    /// Pods whose Service has no address yet.
    pub waiting: Vec<String>,
}

impl Listener {
    /// `status.externalAddresses`: what clients are given, `host:port` by pod.
    pub fn addresses(&self) -> Vec<ExternalAddress> {
        self.hosts
            .iter()
            .map(|(pod, a)| ExternalAddress {
                pod: pod.clone(),
                address: format!("{}:{}", a.host, a.port),
                grpc_address: a.grpc_port.map(|p| format!("{}:{p}", a.host)),
            })
            .collect()
    }
}

/// Addresses recorded in the Broker's status (for writers that do not read the Services).
pub fn recorded_hosts(broker: &Broker) -> BTreeMap<String, Advertised> {
    broker
        .status
        .as_ref()
        .map(|s| {
            s.external_addresses
                .iter()
                .filter_map(|a| {
                    let (host, port) = a.address.rsplit_once(':')?;
                    let grpc_port = match &a.grpc_address {
                        Some(g) => Some(g.rsplit_once(':')?.1.parse().ok()?),
                        None => None,
                    };
                    let advertised = Advertised {
                        host: host.to_owned(),
                        port: port.parse().ok()?,
                        grpc_port,
                    };
                    (!host.is_empty()).then(|| (a.pod.clone(), advertised))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub async fn reconcile_listener(
    ctx: &Context,
    broker: &Broker,
    names: &BrokerNames,
) -> Result<Listener, Error> {
    let mut listener = Listener::default();
    let mut wanted = BTreeSet::new();
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), &names.namespace);
    for group in 0..broker.spec.groups.max(0) {
        // Node ports the API server already gave this group's Services: the pods listen
        // on them, so the Services must target them.
        let mut node_ports = BTreeMap::new();
        if broker.spec.listener.external() {
            for o in 0..broker.spec.replicas_per_group.max(0) {
                let pod = names.pod(group, o);
                if let Some(ports) = api
                    .get_opt(&service_name(&pod))
                    .await?
                    .as_ref()
                    .and_then(allocated_node_ports)
                {
                    node_ports.insert(pod, ports);
                }
            }
        }
        // One Service per ordinal, in order.
        for (ordinal, svc) in (0..).zip(external_services(broker, names, group, &node_ports)) {
            let pod = names.pod(group, ordinal);
            let mut applied = apply(&ctx.client, &svc).await?;
            if let Some(ports) = allocated_node_ports(&applied)
                && node_ports.get(&pod) != Some(&ports)
            {
                // Just allocated: target them right away (no pod listens there yet).
                node_ports.insert(pod.clone(), ports);
                let fixed = external_services(broker, names, group, &node_ports);
                if let Some(svc) = fixed.get(ordinal as usize) {
                    applied = apply(&ctx.client, svc).await?;
                }
            }
            wanted.insert(applied.metadata.name.clone().unwrap_or_default());
            match advertised(broker, &applied) {
                Some(a) => {
                    listener.hosts.insert(pod, a);
                }
                None => listener.waiting.push(pod),
            }
        }
    }
    let mut selector = names.selector();
    selector.insert(LABEL_LISTENER.to_owned(), LISTENER_EXTERNAL.to_owned());
    let existing = api
        .list(&ListParams::default().labels(&selector_string(&selector)))
        .await?;
    for svc in existing.items {
        let name = svc.metadata.name.unwrap_or_default();
        if !wanted.contains(&name) {
            api.delete(&name, &DeleteParams::default()).await?;
        }
    }
    Ok(listener)
}

/// Until every pod has its address the Broker is not Ready: clients outside could not
/// reach the pods still waiting (they are not started yet).
pub fn awaiting_addresses(desired: &mut Vec<Desired>, waiting: &[String]) {
    desired.retain(|d| d.type_ != conditions::READY);
    desired.push(Desired::new(
        conditions::READY,
        false,
        "AwaitingExternalAddress",
        format!(
            "no external address yet for {}; those pods start once it is known",
            waiting.join(", ")
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BrokerSpec, BrokerStatus};

    #[test]
    fn recorded_addresses_give_back_their_hosts() {
        let mut b = Broker::new("b", BrokerSpec::default());
        b.status = Some(BrokerStatus {
            external_addresses: vec![
                ExternalAddress {
                    pod: "b-0-0".to_owned(),
                    address: "203.0.113.7:10911".to_owned(),
                    grpc_address: Some("203.0.113.7:8081".to_owned()),
                },
                ExternalAddress {
                    pod: "b-0-1".to_owned(),
                    address: "lb.example.com:10911".to_owned(),
                    grpc_address: Some("lb.example.com:8081".to_owned()),
                },
            ],
            ..BrokerStatus::default()
        });
        let at = |host: &str| Advertised {
            host: host.to_owned(),
            port: 10911,
            grpc_port: Some(8081),
        };
        assert_eq!(
            recorded_hosts(&b),
            BTreeMap::from([
                ("b-0-0".to_owned(), at("203.0.113.7")),
                ("b-0-1".to_owned(), at("lb.example.com")),
            ])
        );
        let l = Listener {
            hosts: recorded_hosts(&b),
            waiting: Vec::new(),
        };
        assert_eq!(l.addresses(), b.status.unwrap().external_addresses);
    }
}
