//! One NetworkPolicy per broker group. The HA port (replication, with its own handshake
//! secret) is reachable only from pods of the same group; the remoting port (clients,
//! admin requests), its VIP twin and the gRPC port (5.x clients), and the HTTP port (metrics, probes), are open to the
//! peers the spec lists, or to everyone when it lists none. When the remoting peers are
//! restricted, the cluster's own broker pods (a slave's requests to its master) and the
//! operator's pods (admin requests) stay allowed.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use crate::crd::Broker;
use crate::names::{BROKER_HA_PORT, BROKER_PORT, BrokerNames, LABEL_NAME, object_labels};

/// The VIP port (`fastListenPort`, `listenPort - 2` as 4.9's `BrokerController` derives
/// it): 4.9 clients send there by default (`vipChannelEnabled`).
pub const BROKER_VIP_PORT: i32 = BROKER_PORT - 2;

/// `app.kubernetes.io/name` of the operator's pods (the chart's selector label).
pub const OPERATOR_POD_NAME_LABEL: &str = "rmq-operator";

/// `listen_ports`: node ports the group's brokers listen on (a `nodeport` listener), open
/// like the remoting port.
pub fn build(
    broker: &Broker,
    names: &BrokerNames,
    group: i32,
    listen_ports: &[i32],
) -> Option<NetworkPolicy> {
    let spec = &broker.spec.security.network_policy;
    if !spec.enabled {
        return None;
    }
    let selector = |labels: BTreeMap<String, String>| LabelSelector {
        match_labels: Some(labels),
        match_expressions: None,
    };
    let group_pods = NetworkPolicyPeer {
        pod_selector: Some(selector(names.group_selector(group))),
        ..NetworkPolicyPeer::default()
    };
    let mut remoting_from = spec.remoting_from.clone();
    if !remoting_from.is_empty() {
        remoting_from.push(NetworkPolicyPeer {
            pod_selector: Some(selector(names.selector())),
            ..NetworkPolicyPeer::default()
        });
        remoting_from.push(NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector::default()),
            pod_selector: Some(selector(BTreeMap::from([(
                LABEL_NAME.to_owned(),
                OPERATOR_POD_NAME_LABEL.to_owned(),
            )]))),
            ..NetworkPolicyPeer::default()
        });
    }
    let rule = |ports: &[i32], from: Vec<NetworkPolicyPeer>| NetworkPolicyIngressRule {
        ports: Some(ports.iter().map(|p| tcp(*p)).collect()),
        // No `from`: every source.
        from: (!from.is_empty()).then_some(from),
    };
    let labels = object_labels(&names.group_selector(group));
    Some(NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(names.broker_name(group)),
            namespace: broker.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: broker.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(names.group_selector(group))),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(vec![
                rule(&[BROKER_HA_PORT], vec![group_pods]),
                // Clients: 4.x remoting, its VIP twin and the 5.x gRPC endpoint.
                rule(
                    &[
                        &[BROKER_PORT, BROKER_VIP_PORT][..],
                        broker.spec.grpc.enabled_port().as_slice(),
                        listen_ports,
                    ]
                    .concat(),
                    remoting_from,
                ),
                rule(&[broker.spec.metrics.port], spec.metrics_from.clone()),
            ]),
            egress: None,
        }),
    })
}

fn tcp(port: i32) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".to_owned()),
        end_port: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BrokerSpec;

    fn broker(spec: BrokerSpec) -> Broker {
        let mut b = Broker::new("b", spec);
        b.metadata.namespace = Some("ns".to_owned());
        b
    }

    #[test]
    fn the_ha_port_is_open_only_to_the_same_group() {
        let b = broker(BrokerSpec::default());
        let names = BrokerNames::of(&b);
        let np = build(&b, &names, 1, &[]).unwrap();
        let spec = np.spec.unwrap();
        assert_eq!(
            spec.pod_selector.unwrap().match_labels.unwrap()["rmq-rs.dev/broker-name"],
            "b-1"
        );
        let ingress = spec.ingress.unwrap();
        let ha = ingress
            .iter()
            .find(|r| r.ports.as_ref().unwrap()[0].port == Some(IntOrString::Int(BROKER_HA_PORT)))
            .unwrap();
        let from = ha.from.as_ref().unwrap();
        assert_eq!(from.len(), 1);
        assert_eq!(
            from[0]
                .pod_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()["rmq-rs.dev/broker-name"],
            "b-1"
        );
        assert!(from[0].namespace_selector.is_none(), "same namespace only");
        // No listed peers: remoting and HTTP are open.
        assert!(ingress.iter().filter(|r| r.from.is_none()).count() == 2);
    }

    #[test]
    fn restricted_remoting_keeps_the_cluster_and_the_operator() {
        let mut spec = BrokerSpec::default();
        spec.security.network_policy.remoting_from = vec![NetworkPolicyPeer {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), "shop".to_owned())])),
                match_expressions: None,
            }),
            ..NetworkPolicyPeer::default()
        }];
        let b = broker(spec);
        let np = build(&b, &BrokerNames::of(&b), 0, &[31234]).unwrap();
        let ingress = np.spec.unwrap().ingress.unwrap();
        let remoting = &ingress[1];
        let ports: Vec<_> = remoting
            .ports
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| p.port.clone())
            .collect();
        assert_eq!(
            ports,
            [10911, 10909, 8081, 31234].map(|p| Some(IntOrString::Int(p))),
            "remoting, VIP, gRPC and a node port the broker listens on"
        );
        assert_eq!(remoting.from.as_ref().unwrap().len(), 3);
    }

    #[test]
    fn disabled_renders_nothing() {
        let mut spec = BrokerSpec::default();
        spec.security.network_policy.enabled = false;
        let b = broker(spec);
        assert!(build(&b, &BrokerNames::of(&b), 0, &[]).is_none());
    }
}
