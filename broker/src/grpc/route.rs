//! QueryRoute: the topic's queues on this broker group, each with this broker's gRPC
//! endpoint (`brokerIP1:grpcServerPort`) and its permission (4.x perm bits to
//! READ/WRITE/READ_WRITE). Only the master answers with queues: a slave stores nothing
//! sent to it.

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

/// This broker's queues of `topic`; `None` when the topic is not here.
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
    let all_types = accepted_types(config.message_type());
    let queues = config.read_queue_nums.max(config.write_queue_nums);
    Some(
        (0..queues)
            .map(|id| {
                let mut q_bits = 0;
                if id < config.read_queue_nums {
                    q_bits |= bits & perm::READ;
                }
                if id < config.write_queue_nums {
                    q_bits |= bits & perm::WRITE;
                }
                MessageQueue {
                    topic: Some(topic.clone()),
                    id,
                    permission: permission(q_bits) as i32,
                    broker: Some(pb_broker.clone()),
                    accept_message_types: all_types.clone(),
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
