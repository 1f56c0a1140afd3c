//! Requests a broker sends to the nameserver, for fake brokers in tests.

use protocol::RemotingCommand;
use protocol::body::{DataVersion, RegisterBrokerBody, TopicConfig};
use protocol::code::request;
use protocol::header::{RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader};

/// A broker identity plus the topics it reports.
#[derive(Debug, Clone)]
pub struct FakeBroker {
    pub cluster: String,
    pub name: String,
    pub addr: String,
    pub id: i64,
    pub data_version: DataVersion,
    pub topics: Vec<TopicConfig>,
    /// The `masterEpoch` this project's masters register with; `None` as RocketMQ's.
    pub master_epoch: Option<i32>,
}

impl FakeBroker {
    pub fn new(cluster: &str, name: &str, addr: &str, id: i64) -> Self {
        Self {
            cluster: cluster.into(),
            name: name.into(),
            addr: addr.into(),
            id,
            data_version: DataVersion {
                timestamp: 1_700_000_000_000,
                counter: 1,
            },
            topics: Vec::new(),
            master_epoch: None,
        }
    }

    /// Registers as a master of replication epoch `epoch`.
    pub fn epoch(mut self, epoch: i32) -> Self {
        self.master_epoch = Some(epoch);
        self
    }

    /// Adds a topic with `queues` read and write queues and perm READ|WRITE.
    pub fn topic(mut self, name: &str, queues: i32) -> Self {
        let mut t = TopicConfig::new(name);
        t.read_queue_nums = queues;
        t.write_queue_nums = queues;
        self.topics.push(t);
        self
    }

    pub fn body(&self) -> RegisterBrokerBody {
        let mut body = RegisterBrokerBody::default();
        let w = &mut body.topic_config_serialize_wrapper;
        w.data_version = self.data_version;
        for t in &self.topics {
            w.topic_config_table.insert(t.topic_name.clone(), t.clone());
        }
        body
    }

    /// REGISTER_BROKER as `BrokerOuterAPI.registerBrokerAll` builds it, with the body
    /// CRC set.
    pub fn register(&self, compressed: bool) -> RemotingCommand {
        let body = self.body().encode(compressed);
        let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32;
        RemotingCommand::request(
            request::REGISTER_BROKER,
            &RegisterBrokerRequestHeader {
                broker_name: self.name.clone(),
                broker_addr: self.addr.clone(),
                cluster_name: self.cluster.clone(),
                ha_server_addr: self.ha_addr(),
                broker_id: self.id,
                compressed,
                body_crc32: crc,
                master_epoch: self.master_epoch,
                grpc_port: None,
            },
        )
        .with_body(body)
    }

    pub fn unregister(&self) -> RemotingCommand {
        RemotingCommand::request(
            request::UNREGISTER_BROKER,
            &UnRegisterBrokerRequestHeader {
                broker_name: self.name.clone(),
                broker_addr: self.addr.clone(),
                cluster_name: self.cluster.clone(),
                broker_id: self.id,
            },
        )
    }

    /// The HA address this fake broker reports: same host, port + 1.
    pub fn ha_addr(&self) -> String {
        match self.addr.rsplit_once(':') {
            Some((host, port)) => {
                let port: u32 = port.parse().unwrap_or(0);
                format!("{host}:{}", port + 1)
            }
            None => self.addr.clone(),
        }
    }
}
