//! External listeners: one Service per broker pod (RocketMQ clients talk to each broker
//! directly, so one Service in front of a group would not do), the address each broker
//! advertises, and how many pods of a group may run before their addresses are known.
//!
//! A broker registers `brokerIP1:listenPort` and listens on that port, so behind a node
//! port (whose number differs from the container's) the broker listens on the node port's
//! number itself, and keeps serving 10911 inside as its VIP port (`fastListenPort`, the
//! same protocol): the operator, probes and the headless Service are unchanged.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use super::network_policy::BROKER_VIP_PORT;
use crate::crd::{Broker, ListenerType};
use crate::names::{BROKER_PORT, BrokerNames, LABEL_POD_NAME, object_labels};

/// On the per-pod Services, so the reconciler can find (and remove) them.
pub const LABEL_LISTENER: &str = "rmq-rs.dev/listener";
pub const LISTENER_EXTERNAL: &str = "external";

/// What one broker advertises to the nameservers (and listens on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    pub host: String,
    pub port: i32,
    /// The gRPC port at `host` (5.x clients are routed to `host:grpc_port`); `None` when
    /// the endpoint is off.
    pub grpc_port: Option<i32>,
}

/// The node ports the API server allocated to one pod's Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePorts {
    pub remoting: i32,
    /// `None` while the endpoint is off or its port is not allocated yet.
    pub grpc: Option<i32>,
}

/// Name of a pod's external Service.
pub fn service_name(pod: &str) -> String {
    format!("{pod}-external")
}

/// The external Services of one group's pods; none for the `internal` listener.
/// `node_ports` holds the node ports already allocated to a pod's Service (by pod), which
/// then become its target ports too.
pub fn external_services(
    broker: &Broker,
    names: &BrokerNames,
    group: i32,
    node_ports: &BTreeMap<String, NodePorts>,
) -> Vec<Service> {
    let listener = &broker.spec.listener;
    let type_ = match listener.type_ {
        ListenerType::Internal => return Vec::new(),
        ListenerType::NodePort => "NodePort",
        ListenerType::LoadBalancer => "LoadBalancer",
    };
    let mut labels = object_labels(&names.group_selector(group));
    labels.insert(LABEL_LISTENER.to_owned(), LISTENER_EXTERNAL.to_owned());
    (0..broker.spec.replicas_per_group.max(0))
        .map(|ordinal| {
            let pod = names.pod(group, ordinal);
            let grpc = broker.spec.grpc.enabled_port();
            let mut ports = match (listener.type_, node_ports.get(&pod)) {
                // Until the API server allocates the node port it targets the usual port;
                // no pod runs yet that could be reached through it.
                (ListenerType::NodePort, Some(allocated)) => vec![ServicePort {
                    name: Some("remoting".to_owned()),
                    port: BROKER_PORT,
                    target_port: Some(IntOrString::Int(allocated.remoting)),
                    node_port: Some(allocated.remoting),
                    protocol: Some("TCP".to_owned()),
                    ..ServicePort::default()
                }],
                (ListenerType::NodePort, None) => vec![remoting_port()],
                // The same ports as inside, so `brokerIP1:listenPort` is the address;
                // 4.x Java clients with vipChannelEnabled send to `listenPort - 2`.
                _ => vec![
                    remoting_port(),
                    ServicePort {
                        name: Some("vip".to_owned()),
                        port: BROKER_VIP_PORT,
                        target_port: Some(IntOrString::Int(BROKER_VIP_PORT)),
                        protocol: Some("TCP".to_owned()),
                        ..ServicePort::default()
                    },
                ],
            };
            // The gRPC port follows the remoting port's rule: behind a node port the
            // broker listens on the node port's number itself.
            if let Some(grpc) = grpc {
                let allocated = node_ports.get(&pod).and_then(|n| n.grpc);
                ports.push(ServicePort {
                    name: Some("grpc".to_owned()),
                    port: grpc,
                    target_port: Some(IntOrString::Int(allocated.unwrap_or(grpc))),
                    node_port: allocated.filter(|_| listener.type_ == ListenerType::NodePort),
                    protocol: Some("TCP".to_owned()),
                    ..ServicePort::default()
                });
            }
            Service {
                metadata: ObjectMeta {
                    name: Some(service_name(&pod)),
                    namespace: broker.metadata.namespace.clone(),
                    labels: Some(labels.clone()),
                    annotations: (!listener.annotations.is_empty())
                        .then(|| listener.annotations.clone()),
                    owner_references: broker.controller_owner_ref(&()).map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                spec: Some(ServiceSpec {
                    type_: Some(type_.to_owned()),
                    // The StatefulSet controller's label: exactly this pod.
                    selector: Some(BTreeMap::from([(LABEL_POD_NAME.to_owned(), pod)])),
                    ports: Some(ports),
                    ..ServiceSpec::default()
                }),
                ..Service::default()
            }
        })
        .collect()
}

fn remoting_port() -> ServicePort {
    ServicePort {
        name: Some("remoting".to_owned()),
        port: BROKER_PORT,
        target_port: Some(IntOrString::String("remoting".to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }
}

/// The node ports the API server allocated to a Service, once it has (the remoting port
/// is the first; the gRPC port is found by name).
pub fn allocated_node_ports(service: &Service) -> Option<NodePorts> {
    let ports = service.spec.as_ref()?.ports.as_ref()?;
    Some(NodePorts {
        remoting: ports.first()?.node_port?,
        grpc: ports
            .iter()
            .find(|p| p.name.as_deref() == Some("grpc"))
            .and_then(|p| p.node_port),
    })
}

/// What the pod behind `service` advertises, once its Service provides an address (and,
/// behind node ports, both of its ports are allocated).
pub fn advertised(broker: &Broker, service: &Service) -> Option<Advertised> {
    let grpc = broker.spec.grpc.enabled_port();
    match broker.spec.listener.type_ {
        ListenerType::Internal => None,
        ListenerType::LoadBalancer => advertised_host(service).map(|host| Advertised {
            host,
            port: BROKER_PORT,
            grpc_port: grpc,
        }),
        ListenerType::NodePort => {
            let allocated = allocated_node_ports(service)?;
            let grpc_port = match grpc {
                Some(_) => Some(allocated.grpc?),
                None => None,
            };
            Some(Advertised {
                host: broker.spec.listener.advertised_host.clone()?,
                port: allocated.remoting,
                grpc_port,
            })
        }
    }
}

/// The host a pod's load balancer was given (IP or name), once it has one.
pub fn advertised_host(service: &Service) -> Option<String> {
    let ingress = service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?;
    ingress
        .ip
        .clone()
        .or_else(|| ingress.hostname.clone())
        .filter(|h| !h.is_empty())
}

/// How many pods of a group may run: the leading ordinals that either have their address
/// or already run. A pod that started without its address would register its pod DNS
/// name and clients outside could not reach it. A running pod is never stopped by this
/// (StatefulSets remove the highest ordinals first), even when that lets a lower ordinal
/// restart before its address is known; its address reaches it later through the
/// configuration hash, i.e. a rolling restart.
pub fn startable_replicas(
    names: &BrokerNames,
    group: i32,
    replicas: i32,
    external: &BTreeMap<String, Advertised>,
    running: &BTreeSet<String>,
) -> i32 {
    let ordinals = 0..replicas.max(0);
    let known = ordinals
        .clone()
        .take_while(|&o| {
            let pod = names.pod(group, o);
            external.contains_key(&pod) || running.contains(&pod)
        })
        .count() as i32;
    let highest_running = ordinals
        .filter(|&o| running.contains(&names.pod(group, o)))
        .map(|o| o + 1)
        .max()
        .unwrap_or(0);
    known.max(highest_running)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};

    use super::*;
    use crate::crd::{BrokerSpec, ListenerSpec};

    fn broker(type_: ListenerType) -> Broker {
        let mut b = Broker::new(
            "b",
            BrokerSpec {
                replicas_per_group: 2,
                listener: ListenerSpec {
                    type_,
                    advertised_host: None,
                    annotations: BTreeMap::from([(
                        "service.beta.kubernetes.io/aws-load-balancer-internal".to_owned(),
                        "true".to_owned(),
                    )]),
                },
                ..BrokerSpec::default()
            },
        );
        b.metadata.namespace = Some("ns".to_owned());
        b
    }

    #[test]
    fn one_load_balancer_per_pod_selecting_only_that_pod() {
        let b = broker(ListenerType::LoadBalancer);
        let names = BrokerNames::of(&b);
        let services = external_services(&b, &names, 1, &BTreeMap::new());
        assert_eq!(services.len(), 2);
        for (ordinal, svc) in services.iter().enumerate() {
            let pod = format!("b-1-{ordinal}");
            assert_eq!(
                svc.metadata.name.as_deref(),
                Some(format!("{pod}-external").as_str())
            );
            let spec = svc.spec.as_ref().unwrap();
            assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
            assert_eq!(
                spec.selector.as_ref().unwrap(),
                &BTreeMap::from([(LABEL_POD_NAME.to_owned(), pod)])
            );
            let ports: Vec<i32> = spec
                .ports
                .as_ref()
                .unwrap()
                .iter()
                .map(|p| p.port)
                .collect();
            assert_eq!(ports, [BROKER_PORT, BROKER_PORT - 2, 8081]);
            let meta = &svc.metadata;
            assert!(
                meta.annotations
                    .as_ref()
                    .unwrap()
                    .contains_key("service.beta.kubernetes.io/aws-load-balancer-internal")
            );
            assert_eq!(
                meta.labels
                    .as_ref()
                    .unwrap()
                    .get(LABEL_LISTENER)
                    .map(String::as_str),
                Some(LISTENER_EXTERNAL)
            );
        }
        let internal = broker(ListenerType::Internal);
        assert!(external_services(&internal, &names, 0, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn the_address_is_the_ingress_ip_or_hostname() {
        let with = |ip: Option<&str>, hostname: Option<&str>| Service {
            status: Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(vec![LoadBalancerIngress {
                        ip: ip.map(str::to_owned),
                        hostname: hostname.map(str::to_owned),
                        ..LoadBalancerIngress::default()
                    }]),
                }),
                ..ServiceStatus::default()
            }),
            ..Service::default()
        };
        assert_eq!(
            advertised_host(&with(Some("203.0.113.7"), None)).as_deref(),
            Some("203.0.113.7")
        );
        assert_eq!(
            advertised_host(&with(None, Some("lb-1.example.com"))).as_deref(),
            Some("lb-1.example.com")
        );
        assert_eq!(advertised_host(&with(None, None)), None);
        assert_eq!(advertised_host(&Service::default()), None);
    }

    #[test]
    fn pods_start_only_in_order_of_known_addresses_but_running_ones_stay() {
        let names = BrokerNames::new("b", "ns");
        let ext = |pods: &[&str]| -> BTreeMap<String, Advertised> {
            pods.iter()
                .map(|p| {
                    let a = Advertised {
                        host: "198.51.100.1".to_owned(),
                        port: BROKER_PORT,
                        grpc_port: Some(8081),
                    };
                    ((*p).to_owned(), a)
                })
                .collect()
        };
        let none = BTreeSet::new();
        assert_eq!(startable_replicas(&names, 0, 3, &ext(&[]), &none), 0);
        assert_eq!(startable_replicas(&names, 0, 3, &ext(&["b-0-0"]), &none), 1);
        // b-0-1 has no address yet: b-0-2 waits too (StatefulSets count from 0).
        assert_eq!(
            startable_replicas(&names, 0, 3, &ext(&["b-0-0", "b-0-2"]), &none),
            1
        );
        // Switching a running cluster to an external listener never stops its pods.
        let running = BTreeSet::from(["b-0-0".to_owned(), "b-0-1".to_owned()]);
        assert_eq!(startable_replicas(&names, 0, 3, &ext(&[]), &running), 2);
        assert_eq!(
            startable_replicas(&names, 0, 3, &ext(&["b-0-2"]), &running),
            3
        );
        // b-0-0 restarts while it waits for its address: b-0-1 must not be scaled away.
        let slave_only = BTreeSet::from(["b-0-1".to_owned()]);
        assert_eq!(startable_replicas(&names, 0, 3, &ext(&[]), &slave_only), 2);
        // Scaled down below a running ordinal: the spec's count still caps it.
        let third = BTreeSet::from(["b-0-2".to_owned()]);
        assert_eq!(startable_replicas(&names, 0, 2, &ext(&[]), &third), 0);
    }

    #[test]
    fn a_node_port_becomes_the_target_port_and_the_advertised_port() {
        let mut b = broker(ListenerType::NodePort);
        b.spec.listener.advertised_host = Some("nodes.example.com".to_owned());
        let names = BrokerNames::of(&b);
        // Before allocation: the usual port, nothing advertised yet.
        let fresh = &external_services(&b, &names, 0, &BTreeMap::new())[0];
        let spec = fresh.spec.as_ref().unwrap();
        assert_eq!(spec.type_.as_deref(), Some("NodePort"));
        assert_eq!(spec.ports.as_ref().unwrap()[0].node_port, None);
        assert_eq!(advertised(&b, fresh), None);
        // Allocated 31234 (and 31235 for gRPC): the pod listens on them, so the Service
        // targets them.
        let known = BTreeMap::from([(
            "b-0-0".to_owned(),
            NodePorts {
                remoting: 31234,
                grpc: Some(31235),
            },
        )]);
        let svc = &external_services(&b, &names, 0, &known)[0];
        let ports = svc.spec.as_ref().unwrap().ports.as_ref().unwrap();
        assert_eq!(ports[0].node_port, Some(31234));
        assert_eq!(ports[0].target_port, Some(IntOrString::Int(31234)));
        assert_eq!(ports[1].name.as_deref(), Some("grpc"));
        assert_eq!(ports[1].node_port, Some(31235));
        assert_eq!(ports[1].target_port, Some(IntOrString::Int(31235)));
        assert_eq!(
            advertised(&b, svc),
            Some(Advertised {
                host: "nodes.example.com".to_owned(),
                port: 31234,
                grpc_port: Some(31235),
            })
        );
        // Only the remoting port allocated so far: not advertised yet.
        let mut half = svc.clone();
        half.spec.as_mut().unwrap().ports.as_mut().unwrap()[1].node_port = None;
        assert_eq!(advertised(&b, &half), None);
        // With the endpoint off there is no gRPC port to wait for.
        b.spec.grpc.port = 0;
        let off = &external_services(&b, &names, 0, &known)[0];
        assert_eq!(off.spec.as_ref().unwrap().ports.as_ref().unwrap().len(), 1);
        assert_eq!(advertised(&b, &half).map(|a| a.grpc_port), Some(None));
    }
}
