//! Registration with the nameservers (`BrokerController.registerBrokerAll`,
//! `BrokerOuterAPI`): REGISTER_BROKER to every nameserver at start, every
//! `registerNameServerPeriod` and right after a topic change; UNREGISTER_BROKER on
//! shutdown. The list is the live `namesrvAddr` ([`crate::services::live_config`]): when
//! UPDATE_BROKER_CONFIG changes it, the broker registers with the new nameservers at
//! once and unregisters from the ones dropped from the list, so they stop routing to it
//! without waiting out their 120 s expiry (4.9's `updateNameServerAddressList` only
//! swaps the list).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use protocol::RemotingCommand;
use protocol::body::RegisterBrokerBody;
use protocol::code::{request, response};
use protocol::header::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader,
};

use crate::names::perm;
use crate::remoting_client::RemotingClient;
use crate::services::Broker;
use crate::services::namesrv_link::NamesrvLink;

pub struct Registrar {
    /// One link (kept connections) per nameserver of the current list.
    clients: Mutex<Vec<Arc<NamesrvLink>>>,
}

impl Registrar {
    pub fn new(broker: &Broker) -> Self {
        Self {
            clients: Mutex::new(
                broker
                    .live
                    .namesrv_addrs()
                    .into_iter()
                    .map(|a| Arc::new(namesrv_client(broker, a)))
                    .collect(),
            ),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.clients.lock().is_empty()
    }

    /// The nameservers registered with now.
    pub fn addrs(&self) -> Vec<String> {
        self.clients
            .lock()
            .iter()
            .map(|c| c.addr().to_owned())
            .collect()
    }

    fn current(&self) -> Vec<Arc<NamesrvLink>> {
        self.clients.lock().clone()
    }

    /// Brings the client set in line with the live `namesrvAddr` list (connections to
    /// nameservers still listed are kept); returns the clients of the dropped ones.
    fn sync(&self, broker: &Broker) -> Vec<Arc<NamesrvLink>> {
        let wanted = broker.live.namesrv_addrs();
        let mut clients = self.clients.lock();
        let (kept, dropped): (Vec<_>, Vec<_>) = clients
            .drain(..)
            .partition(|c| wanted.iter().any(|w| w == c.addr()));
        *clients = wanted
            .iter()
            .map(|w| {
                kept.iter()
                    .find(|c| c.addr() == w)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(namesrv_client(broker, w.clone())))
            })
            .collect();
        dropped
    }

    /// Re-points to the live list: unregisters from nameservers no longer listed, then
    /// registers with every listed one. Returns how many accepted the registration.
    pub async fn repoint(&self, broker: &Broker) -> usize {
        let dropped = self.sync(broker);
        if !dropped.is_empty() {
            tracing::info!(
                dropped = ?dropped.iter().map(|c| c.addr()).collect::<Vec<_>>(),
                now = ?self.addrs(),
                "nameserver list changed"
            );
            unregister_from(broker, &dropped).await;
        }
        self.register_all(broker).await
    }

    /// One REGISTER_BROKER to every nameserver, concurrently. Returns how many accepted.
    pub async fn register_all(&self, broker: &Broker) -> usize {
        let clients = self.current();
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
            // The nameserver keeps the master of the highest epoch.
            master_epoch: broker
                .ha
                .get()
                .filter(|ha| !ha.is_slave())
                .map(|ha| ha.epoch()),
            // Not a RocketMQ field; routes carry it to 5.x clients as `grpcAddrs`. The
            // listener binds exactly this port (0: no endpoint, nothing sent).
            grpc_port: (b.grpc_server_port != 0).then_some(i32::from(b.grpc_server_port)),
        };
        let cmd = RemotingCommand::request(request::REGISTER_BROKER, &header).with_body(body);
        let timeout = Duration::from_millis(b.register_broker_timeout_mills);
        let results = futures::future::join_all(clients.iter().map(|c| {
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
        unregister_from(broker, &self.current()).await;
    }
}

async fn unregister_from(broker: &Broker, clients: &[Arc<NamesrvLink>]) {
    let b = &broker.config.broker;
    let header = UnRegisterBrokerRequestHeader {
        broker_name: b.broker_name.clone(),
        broker_addr: b.broker_addr(),
        cluster_name: b.broker_cluster_name.clone(),
        broker_id: registered_id(broker),
    };
    let cmd = RemotingCommand::request(request::UNREGISTER_BROKER, &header);
    let timeout = Duration::from_millis(b.register_broker_timeout_mills);
    for c in clients {
        match c.invoke(cmd.clone(), timeout).await {
            Ok(_) => tracing::info!(namesrv = c.addr(), "unregistered"),
            Err(e) => tracing::warn!(namesrv = c.addr(), error = %e, "unregister failed"),
        }
    }
}

/// The link to one nameserver: signed with each of the broker's registration signers
/// in turn ([`NamesrvLink`]), TLS as the broker is configured.
pub(crate) fn namesrv_client(broker: &Broker, addr: String) -> NamesrvLink {
    NamesrvLink::new(&broker.registration_signers, |credentials| {
        RemotingClient::new(remoting::client::Peer::NameServer(addr.clone()))
            .with_credentials(credentials)
            .with_tls(broker.tls_client.clone())
    })
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

/// Registers now, then periodically, on topic changes and when the nameserver list
/// changes, until shutdown.
pub async fn run(broker: Arc<Broker>, registrar: Arc<Registrar>) {
    let period = broker.config.broker.register_period();
    // True right after a re-point, which registered already.
    let mut registered = false;
    loop {
        if registered {
            registered = false;
        } else if registrar.is_empty() {
            tracing::warn!(
                "namesrvAddr is empty: the broker is not visible to clients until it is set"
            );
        } else {
            let ok = registrar.register_all(&broker).await;
            tracing::debug!(accepted = ok, "registered with nameservers");
        }
        tokio::select! {
            _ = broker.shutdown.cancelled() => return,
            _ = broker.live.namesrv_changed.notified() => {
                let ok = registrar.repoint(&broker).await;
                tracing::info!(accepted = ok, namesrv = ?registrar.addrs(), "re-pointed to the new nameserver list");
                registered = true;
            }
            _ = tokio::time::sleep(period) => {}
            _ = broker.topics.changed().notified() => {}
            _ = async {
                match broker.ha.get() {
                    Some(ha) => ha.register_now.notified().await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}
