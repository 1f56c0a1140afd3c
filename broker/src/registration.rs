//! Registration with the nameservers (`BrokerController.registerBrokerAll`,
//! `BrokerOuterAPI`): REGISTER_BROKER to every nameserver at start, every
//! `registerNameServerPeriod` and right after a topic change; UNREGISTER_BROKER on
//! shutdown.

use std::sync::Arc;
use std::time::Duration;

use protocol::RemotingCommand;
use protocol::body::RegisterBrokerBody;
use protocol::code::{request, response};
use protocol::header::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader,
};

use crate::names::perm;
use crate::remoting_client::RemotingClient;
use crate::state::Broker;

pub struct Registrar {
    clients: Vec<RemotingClient>,
}

impl Registrar {
    pub fn new(broker: &Broker) -> Self {
        Self {
            clients: broker
                .config
                .broker
                .namesrv_addrs()
                .into_iter()
                .map(RemotingClient::new)
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// One REGISTER_BROKER to every nameserver, concurrently. Returns how many accepted.
    pub async fn register_all(&self, broker: &Broker) -> usize {
        let b = &broker.config.broker;
        let mut wrapper = broker.topics.wrapper();
        // `registerBrokerAll`: a broker that lost read or write permission publishes
        // every topic with its perm masked by the broker's, so routes drain it.
        let broker_perm = broker.live.broker_permission();
        if !perm::is_writeable(broker_perm) || !perm::is_readable(broker_perm) {
            for topic in wrapper.topic_config_table.values_mut() {
                topic.perm &= broker_perm;
            }
        }
        let body = RegisterBrokerBody {
            topic_config_serialize_wrapper: wrapper,
            filter_server_list: Vec::new(),
        }
        .encode(false);
        // `UtilAll.crc32`: CRC32 masked to a non-negative int.
        let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32;
        let header = RegisterBrokerRequestHeader {
            broker_name: b.broker_name.clone(),
            broker_addr: b.broker_addr(),
            cluster_name: b.broker_cluster_name.clone(),
            ha_server_addr: b.ha_server_addr(),
            broker_id: registered_id(broker),
            compressed: false,
            body_crc32: crc,
            // The nameserver keeps the master of the highest epoch (issue 15 defect 5).
            master_epoch: broker
                .ha
                .get()
                .filter(|ha| !ha.is_slave())
                .map(|ha| ha.epoch()),
        };
        let cmd = RemotingCommand::request(request::REGISTER_BROKER, &header).with_body(body);
        let timeout = Duration::from_millis(b.register_broker_timeout_mills);
        let results = futures::future::join_all(self.clients.iter().map(|c| {
            let cmd = cmd.clone();
            async move { (c.addr(), c.invoke(cmd, timeout).await) }
        }))
        .await;
        let mut ok = 0;
        for (addr, result) in results {
            match result {
                Ok(r) if r.code == response::SUCCESS => {
                    ok += 1;
                    // `registerBrokerAll`: a slave learns its master from the answer.
                    if let (Some(ha), Ok(h)) =
                        (broker.ha.get(), r.header::<RegisterBrokerResponseHeader>())
                    {
                        ha.on_registration_answer(h.ha_server_addr, h.master_addr);
                    }
                }
                Ok(r) => {
                    tracing::warn!(namesrv = addr, code = r.code, remark = ?r.remark, "register broker refused")
                }
                Err(e) => tracing::warn!(namesrv = addr, error = %e, "register broker failed"),
            }
        }
        ok
    }

    pub async fn unregister_all(&self, broker: &Broker) {
        let b = &broker.config.broker;
        let header = UnRegisterBrokerRequestHeader {
            broker_name: b.broker_name.clone(),
            broker_addr: b.broker_addr(),
            cluster_name: b.broker_cluster_name.clone(),
            broker_id: registered_id(broker),
        };
        let cmd = RemotingCommand::request(request::UNREGISTER_BROKER, &header);
        let timeout = Duration::from_millis(b.register_broker_timeout_mills);
        for c in &self.clients {
            match c.invoke(cmd.clone(), timeout).await {
                Ok(_) => tracing::info!(namesrv = c.addr(), "unregistered"),
                Err(e) => tracing::warn!(namesrv = c.addr(), error = %e, "unregister failed"),
            }
        }
    }
}

/// The id registered: replication's (0 while master) when running, else `brokerId`.
fn registered_id(broker: &Broker) -> i64 {
    broker
        .ha
        .get()
        .map_or(broker.config.broker.broker_id, |ha| {
            ha.registered_broker_id()
        })
}

/// Registers now, then periodically and on topic changes, until shutdown.
pub async fn run(broker: Arc<Broker>, registrar: Arc<Registrar>) {
    if registrar.is_empty() {
        tracing::warn!("namesrvAddr is empty: the broker will not be visible to clients");
        return;
    }
    let period = broker.config.broker.register_period();
    loop {
        let ok = registrar.register_all(&broker).await;
        tracing::debug!(accepted = ok, "registered with nameservers");
        tokio::select! {
            _ = broker.shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
            _ = broker.topics.changed.notified() => {}
            _ = async {
                match broker.ha.get() {
                    Some(ha) => ha.register_now.notified().await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}
