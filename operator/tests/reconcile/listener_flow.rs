//! The `loadbalancer` listener. Each broker pod gets its own Service;
//! the address its load balancer is given is read back, written as the pod's brokerIP1
//! (brokerIP2 stays the pod's DNS name for replication) and recorded in status; pods start
//! only once their address is known and the Broker is not Ready before.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use operator::conditions;
use operator::crd::{Broker, NameServer};
use serde_json::json;

use crate::broker_flow::Cluster;
use crate::fake_admin::FakeAdmin;
use crate::fake_api::FakeApi;
use crate::{NS, context, example, refetch, seed};

const PODS: [&str; 4] = ["rmq-ha-0-0", "rmq-ha-0-1", "rmq-ha-1-0", "rmq-ha-1-1"];

fn give_address(api: &FakeApi, pod: &str, ip: &str) {
    api.set_status::<Service>(
        NS,
        &format!("{pod}-external"),
        json!({"loadBalancer": {"ingress": [{"ip": ip}]}}),
    );
}

fn conf(api: &FakeApi, pod: &str) -> String {
    let group = &pod[..pod.rfind('-').unwrap()];
    let cm = api
        .get::<ConfigMap>(NS, &format!("{group}-config"))
        .unwrap();
    cm.data.unwrap()[&format!("{pod}.conf")].clone()
}

fn replicas(api: &FakeApi, sts: &str) -> i32 {
    api.get::<StatefulSet>(NS, sts)
        .unwrap()
        .spec
        .unwrap()
        .replicas
        .unwrap()
}

fn ready_reason(broker: &Broker) -> String {
    conditions::find(
        &broker.status.as_ref().unwrap().conditions,
        conditions::READY,
    )
    .unwrap()
    .reason
    .clone()
}

fn host(pod: &str) -> String {
    format!("{pod}.rmq-ha-broker-headless.{NS}.svc.cluster.local")
}

#[tokio::test]
async fn a_new_cluster_starts_each_pod_once_its_address_is_known() {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    let mut broker: Broker = example("ha.yaml", "Broker", "rmq-ha");
    broker.spec.listener.type_ = operator::crd::ListenerType::LoadBalancer;
    let broker = seed(&api, &broker);
    let ctx = context(&api, &admin);
    let reconcile = || operator::reconcile::broker::reconcile(refetch(&api, &*broker), ctx.clone());

    reconcile().await.unwrap();
    for pod in PODS {
        let svc = api.get::<Service>(NS, &format!("{pod}-external")).unwrap();
        assert_eq!(svc.spec.unwrap().type_.as_deref(), Some("LoadBalancer"));
    }
    assert_eq!(
        replicas(&api, "rmq-ha-0"),
        0,
        "no pod starts without its address"
    );
    assert_eq!(replicas(&api, "rmq-ha-1"), 0);
    let stored = refetch(&api, &*broker);
    assert_eq!(ready_reason(&stored), "AwaitingExternalAddress");
    assert!(
        stored
            .status
            .as_ref()
            .unwrap()
            .external_addresses
            .is_empty()
    );

    // Group 0's first pod gets its address: it (only) may start, advertising it.
    give_address(&api, "rmq-ha-0-0", "203.0.113.10");
    reconcile().await.unwrap();
    assert_eq!(replicas(&api, "rmq-ha-0"), 1);
    assert_eq!(replicas(&api, "rmq-ha-1"), 0);
    let c = conf(&api, "rmq-ha-0-0");
    assert!(c.contains("brokerIP1=203.0.113.10\n"), "{c}");
    assert!(
        c.contains(&format!("brokerIP2={}\n", host("rmq-ha-0-0"))),
        "{c}"
    );

    for (i, pod) in PODS.iter().enumerate() {
        give_address(&api, pod, &format!("203.0.113.{}", 10 + i));
    }
    reconcile().await.unwrap();
    assert_eq!(replicas(&api, "rmq-ha-0"), 2);
    assert_eq!(replicas(&api, "rmq-ha-1"), 2);
    let stored = refetch(&api, &*broker);
    assert_ne!(ready_reason(&stored), "AwaitingExternalAddress");
    let addresses = &stored.status.as_ref().unwrap().external_addresses;
    assert_eq!(addresses.len(), 4);
    let last = addresses.iter().find(|a| a.pod == "rmq-ha-1-1").unwrap();
    assert_eq!(last.address, "203.0.113.13:10911");
}

#[tokio::test]
async fn switching_a_running_cluster_keeps_its_pods_and_back_removes_the_services() {
    let c = Cluster::started().await;
    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"listener": {"type": "loadbalancer"}}}),
    );
    c.reconcile().await;
    // Running pods are never stopped to wait for an address.
    assert_eq!(replicas(&c.api, "rmq-ha-0"), 2);
    assert!(conf(&c.api, "rmq-ha-0-1").contains(&format!("brokerIP1={}\n", host("rmq-ha-0-1"))));
    assert_eq!(
        ready_reason(&c.api.get::<Broker>(NS, "rmq-ha").unwrap()),
        "AwaitingExternalAddress"
    );

    give_address(&c.api, "rmq-ha-0-1", "198.51.100.4");
    c.reconcile().await;
    assert!(conf(&c.api, "rmq-ha-0-1").contains("brokerIP1=198.51.100.4\n"));

    c.api.edit::<Broker>(
        NS,
        "rmq-ha",
        json!({"spec": {"listener": {"type": "internal"}}}),
    );
    c.reconcile().await;
    for pod in PODS {
        assert!(
            c.api
                .get::<Service>(NS, &format!("{pod}-external"))
                .is_none()
        );
    }
    let back = conf(&c.api, "rmq-ha-0-1");
    assert!(
        back.contains(&format!("brokerIP1={}\n", host("rmq-ha-0-1"))),
        "{back}"
    );
    assert!(!back.contains("brokerIP2="), "{back}");
    assert!(
        c.api
            .get::<Broker>(NS, "rmq-ha")
            .unwrap()
            .status
            .unwrap()
            .external_addresses
            .is_empty()
    );
}

#[tokio::test]
async fn node_ports_are_listened_on_and_advertised_with_the_configured_host() {
    let api = FakeApi::new();
    let admin = FakeAdmin::new();
    seed(
        &api,
        &example::<NameServer>("ha.yaml", "NameServer", "rmq-ha"),
    );
    let mut broker: Broker = example("ha.yaml", "Broker", "rmq-ha");
    broker.spec.listener.type_ = operator::crd::ListenerType::NodePort;
    broker.spec.listener.advertised_host = Some("nodes.example.com".to_owned());
    let broker = seed(&api, &broker);
    let ctx = context(&api, &admin);
    let reconcile = || operator::reconcile::broker::reconcile(refetch(&api, &*broker), ctx.clone());

    reconcile().await.unwrap();
    let svc = api.get::<Service>(NS, "rmq-ha-0-0-external").unwrap();
    assert_eq!(svc.spec.unwrap().type_.as_deref(), Some("NodePort"));
    assert_eq!(replicas(&api, "rmq-ha-0"), 0);
    assert_eq!(
        ready_reason(&refetch(&api, &*broker)),
        "AwaitingExternalAddress"
    );

    // The API server allocates the node ports.
    for (i, pod) in PODS.iter().enumerate() {
        api.edit::<Service>(
            NS,
            &format!("{pod}-external"),
            json!({"spec": {"ports": [{
                "name": "remoting", "port": 10911, "targetPort": "remoting",
                "protocol": "TCP", "nodePort": 31000 + i
            }, {
                "name": "grpc", "port": 8081, "targetPort": 8081,
                "protocol": "TCP", "nodePort": 32000 + i
            }]}}),
        );
    }
    reconcile().await.unwrap();
    let svc = api.get::<Service>(NS, "rmq-ha-1-1-external").unwrap();
    let port = &svc.spec.unwrap().ports.unwrap()[0];
    assert_eq!(port.node_port, Some(31003));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(31003)),
        "the broker listens on its node port"
    );
    let c = conf(&api, "rmq-ha-1-1");
    for line in [
        "brokerIP1=nodes.example.com\n",
        "listenPort=31003\n",
        "fastListenPort=10911\n",
        // The gRPC port behind its own node port, listened on like the remoting port.
        "grpcServerPort=32003\n",
    ] {
        assert!(c.contains(line), "{line} in {c}");
    }
    assert!(
        c.contains(&format!("brokerIP2={}\n", host("rmq-ha-1-1"))),
        "{c}"
    );
    assert_eq!(replicas(&api, "rmq-ha-1"), 2);
    let stored = refetch(&api, &*broker);
    let addresses = &stored.status.as_ref().unwrap().external_addresses;
    assert!(addresses.iter().any(|a| a.pod == "rmq-ha-0-1"
        && a.address == "nodes.example.com:31001"
        && a.grpc_address.as_deref() == Some("nodes.example.com:32001")));
    // The group's NetworkPolicy lets clients reach the node ports.
    let np = api
        .get::<k8s_openapi::api::networking::v1::NetworkPolicy>(NS, "rmq-ha-1")
        .unwrap();
    let text = serde_json::to_string(&np.spec).unwrap();
    assert!(text.contains("31002") && text.contains("31003"), "{text}");
    assert!(text.contains("32003") && text.contains("8081"), "{text}");
}
