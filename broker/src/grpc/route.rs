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
    let all_types = [
        MessageType::Normal,
        MessageType::Fifo,
        MessageType::Delay,
        MessageType::Transaction,
    ]
    .map(|t| t as i32)
    .to_vec();
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
