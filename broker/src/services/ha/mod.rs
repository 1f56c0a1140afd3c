//! Master/slave replication on the broker side (`HAService`, `HAConnection`,
//! `GroupTransferService`, `SlaveSynchronize` of RocketMQ 4.9, plus the epoch and role
//! handling of 5.x controller mode). The store provides the pure parts (epoch file,
//! confirm offset, validated replica appends, truncation); this module adds the network.
//!
//! * [`handshake`]: the authenticated start of a connection (group, secret, the master's
//!   epoch history, the slave's history proof).
//! * [`master`]: the HA listener; per slave a transfer task streaming CommitLog bytes and
//!   an ack reader (acks beyond what the connection streamed drop it).
//! * [`slave`]: the client that follows the master's stream, after cutting any tail the
//!   master does not have ([`truncation`]: unsafe cuts wait for an operator).
//! * [`metadata_sync`]: slaves copy topics, groups and offsets from the master.
//! * [`role_change`], [`admin`]: roles and epochs, GET_BROKER_HA_STATUS,
//!   GET_BROKER_EPOCH_CACHE, NOTIFY_BROKER_ROLE_CHANGED.

pub mod acks;
pub mod handshake;
pub mod master;
pub mod metadata_sync;
pub mod role_change;
pub mod slave;
pub mod transfer_frame;
pub mod truncation;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use protocol::body::ha::{HaClientRuntimeInfo, HaRuntimeInfo};
use protocol::message::PhysicalOffset;
use store::{BrokerRole, PutMessageResult, PutMessageStatus, ReplicaStore};
use tokio::sync::watch;

use crate::config::Config;
use acks::Acks;

/// Settings of replication, taken from the broker and store configuration.
#[derive(Debug, Clone)]
pub struct HaSettings {
    pub cluster: String,
    pub group: String,
    pub secret: security::sign::Secret,
    /// This broker's own id (`brokerId`), which NOTIFY_BROKER_ROLE_CHANGED names.
    pub broker_id: i64,
    /// `brokerIP2:haListenPort`, what slaves connect to.
    pub ha_server_addr: String,
    pub listen: std::net::SocketAddr,
    /// Role taken when promoted to master (the configured master role, else SYNC_MASTER).
    pub promoted_role: BrokerRole,
    pub sync_timeout: Duration,
    pub fallbehind_max: u64,
    pub batch_size: usize,
    pub heartbeat: Duration,
    pub housekeeping: Duration,
    pub confirm_visibility: Option<bool>,
    pub metadata_sync_period: Duration,
    /// The broker's account, signing the slave's requests to its master (ACL).
    pub credentials: Option<std::sync::Arc<security::sign::Credentials>>,
    /// TLS towards the master's remoting and HA ports (`tls.enable`).
    pub tls_client: Option<security::tls::TlsClient>,
}

impl HaSettings {
    pub fn from_config(config: &Config) -> Self {
        let b = &config.broker;
        let s = &config.store;
        Self {
            cluster: b.broker_cluster_name.clone(),
            group: b.broker_name.clone(),
            secret: b.ha_secret.clone(),
            broker_id: b.broker_id,
            ha_server_addr: b.ha_server_addr(),
            listen: std::net::SocketAddr::new(b.bind_address, b.ha_port()),
            promoted_role: promoted_role(&b.ha_master_role, s.broker_role)
                .unwrap_or(BrokerRole::SyncMaster),
            sync_timeout: Duration::from_millis(s.sync_flush_timeout.max(1)),
            fallbehind_max: s.ha_slave_fallbehind_max,
            batch_size: (s.ha_transfer_batch_size as usize).clamp(1024, 4 << 20),
            heartbeat: Duration::from_millis(s.ha_send_heartbeat_interval.max(10)),
            housekeeping: Duration::from_millis(s.ha_housekeeping_interval.max(100)),
            confirm_visibility: match s.confirm_offset_visibility.trim() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            metadata_sync_period: Duration::from_millis(b.slave_sync_interval.max(100)),
            // Validated (and refused at startup) by `Broker::open`.
            credentials: b.credentials().ok().flatten().map(std::sync::Arc::new),
            tls_client: security::tls::TlsClient::new(&b.client_tls())
                .ok()
                .flatten(),
        }
    }
}

/// Who this broker follows (slave) or that it leads (master).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// The master's remoting address (metadata sync, epoch cache).
    pub master_addr: Option<String>,
    /// The master's HA address.
    pub master_ha_addr: Option<String>,
}

#[derive(Debug)]
struct RoleState {
    role: BrokerRole,
    target: Target,
    /// The highest epoch this broker has been told about or taken part in.
    epoch: i32,
    /// The master a role change named for `epoch` (`None` for this broker itself, and
    /// unset while no master was named at it: after a fence, or at start-up).
    epoch_master: Option<EpochMaster>,
    /// The term this process began itself at start-up as master ([`Ha::begin_term`]):
    /// its epoch entry was written by this broker, so being promoted at it continues
    /// this broker's own writes.
    own_term: Option<i32>,
}

/// Who a role change named master of an epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum EpochMaster {
    Me,
    Other(String),
}

/// What the slave client exposes (`HAClient` runtime info).
#[derive(Debug, Default)]
pub struct ClientInfo {
    pub master_addr: Mutex<String>,
    pub activated: AtomicBool,
    pub last_read_ms: AtomicI64,
    /// Highest master offset seen in a frame header.
    pub master_max: AtomicI64,
}

#[derive(Debug, Default)]
pub struct HaCounters {
    pub forged_acks: std::sync::atomic::AtomicU64,
    pub refused_handshakes: std::sync::atomic::AtomicU64,
    /// Slaves whose history proof this master refused.
    pub refused_histories: std::sync::atomic::AtomicU64,
    /// Cuts this replica refused (below the confirm offset or to zero) until an operator
    /// allows them.
    pub refused_truncations: std::sync::atomic::AtomicU64,
    pub truncations: std::sync::atomic::AtomicU64,
    pub truncated_bytes: std::sync::atomic::AtomicU64,
}

pub struct Ha {
    pub settings: HaSettings,
    pub store: Arc<dyn ReplicaStore>,
    state: Mutex<RoleState>,
    /// Writes refused: a slave with a newer epoch showed this master it is stale.
    fenced: AtomicBool,
    pub acks: Acks,
    pub client: ClientInfo,
    pub counters: HaCounters,
    /// The last cut refused for want of an operator's permission (cleared by a cut).
    pub truncation_refused: Mutex<Option<truncation::Refusal>>,
    /// Bumped on every role or target change; the slave loop restarts on it.
    changes: watch::Sender<u64>,
    /// Held by the slave loop while it places replicated bytes, so a promotion never
    /// interleaves with a replica append.
    pub(crate) replica_gate: tokio::sync::Mutex<()>,
    /// Registration with the nameservers should run now (role or id changed).
    pub register_now: tokio::sync::Notify,
    /// The visible limit moved up: parked pulls may now find units that were dispatched
    /// before a slave acknowledged them (`notify_one` keeps one permit, so bursts of acks
    /// coalesce into one wake-up).
    pub visibility_advanced: tokio::sync::Notify,
}

impl Ha {
    pub fn new(
        settings: HaSettings,
        store: Arc<dyn ReplicaStore>,
        ha_master: Option<String>,
    ) -> Arc<Self> {
        let role = store.role();
        let epoch = store.epochs().current_epoch();
        let ha = Arc::new(Self {
            settings,
            state: Mutex::new(RoleState {
                role,
                target: Target {
                    master_addr: None,
                    master_ha_addr: ha_master,
                },
                epoch,
                epoch_master: None,
                own_term: None,
            }),
            fenced: AtomicBool::new(false),
            acks: Acks::default(),
            client: ClientInfo::default(),
            counters: HaCounters::default(),
            truncation_refused: Mutex::new(None),
            changes: watch::channel(0).0,
            replica_gate: tokio::sync::Mutex::new(()),
            register_now: tokio::sync::Notify::new(),
            visibility_advanced: tokio::sync::Notify::new(),
            store,
        });
        ha.apply_visibility();
        ha
    }

    pub fn role(&self) -> BrokerRole {
        self.state.lock().role
    }

    pub fn is_slave(&self) -> bool {
        self.role() == BrokerRole::Slave
    }

    /// The highest epoch this broker knows: told by a role change, begun as master, or
    /// held in its CommitLog's epoch history (a slave adopts its master's entries while
    /// it replicates, without any role change). GET_BROKER_HA_STATUS reports this, and
    /// the operator elects above the highest report: a history entry left out would let
    /// it reuse an epoch an earlier master already wrote in.
    pub fn epoch(&self) -> i32 {
        let told = self.state.lock().epoch;
        told.max(self.store.epochs().current_epoch())
    }

    pub fn target(&self) -> Target {
        self.state.lock().target.clone()
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire)
    }

    /// Writes are refused (slave, or a fenced master).
    pub fn refuses_writes(&self) -> bool {
        self.is_slave() || self.is_fenced()
    }

    /// The id to register with: 0 as master (as 5.x controller mode does), else this
    /// broker's own id (1 when it was configured as 0).
    pub fn registered_broker_id(&self) -> i64 {
        if self.is_slave() {
            self.settings.broker_id.max(1)
        } else {
            0
        }
    }

    pub(crate) fn subscribe_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn bump(&self) {
        self.changes.send_modify(|g| *g += 1);
        self.register_now.notify_one();
    }

    /// A newer epoch was seen from a slave: this master is stale and stops writing.
    pub(crate) fn fence(&self, newer: i32) {
        if !self.fenced.swap(true, Ordering::AcqRel) {
            tracing::error!(
                epoch = self.epoch(),
                newer,
                "a replica has a newer epoch: this master is stale, refusing writes"
            );
        }
    }

    /// The registration answer names the master (`haServerAddr`, `masterAddr`); a slave
    /// without a configured or notified master follows it. A master named by a role
    /// change is asked for its own HA address instead: a nameserver may still list an
    /// older master, and adopting its hint would also restart the follow loop.
    pub fn on_registration_answer(
        &self,
        ha_server_addr: Option<String>,
        master_addr: Option<String>,
    ) {
        let mut changed = false;
        {
            let mut s = self.state.lock();
            if s.role != BrokerRole::Slave {
                return;
            }
            if let Some(ha) = ha_server_addr.filter(|a| !a.is_empty())
                && s.target.master_ha_addr.is_none()
                && s.target.master_addr.is_none()
            {
                s.target.master_ha_addr = Some(ha);
                changed = true;
            }
            if let Some(m) = master_addr.filter(|a| !a.is_empty())
                && s.target.master_addr.is_none()
            {
                s.target.master_addr = Some(m);
                changed = true;
            }
        }
        if changed {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// Whether ConsumeQueue entries beyond the confirm offset are hidden now.
    fn visibility_on(&self) -> bool {
        let role = self.role();
        role != BrokerRole::Slave
            && self
                .settings
                .confirm_visibility
                .unwrap_or(role == BrokerRole::SyncMaster)
    }

    fn apply_visibility(&self) {
        let limit = self
            .visibility_on()
            .then(|| self.store.confirm_offset().get());
        self.store.set_visible_limit(limit);
    }

    /// A slave acknowledged: recompute the confirm offset (lowest ack of the in-sync
    /// slaves; it never moves back while the broker stays master).
    pub(crate) fn on_ack(&self) {
        let max = self.store.max_phy_offset().0;
        if let Some(confirm) = self.acks.confirm(max, self.settings.fallbehind_max) {
            let c = self.store.confirm_offset();
            if confirm > c.get().0 {
                c.set(PhysicalOffset(confirm));
                if self.visibility_on() {
                    self.store.set_visible_limit(Some(PhysicalOffset(confirm)));
                    self.visibility_advanced.notify_one();
                }
            }
        }
    }

    /// The SYNC_MASTER part of a put (`CommitLog.submitReplicaRequest` and the
    /// combination in `asyncPutMessage`): a stored message the producer waits for
    /// completes once a slave acknowledged its end offset. No slave, or the best one more
    /// than `haSlaveFallbehindMax` behind: SLAVE_NOT_AVAILABLE at once; no ack within
    /// `syncFlushTimeout`: FLUSH_SLAVE_TIMEOUT. A replication failure overrides the flush
    /// status; a flush failure stays when replication succeeded.
    pub async fn after_put(
        &self,
        mut result: PutMessageResult,
        wait_store_ok: bool,
    ) -> PutMessageResult {
        // A master fenced while this put was in flight (role SLAVE now) still answers by
        // what a slave acknowledged: the put must not read as replicated when it is not.
        if !wait_store_ok
            || self.role() == BrokerRole::AsyncMaster
            || !matches!(
                result.status,
                PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout
            )
        {
            return result;
        }
        let Some(appended) = &result.append else {
            return result;
        };
        let end = appended.end_offset().0;
        let status = self.wait_replicated(end).await;
        if status != PutMessageStatus::PutOk {
            result.status = status;
        }
        result
    }

    async fn wait_replicated(&self, end: i64) -> PutMessageStatus {
        let best = self.acks.max_ack();
        let slave_ok = self.acks.count() > 0
            && best >= 0
            && ((end - best).max(0) as u64) < self.settings.fallbehind_max;
        if !slave_ok {
            return PutMessageStatus::SlaveNotAvailable;
        }
        let mut wait = self.acks.wait_for(end);
        match tokio::time::timeout(self.settings.sync_timeout, wait.acked()).await {
            Ok(()) => PutMessageStatus::PutOk,
            Err(_) => PutMessageStatus::FlushSlaveTimeout,
        }
    }

    /// GET_BROKER_HA_STATUS body.
    pub fn runtime_info(&self) -> HaRuntimeInfo {
        let role = self.role();
        let max = self.store.max_phy_offset().0;
        let master = role != BrokerRole::Slave;
        let connections = self.acks.snapshot(max, self.settings.fallbehind_max);
        HaRuntimeInfo {
            master,
            role: role_name(role).to_owned(),
            epoch: self.epoch(),
            broker_id: self.registered_broker_id(),
            master_commit_log_max_offset: if master {
                max
            } else {
                self.client.master_max.load(Ordering::Acquire)
            },
            max_offset: max,
            confirm_offset: self.store.confirm_offset().get().0,
            in_sync_slave_nums: connections.iter().filter(|c| c.in_sync).count() as i32,
            ha_connection_info: connections,
            ha_client_runtime_info: HaClientRuntimeInfo {
                master_addr: self.client.master_addr.lock().clone(),
                max_offset: max,
                is_activated: self.client.activated.load(Ordering::Acquire),
                last_read_timestamp: self.client.last_read_ms.load(Ordering::Acquire),
            },
            ha_server_addr: self.settings.ha_server_addr.clone(),
            fenced: self.is_fenced(),
            truncation_refused: self.truncation_refused.lock().map(|r| r.to_string()),
        }
    }

    /// Persists the confirm offset now and then (and on shutdown via the store).
    pub async fn run_housekeeping(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            // A rewrite with three fsyncs: on the blocking pool, not on an async worker.
            let store = Arc::clone(&self.store);
            match tokio::task::spawn_blocking(move || store.confirm_offset().persist()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "persisting the confirm offset failed"),
                Err(e) => {
                    tracing::warn!(error = %e, "persisting the confirm offset did not complete")
                }
            }
        }
    }
}

pub fn role_name(role: BrokerRole) -> &'static str {
    match role {
        BrokerRole::AsyncMaster => "ASYNC_MASTER",
        BrokerRole::SyncMaster => "SYNC_MASTER",
        BrokerRole::Slave => "SLAVE",
    }
}

/// The HA listener's gate (`haMaxConnections`, `haMaxConnectionsPerIp`, the reserve,
/// `haHandshakeTimeoutMillis`).
fn ha_gate(broker: &crate::services::Broker) -> Arc<security::conn_gate::ConnGate> {
    crate::gates::gate(
        &broker.config.broker,
        &broker.metrics.limits,
        crate::metrics::limits::Listener::Ha,
    )
}

/// The role a promotion gives (`haMasterRole`, see the config key).
fn promoted_role(key: &str, configured: BrokerRole) -> Result<BrokerRole, String> {
    match key.trim() {
        "SYNC_MASTER" => Ok(BrokerRole::SyncMaster),
        "ASYNC_MASTER" => Ok(BrokerRole::AsyncMaster),
        "" if configured == BrokerRole::AsyncMaster => Ok(BrokerRole::AsyncMaster),
        "" => Ok(BrokerRole::SyncMaster),
        other => Err(format!(
            "haMasterRole={other} is not a master role: use SYNC_MASTER or ASYNC_MASTER"
        )),
    }
}

/// Whether replication runs. It needs the group's shared `haSecret`: without one the HA
/// port would take any peer's stream and acks. A broker that must replicate (SLAVE,
/// SYNC_MASTER, or a configured `haMasterAddress`) refuses to start without it; an
/// ASYNC_MASTER without it runs standalone (no HA port; role changes are refused), as
/// the single broker of `scripts/run-local.sh` does.
pub fn enabled(config: &Config) -> Result<bool, String> {
    let b = &config.broker;
    promoted_role(&b.ha_master_role, config.store.broker_role)?;
    if !b.ha_secret.is_empty() {
        return Ok(true);
    }
    let role = config.store.broker_role;
    if role != BrokerRole::AsyncMaster || b.ha_master_address.is_some() {
        return Err(format!(
            "haSecret is empty but this broker replicates (brokerRole={}{}): set haSecret in \
             broker.conf (or RMQ_HA_SECRET), the same value on every broker of group {}",
            role_name(role),
            if b.ha_master_address.is_some() {
                ", haMasterAddress set"
            } else {
                ""
            },
            b.broker_name
        ));
    }
    Ok(false)
}

/// Starts the HA listener, the slave client, metadata sync and housekeeping.
pub fn start(
    broker: &Arc<crate::services::Broker>,
    ha: &Arc<Ha>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let shutdown = broker.shutdown.clone();
    if ha.is_slave() && ha.settings.broker_id == 0 {
        tracing::warn!("brokerRole=SLAVE with brokerId=0: registering as brokerId 1");
    }
    vec![
        tokio::spawn(master::run_listener(
            Arc::clone(ha),
            ha_gate(broker),
            broker.tls.clone(),
            shutdown.clone(),
        )),
        tokio::spawn(slave::run(Arc::clone(ha), shutdown.clone())),
        tokio::spawn(metadata_sync::run(
            Arc::clone(broker),
            Arc::clone(ha),
            shutdown.clone(),
        )),
        tokio::spawn(Arc::clone(ha).run_housekeeping(shutdown.clone())),
        tokio::spawn(wake_pulls_on_confirm(
            Arc::clone(broker),
            Arc::clone(ha),
            shutdown,
        )),
    ]
}

/// Long polling under `confirmOffsetVisibility`: a unit becomes readable when the confirm
/// offset passes it, which is no arrival, so parked pulls whose unit became visible are
/// woken here.
async fn wake_pulls_on_confirm(
    broker: Arc<crate::services::Broker>,
    ha: Arc<Ha>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! {
            () = ha.visibility_advanced.notified() => broker
                .pull_hold
                .wake_where(|topic, queue_id, offset| {
                    broker.store.has_visible_message(topic, queue_id, offset)
                }),
            () = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests;
