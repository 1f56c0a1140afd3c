//! The external listener's part of a Broker reconcile: the per-pod Services are applied
//! first, their addresses read back, and Services no longer wanted (listener back to
//! `internal`, fewer replicas or groups) removed. Pods that have no address yet are not
//! started (see `builders::listener::startable_replicas`) and the Broker is not Ready.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ListParams};

use super::apply::apply;
use super::{Context, Error};
use crate::builders::listener::{
    LABEL_LISTENER, LISTENER_EXTERNAL, advertised_host, external_services,
};
use crate::conditions::{self, Desired};
use crate::crd::{Broker, ExternalAddress};
use crate::names::{BROKER_PORT, BrokerNames, selector_string};

/// What the external listener looks like after this reconcile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listener {
    /// Advertised host of each pod whose Service has an address.
    pub hosts: BTreeMap<String, String>,
    /// Pods whose Service has no address yet.
    pub waiting: Vec<String>,
}

impl Listener {
    /// `status.externalAddresses`: what clients are given, `host:port` by pod.
    pub fn addresses(&self) -> Vec<ExternalAddress> {
        self.hosts
            .iter()
            .map(|(pod, host)| ExternalAddress {
                pod: pod.clone(),
                address: format!("{host}:{BROKER_PORT}"),
            })
            .collect()
    }
}

/// Hosts recorded in the Broker's status (for writers that do not read the Services).
pub fn recorded_hosts(broker: &Broker) -> BTreeMap<String, String> {
    broker
        .status
        .as_ref()
        .map(|s| {
            s.external_addresses
                .iter()
                .filter_map(|a| {
                    let host = a
                        .address
                        .rsplit_once(':')
                        .map_or(a.address.as_str(), |(h, _)| h);
                    (!host.is_empty()).then(|| (a.pod.clone(), host.to_owned()))
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
    for group in 0..broker.spec.groups.max(0) {
        // One Service per ordinal, in order.
        for (ordinal, svc) in (0..).zip(external_services(broker, names, group)) {
            let applied = apply(&ctx.client, &svc).await?;
            let pod = names.pod(group, ordinal);
            wanted.insert(applied.metadata.name.clone().unwrap_or_default());
            match advertised_host(&applied) {
                Some(host) => {
                    listener.hosts.insert(pod, host);
                }
                None => listener.waiting.push(pod),
            }
        }
    }
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), &names.namespace);
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
            "no load balancer address yet for {}; those pods start once it is known",
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
                },
                ExternalAddress {
                    pod: "b-0-1".to_owned(),
                    address: "lb.example.com:10911".to_owned(),
                },
            ],
            ..BrokerStatus::default()
        });
        assert_eq!(
            recorded_hosts(&b),
            BTreeMap::from([
                ("b-0-0".to_owned(), "203.0.113.7".to_owned()),
                ("b-0-1".to_owned(), "lb.example.com".to_owned()),
            ])
        );
        let l = Listener {
            hosts: recorded_hosts(&b),
            waiting: Vec::new(),
        };
        assert_eq!(l.addresses(), b.status.unwrap().external_addresses);
    }
}
