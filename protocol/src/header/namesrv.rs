//! Nameserver request and response headers (`common/protocol/header/namesrv/*.java`).

crate::header! {
    /// REGISTER_BROKER (103).
    pub struct RegisterBrokerRequestHeader {
        required broker_name: String = "brokerName",
        required broker_addr: String = "brokerAddr",
        required cluster_name: String = "clusterName",
        required ha_server_addr: String = "haServerAddr",
        required broker_id: i64 = "brokerId",
        /// The body is the zlib form of `RegisterBrokerBody`.
        default compressed: bool = "compressed" => false,
        /// `UtilAll.crc32(body)` (CRC32 masked to 31 bits); 0 = not checked.
        default body_crc32: i32 = "bodyCrc32" => 0,
        /// Not a RocketMQ field: the replication epoch of a broker registering as master
        /// (brokerId 0). The nameserver keeps the highest; RocketMQ ignores it.
        optional master_epoch: i32 = "masterEpoch",
        /// Not a RocketMQ field: the port of the broker's 5.x gRPC endpoint
        /// (`grpcServerPort`; absent when it is off). Our nameserver publishes it in
        /// routes as `BrokerData.grpcAddrs`; a RocketMQ nameserver ignores it.
        optional grpc_port: i32 = "grpcPort",
    }
}

crate::header! {
    /// REGISTER_BROKER response: the master a slave should replicate from.
    pub struct RegisterBrokerResponseHeader {
        optional ha_server_addr: String = "haServerAddr",
        optional master_addr: String = "masterAddr",
    }
}

crate::header! {
    /// UNREGISTER_BROKER (104).
    pub struct UnRegisterBrokerRequestHeader {
        required broker_name: String = "brokerName",
        required broker_addr: String = "brokerAddr",
        required cluster_name: String = "clusterName",
        required broker_id: i64 = "brokerId",
    }
}

crate::header! {
    /// QUERY_DATA_VERSION (322); the body is the broker's `DataVersion`.
    pub struct QueryDataVersionRequestHeader {
        required broker_name: String = "brokerName",
        required broker_addr: String = "brokerAddr",
        required cluster_name: String = "clusterName",
        required broker_id: i64 = "brokerId",
    }
}

crate::header! {
    /// QUERY_DATA_VERSION response.
    pub struct QueryDataVersionResponseHeader {
        required changed: bool = "changed",
    }
}

crate::header! {
    /// GET_ROUTEINFO_BY_TOPIC (105).
    pub struct GetRouteInfoRequestHeader {
        required topic: String = "topic",
        /// 4.9.4+: ask for standard JSON whatever the request version.
        optional accept_standard_json_only: bool = "acceptStandardJsonOnly",
    }
}

crate::header! {
    /// DELETE_TOPIC_IN_NAMESRV (216).
    pub struct DeleteTopicFromNamesrvRequestHeader {
        required topic: String = "topic",
        /// Only remove the queue data of this cluster's brokers.
        optional cluster_name: String = "clusterName",
    }
}

crate::header! {
    /// GET_TOPICS_BY_CLUSTER (224).
    pub struct GetTopicsByClusterRequestHeader {
        required cluster: String = "cluster",
    }
}

crate::header! {
    /// PUT_KV_CONFIG (100).
    pub struct PutKVConfigRequestHeader {
        required namespace: String = "namespace",
        required key: String = "key",
        required value: String = "value",
    }
}

crate::header! {
    /// GET_KV_CONFIG (101).
    pub struct GetKVConfigRequestHeader {
        required namespace: String = "namespace",
        required key: String = "key",
    }
}

crate::header! {
    /// GET_KV_CONFIG response.
    pub struct GetKVConfigResponseHeader {
        optional value: String = "value",
    }
}

crate::header! {
    /// DELETE_KV_CONFIG (102).
    pub struct DeleteKVConfigRequestHeader {
        required namespace: String = "namespace",
        required key: String = "key",
    }
}

crate::header! {
    /// GET_KVLIST_BY_NAMESPACE (219).
    pub struct GetKVListByNamespaceRequestHeader {
        required namespace: String = "namespace",
    }
}

crate::header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205).
    pub struct WipeWritePermOfBrokerRequestHeader {
        required broker_name: String = "brokerName",
    }
}

crate::header! {
    /// WIPE_WRITE_PERM_OF_BROKER response: how many topics lost the WRITE bit.
    pub struct WipeWritePermOfBrokerResponseHeader {
        required wipe_topic_count: i32 = "wipeTopicCount",
    }
}

crate::header! {
    /// ADD_WRITE_PERM_OF_BROKER (327).
    pub struct AddWritePermOfBrokerRequestHeader {
        required broker_name: String = "brokerName",
    }
}

crate::header! {
    /// ADD_WRITE_PERM_OF_BROKER response.
    pub struct AddWritePermOfBrokerResponseHeader {
        required add_topic_count: i32 = "addTopicCount",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::{CommandHeader, HeaderError};

    #[test]
    fn register_header_defaults_and_keys() {
        let f: ExtFields = [
            ("brokerName", "broker-a"),
            ("brokerAddr", "127.0.0.1:10911"),
            ("clusterName", "DefaultCluster"),
            ("haServerAddr", "127.0.0.1:10912"),
            ("brokerId", "0"),
        ]
        .into_iter()
        .collect();
        let h = RegisterBrokerRequestHeader::read(&f).unwrap();
        assert_eq!((h.broker_id, h.compressed, h.body_crc32), (0, false, 0));
        let mut out = ExtFields::new();
        h.write(&mut out);
        assert_eq!(out.get("bodyCrc32"), Some("0"));
        assert_eq!(RegisterBrokerRequestHeader::read(&out).unwrap(), h);

        // A 4.9 broker sends neither of our fields; ours round-trip.
        assert_eq!((h.master_epoch, h.grpc_port), (None, None));
        assert!(out.get("grpcPort").is_none());
        let with_port = RegisterBrokerRequestHeader {
            grpc_port: Some(8081),
            ..h.clone()
        };
        let mut out = ExtFields::new();
        with_port.write(&mut out);
        assert_eq!(out.get("grpcPort"), Some("8081"));
        assert_eq!(RegisterBrokerRequestHeader::read(&out).unwrap(), with_port);

        let mut f = f;
        f.remove("haServerAddr");
        assert_eq!(
            RegisterBrokerRequestHeader::read(&f),
            Err(HeaderError::Missing("haServerAddr"))
        );
    }

    #[test]
    fn route_header_optional_flag() {
        let f: ExtFields = [("topic", "T")].into_iter().collect();
        let h = GetRouteInfoRequestHeader::read(&f).unwrap();
        assert_eq!(h.accept_standard_json_only, None);
        let f: ExtFields = [("topic", "T"), ("acceptStandardJsonOnly", "true")]
            .into_iter()
            .collect();
        assert_eq!(
            GetRouteInfoRequestHeader::read(&f)
                .unwrap()
                .accept_standard_json_only,
            Some(true)
        );
    }

    #[test]
    fn response_headers_write_java_names() {
        let mut f = ExtFields::new();
        WipeWritePermOfBrokerResponseHeader {
            wipe_topic_count: 3,
        }
        .write(&mut f);
        AddWritePermOfBrokerResponseHeader { add_topic_count: 2 }.write(&mut f);
        QueryDataVersionResponseHeader { changed: true }.write(&mut f);
        assert_eq!(f.get("wipeTopicCount"), Some("3"));
        assert_eq!(f.get("addTopicCount"), Some("2"));
        assert_eq!(f.get("changed"), Some("true"));
        let empty = RegisterBrokerResponseHeader::default();
        let mut g = ExtFields::new();
        empty.write(&mut g);
        assert!(g.is_empty());
    }
}
