//! QueryRoute: the topic's queues on every broker group the nameservers route it to,
//! each with its master's gRPC endpoint (`grpcAddrs` of the route: brokerIP1 and that
//! broker's `grpcServerPort`) and its permission (4.x perm bits to
//! READ/WRITE/READ_WRITE). Only masters (brokerId 0) get queues: a slave stores nothing
//! sent to it. Without a route from the nameservers (not registered yet, unreachable,
//! or no broker of it has a gRPC endpoint), this broker's own queues.

use std::time::Duration;

use protocol::body::{BrokerData, MASTER_ID, TopicRouteData};

use grpc_api::v2::{
    Address, AddressScheme, Broker as PbBroker, Endpoints, MessageQueue, MessageType, Permission,
    Resource,
};

use crate::names::perm;
use crate::services::Broker;

/// v2 permission of 4.x `perm` bits.
pub fn permission(bits: i32) -> Permission {
    match (perm::is_readable(bits), perm::is_writeable(bits)) {
        (true, true) => Permission::ReadWrite,
        (true, false) => Permission::Read,
        (false, true) => Permission::Write,
        (false, false) => Permission::None,
    }
}

fn endpoints(host: &str, port: u16) -> Endpoints {
    let scheme = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => AddressScheme::IPv4,
        Ok(std::net::IpAddr::V6(_)) => AddressScheme::IPv6,
        Err(_) => AddressScheme::DomainName,
    };
    Endpoints {
        scheme: scheme as i32,
        addresses: vec![Address {
            host: host.to_owned(),
            port: i32::from(port),
        }],
    }
}

/// Every message type: a 4.x topic takes them all.
fn all_types() -> Vec<i32> {
    [
        MessageType::Normal,
        MessageType::Fifo,
        MessageType::Delay,
        MessageType::Transaction,
    ]
    .map(|t| t as i32)
    .to_vec()
}

/// The queues of one group: `read`/`write` queue counts and the perm bits they share
/// (`TopicPublishInfo`/`MQClientInstance.topicRouteData2TopicSubscribeInfo` read the
/// same numbers: ids below `writeQueueNums` are writable, below `readQueueNums`
/// readable).
fn queues_of(
    topic: &Resource,
    broker: &PbBroker,
    read: i32,
    write: i32,
    bits: i32,
) -> impl Iterator<Item = MessageQueue> {
    let topic = topic.clone();
    let broker = broker.clone();
    (0..read.max(write)).map(move |id| {
        let mut q_bits = 0;
        if id < read {
            q_bits |= bits & perm::READ;
        }
        if id < write {
            q_bits |= bits & perm::WRITE;
        }
        MessageQueue {
            topic: Some(topic.clone()),
            id,
            permission: permission(q_bits) as i32,
            broker: Some(broker.clone()),
            accept_message_types: all_types(),
        }
    })
}

/// "host:port" (host possibly a bracketed IPv6 address) as gRPC endpoints.
fn parse_endpoint(addr: &str) -> Option<Endpoints> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port.parse::<u16>().ok().filter(|p| *p != 0)?;
    (!host.is_empty()).then(|| endpoints(host, port))
}

/// The queues of every master in `route` that published a gRPC endpoint. A group
/// whose master has none (a RocketMQ broker, or ours with `grpcServerPort=0`) is left
/// out: a 5.x client could not reach it.
pub fn cluster_queues(route: &TopicRouteData, topic: &Resource) -> Vec<MessageQueue> {
    let mut out = Vec::new();
    for qd in &route.queue_datas {
        let Some(bd) = route
            .broker_datas
            .iter()
            .find(|bd| bd.broker_name == qd.broker_name)
        else {
            continue;
        };
        // No master (slaves only): nothing can be sent there; 4.x clients skip it
        // too. A master without an endpoint is logged once per lookup
        // (`namesrv_routes`).
        if let Some(ep) = master_endpoint(bd) {
            let pb = PbBroker {
                name: bd.broker_name.clone(),
                id: 0,
                endpoints: Some(ep),
            };
            out.extend(queues_of(
                topic,
                &pb,
                qd.read_queue_nums,
                qd.write_queue_nums,
                qd.perm,
            ));
        }
    }
    out
}

fn master_endpoint(bd: &BrokerData) -> Option<Endpoints> {
    parse_endpoint(bd.grpc_addrs.get(&MASTER_ID)?)
}

/// The client's deadline (`grpc-timeout`: up to 8 digits and a unit, H M S m u n).
pub fn deadline(md: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let v = md.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The v2 message types a topic with 5.x `message.type` = `wanted` takes: every type
/// when the attribute is unset or MIXED (what 4.9-created topics are).
pub fn accepted_types(wanted: Option<&str>) -> Vec<i32> {
    let all = [
        MessageType::Normal,
        MessageType::Fifo,
        MessageType::Delay,
        MessageType::Transaction,
    ];
    all.into_iter()
        .filter(|t| match wanted {
            None | Some("MIXED") => true,
            Some(w) => t.as_str_name() == w,
        })
        .map(|t| t as i32)
        .collect()
}

/// Whether a topic with `message.type` = `wanted` takes a message of v2 type `got`.
pub fn accepts(wanted: &str, got: i32) -> bool {
    accepted_types(Some(wanted)).contains(&got)
}

/// Narrows every queue's accepted types to what this broker's config of the topic
/// says (`message.type`; the route carries no attributes, and a topic is created with
/// the same attributes on every group).
pub fn narrow_types(broker: &Broker, topic: &Resource, queues: &mut [MessageQueue]) {
    if let Some(wanted) = broker
        .topics
        .get(&topic.name)
        .and_then(|c| c.message_type().map(str::to_owned))
    {
        let types = accepted_types(Some(&wanted));
        for q in queues {
            q.accept_message_types = types.clone();
        }
    }
}

/// This broker's queues of `topic`; `None` when the topic is not here.
pub fn local_queues(
    broker: &Broker,
    topic: &Resource,
    grpc_port: u16,
) -> Option<Vec<MessageQueue>> {
    let config = broker.topics.get(&topic.name)?;
    let b = &broker.config.broker;
    let pb_broker = PbBroker {
        name: b.broker_name.clone(),
        id: 0,
        endpoints: Some(endpoints(&b.broker_ip1, grpc_port)),
    };
    let bits = config.perm & broker.live.broker_permission();
    Some(
        queues_of(
            topic,
            &pb_broker,
            config.read_queue_nums,
            config.write_queue_nums,
            bits,
        )
        .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::body::QueueData;

    #[test]
    fn the_message_type_attribute_narrows_what_a_topic_takes() {
        assert_eq!(accepted_types(None).len(), 4);
        assert_eq!(accepted_types(Some("MIXED")).len(), 4);
        assert_eq!(accepted_types(Some("FIFO")), [MessageType::Fifo as i32]);
        assert!(accepts("DELAY", MessageType::Delay as i32));
        assert!(!accepts("FIFO", MessageType::Normal as i32));
        assert!(!accepts("NORMAL", MessageType::Unspecified as i32));
        assert!(accepts("MIXED", MessageType::Transaction as i32));
    }

    #[test]
    fn perm_bits_map_to_v2_permissions() {
        assert_eq!(permission(perm::READ | perm::WRITE), Permission::ReadWrite);
        assert_eq!(permission(perm::READ), Permission::Read);
        assert_eq!(permission(perm::WRITE), Permission::Write);
        assert_eq!(permission(0), Permission::None);
        assert_eq!(
            endpoints("127.0.0.1", 8081).scheme,
            AddressScheme::IPv4 as i32
        );
        assert_eq!(endpoints("::1", 8081).scheme, AddressScheme::IPv6 as i32);
        assert_eq!(
            endpoints("broker-0.rmq", 8081).scheme,
            AddressScheme::DomainName as i32
        );
    }

    #[test]
    fn masters_with_grpc_endpoints_get_queues() {
        let qd = |name: &str, n, perm| QueueData {
            broker_name: name.into(),
            read_queue_nums: n,
            write_queue_nums: n,
            perm,
            topic_sys_flag: 0,
        };
        let bd = |name: &str, grpc: &[(i64, &str)]| BrokerData {
            cluster: "C".into(),
            broker_name: name.into(),
            broker_addrs: [
                (0, "10.0.0.1:10911".to_owned()),
                (1, "10.0.0.2:10911".to_owned()),
            ]
            .into(),
            enable_acting_master: None,
            grpc_addrs: grpc.iter().map(|(i, a)| (*i, (*a).to_owned())).collect(),
        };
        let route = TopicRouteData {
            queue_datas: vec![
                qd("a", 2, perm::READ | perm::WRITE),
                qd("b", 3, perm::READ),
                qd("old", 4, perm::READ | perm::WRITE),
            ],
            broker_datas: vec![
                // The slave's endpoint is never used.
                bd("a", &[(0, "10.0.0.1:8081"), (1, "10.0.0.2:8081")]),
                bd("b", &[(0, "[::1]:9091")]),
                bd("old", &[(1, "10.0.0.2:8081")]),
            ],
            ..Default::default()
        };
        let topic = Resource {
            resource_namespace: String::new(),
            name: "T".into(),
        };
        let qs = cluster_queues(&route, &topic);
        assert_eq!(qs.len(), 5);
        let addr = |q: &MessageQueue| {
            let ep = q.broker.as_ref().unwrap().endpoints.as_ref().unwrap();
            (
                ep.addresses[0].host.clone(),
                ep.addresses[0].port,
                ep.scheme,
            )
        };
        for q in &qs[..2] {
            assert_eq!(
                addr(q),
                ("10.0.0.1".into(), 8081, AddressScheme::IPv4 as i32)
            );
            assert_eq!(q.permission, Permission::ReadWrite as i32);
            assert_eq!(q.broker.as_ref().unwrap().name, "a");
        }
        for q in &qs[2..] {
            assert_eq!(addr(q), ("::1".into(), 9091, AddressScheme::IPv6 as i32));
            assert_eq!(q.permission, Permission::Read as i32);
        }
        assert_eq!(
            qs.iter().map(|q| q.id).collect::<Vec<_>>(),
            vec![0, 1, 0, 1, 2]
        );
        assert_eq!(parse_endpoint("h:0"), None);
        assert_eq!(parse_endpoint("nohost"), None);
    }

    #[test]
    fn grpc_timeout_header_is_the_deadline() {
        let md = |v: &str| {
            let mut m = tonic::metadata::MetadataMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            m
        };
        assert_eq!(deadline(&md("2500m")), Some(Duration::from_millis(2500)));
        assert_eq!(deadline(&md("3S")), Some(Duration::from_secs(3)));
        assert_eq!(deadline(&md("1H")), Some(Duration::from_secs(3600)));
        assert_eq!(deadline(&md("123456789m")), None);
        assert_eq!(deadline(&md("m")), None);
        assert_eq!(deadline(&md("5x")), None);
        assert_eq!(deadline(&tonic::metadata::MetadataMap::new()), None);
    }
}
