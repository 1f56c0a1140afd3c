//! The broker's shared state: configuration, the metadata managers, connections and the
//! bound on concurrent work.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use store::config_files::ConfigFileError;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::in_flight::InFlightLimit;
use crate::metrics::Metrics;
use crate::metrics::limits::Listener;
use crate::services::client_requests::ClientRequests;
use crate::services::clients::{ClientLimits, ClientManager, ConnId};
use crate::services::conf_file::ConfFile;
use crate::services::consume_rate::ConsumeRate;
use crate::services::filter::registry::FilterRegistry;
use crate::services::filter::sql92::Sql92Limits;
use crate::services::groups::GroupManager;
use crate::services::live_config::LiveConfig;
use crate::services::locks::LockManager;
use crate::services::long_polling::PullHold;
use crate::services::offsets::OffsetManager;
use crate::services::put_path::BrokerStore;
use crate::services::schedule::ScheduleService;
use crate::services::topics::TopicManager;
use crate::services::transaction::Transactions;
use security::conn_gate::ConnGate;

pub struct Broker {
    pub config: Config,
    /// The settings UPDATE_BROKER_CONFIG may change; read these, not `config`, for them.
    pub live: Arc<LiveConfig>,
    /// Where those changes are kept: the `-c` file when it is writable.
    pub conf_file: ConfFile,
    /// Messages pulled per group and topic over the last minute (consumeTps).
    pub consume_rate: ConsumeRate,
    pub topics: TopicManager,
    pub groups: GroupManager,
    pub offsets: OffsetManager,
    pub clients: ClientManager,
    /// Requests the broker sends to clients and awaits answers to (consumer status).
    pub client_requests: ClientRequests,
    pub locks: LockManager,
    /// Delay levels and their delivery progress (`delayOffset.json`).
    pub schedule: ScheduleService,
    pub metrics: Arc<Metrics>,
    pub store: Arc<BrokerStore>,
    pub pull_hold: PullHold,
    /// POP consumption (5.x consumers): cursors and in-flight messages.
    pub pop: crate::services::pop::PopService,
    /// Compiled SQL92 subscriptions (`ConsumerFilterManager`).
    pub filters: Arc<FilterRegistry>,
    pub transactions: Transactions,
    /// Requests in progress across all connections (`maxInFlightTotal`).
    pub in_flight: Arc<InFlightLimit>,
    /// Bytes of the requests in progress across all connections (`maxInFlightBytesTotal`).
    pub in_flight_bytes: Arc<InFlightLimit>,
    /// Parked pulls across all connections (`maxParkedPullsTotal`); separate from
    /// `in_flight` so parked pulls never starve sends and heartbeats.
    pub parked: Arc<InFlightLimit>,
    /// The remoting listeners' gate (main and VIP port together).
    pub remoting_gate: Arc<ConnGate>,
    /// True once recovery finished and the listener is up (`/readyz`).
    pub ready: AtomicBool,
    pub shutdown: CancellationToken,
    next_conn: AtomicU64,
    /// The ACL when `aclEnable=true` (checked in `crate::dispatch::acl` before dispatch).
    pub acl: Option<Arc<security::acl::AclStore>>,
    /// `adminSecret`: what role changes and config pushes must be signed with when the
    /// ACL is off (empty: open mode); see `crate::dispatch::admin_gate`.
    pub admin_secrets: security::admin_secret::AdminSecrets,
    /// The broker's own account, signing what it sends to nameservers and its master
    /// (the `adminSecret` signer when no `accessKey` is configured).
    pub credentials: Option<Arc<security::sign::Credentials>>,
    /// What registrations are signed with, tried in order per nameserver
    /// (`crate::services::namesrv_link`): the nameservers' admin secret, the ACL
    /// account, this broker's own admin secret; empty: unsigned.
    pub registration_signers: Vec<Option<Arc<security::sign::Credentials>>>,
    /// TLS on the remoting port unless `tls.server.mode=disabled`.
    pub tls: Option<Arc<security::tls::TlsServer>>,
    /// TLS towards nameservers and the master when `tls.enable=true`.
    pub tls_client: Option<security::tls::TlsClient>,
    /// Replication, once started (absent in tests that build a broker without it).
    pub ha: std::sync::OnceLock<Arc<crate::services::ha::Ha>>,
}

impl Broker {
    /// Loads the metadata files below `storePathRootDir`.
    pub fn open(
        config: Config,
        store: Arc<BrokerStore>,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, ConfigFileError> {
        let tls = server_tls(&config.broker)?;
        Self::open_with_tls(config, store, metrics, tls)
    }

    /// [`Self::open`] with the remoting port's TLS server already built from the same
    /// config (the process builds it first: the metrics port, up during recovery, shares
    /// it).
    pub fn open_with_tls(
        config: Config,
        store: Arc<BrokerStore>,
        metrics: Arc<Metrics>,
        tls: Option<Arc<security::tls::TlsServer>>,
    ) -> Result<Arc<Self>, ConfigFileError> {
        let root = config.store.store_path_root_dir.clone();
        let b = &config.broker;
        // Config files are written through the store's file system (fault injection).
        let fs = store.config_fs();
        let topics = TopicManager::open_with_fs(&root, b, Arc::clone(&fs))?;
        let groups = GroupManager::open_with_fs(&root, Arc::clone(&fs))?.with_max_groups(
            b.max_subscription_groups as usize,
            metrics.limits.refusals.clone(),
        );
        let live = Arc::new(LiveConfig::new(b));
        let conf_file =
            ConfFile::open(config.source.as_deref(), Arc::clone(&live), Arc::clone(&fs))?;
        let offsets = OffsetManager::open_with_fs(&root, fs)?
            .with_reset_capacity(config.broker.max_pending_offset_resets as usize);
        let levels = config
            .store
            .delay_levels()
            .map_err(|e| ConfigFileError::Parse {
                path: "messageDelayLevel".into(),
                what: "delay level table",
                reason: e.to_string(),
            })?;
        let schedule = ScheduleService::open(&root, levels)?;
        let in_flight = InFlightLimit::new(b.max_in_flight_total as usize);
        let acl = if b.acl_enable {
            let path = b.acl_file_path(&root);
            let store =
                security::acl::AclStore::open(&path).map_err(|e| ConfigFileError::Parse {
                    path: path.clone(),
                    what: "plain_acl.yml (aclFile)",
                    reason: e.to_string(),
                })?;
            Some(Arc::new(store))
        } else {
            None
        };
        let config_error = |reason: String| ConfigFileError::Parse {
            path: "broker.conf".into(),
            what: "broker config",
            reason,
        };
        let admin_secrets = security::admin_secret::AdminSecrets::parse(b.admin_secret.expose())
            .map_err(|e| config_error(e.to_string()))?
            .with_replay_window(
                b.admin_signature_window_millis,
                usize::try_from(b.admin_replay_cache_max_entries).unwrap_or(usize::MAX),
            );
        let namesrv_secrets =
            security::admin_secret::AdminSecrets::parse(b.namesrv_admin_secret.expose())
                .map_err(|e| config_error(format!("namesrvAdminSecret: {e}")))?;
        // What registrations (and the other requests this broker originates) are signed
        // with: its ACL account, else the nameservers' admin secret, else its own.
        let account = b
            .credentials()
            .map_err(|e| config_error(e.to_string()))?
            .map(Arc::new);
        let namesrv_signer = namesrv_secrets.credentials().map(Arc::new);
        let own_signer = admin_secrets.credentials().map(Arc::new);
        let credentials = account
            .clone()
            .or_else(|| namesrv_signer.clone())
            .or_else(|| own_signer.clone());
        let mut registration_signers: Vec<Option<Arc<security::sign::Credentials>>> = Vec::new();
        for signer in [namesrv_signer, account, own_signer].into_iter().flatten() {
            if !registration_signers
                .iter()
                .flatten()
                .any(|s| **s == *signer)
            {
                registration_signers.push(Some(signer));
            }
        }
        let tls_client = security::tls::TlsClient::new(&b.client_tls())
            .map_err(|e| tls_error("tls.client.* settings", e.to_string()))?;
        let parked = InFlightLimit::new(b.max_parked_pulls_total as usize);
        let in_flight_bytes =
            InFlightLimit::new(usize::try_from(b.max_in_flight_bytes_total).unwrap_or(usize::MAX));
        let remoting_gate = crate::gates::gate(b, &metrics.limits, Listener::Remoting);
        let filters = Arc::new(FilterRegistry::new(
            Sql92Limits::new(
                b.filter_sql_max_length as usize,
                b.filter_sql_max_depth,
                b.filter_sql_max_nodes,
            ),
            usize::try_from(b.filter_registry_max_bytes).unwrap_or(usize::MAX),
            metrics.limits.refusals.clone(),
        ));
        Ok(Arc::new(Self {
            topics,
            groups,
            offsets,
            clients: ClientManager::new(ClientLimits {
                groups_per_connection: b.max_groups_per_connection as usize,
                groups: b.max_client_groups as usize,
                subscription_bytes: usize::try_from(b.max_client_subscription_bytes)
                    .unwrap_or(usize::MAX),
            }),
            client_requests: ClientRequests::default(),
            locks: LockManager::default(),
            schedule,
            metrics,
            store,
            pull_hold: PullHold::default(),
            pop: crate::services::pop::PopService::new(),
            filters,
            transactions: Transactions::new(b),
            in_flight,
            in_flight_bytes,
            parked,
            remoting_gate,
            ready: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
            next_conn: AtomicU64::new(1),
            ha: std::sync::OnceLock::new(),
            acl,
            admin_secrets,
            credentials,
            registration_signers,
            tls,
            tls_client,
            live,
            conf_file,
            consume_rate: ConsumeRate::new(config.broker.max_consume_rate_entries as usize),
            config,
        }))
    }

    /// The address written into stored records as their store host (`brokerIP1` and
    /// `listenPort`), which offset message ids encode.
    pub fn store_host(&self) -> std::net::SocketAddr {
        let b = &self.config.broker;
        let ip = b
            .broker_ip1
            .parse()
            .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
        std::net::SocketAddr::new(ip, b.listen_port)
    }

    pub fn next_conn_id(&self) -> ConnId {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// The current role: replication's when running, else the configured one.
    pub fn role(&self) -> store::BrokerRole {
        self.ha
            .get()
            .map_or(self.config.store.broker_role, |ha| ha.role())
    }

    pub fn is_slave(&self) -> bool {
        self.role() == store::BrokerRole::Slave
    }

    /// Whether this broker takes writes as master now (its HA role, not only its
    /// configured one, and not fenced): what the transaction checker and delayed
    /// delivery run on. A slave promoted at runtime starts them; a demoted or fenced
    /// master stops them (4.9's `BrokerController.changeToMaster` / `changeToSlave`
    /// start and stop the same services).
    pub fn acts_as_master(&self) -> bool {
        !self.is_slave() && !self.ha.get().is_some_and(|ha| ha.is_fenced())
    }

    /// Waits until [`Self::acts_as_master`]; `false` when the broker shuts down first.
    pub async fn until_master(&self) -> bool {
        /// Role changes are rare; a promoted broker starts its master-only services
        /// within this.
        const POLL: std::time::Duration = std::time::Duration::from_millis(200);
        loop {
            if self.shutdown.is_cancelled() {
                return false;
            }
            if self.acts_as_master() {
                return true;
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return false,
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Writes every metadata file (shutdown). Blocks: never on an async worker.
    pub fn persist_all(&self) {
        for (what, result) in [
            ("consumerOffset.json", self.offsets.persist()),
            ("topics.json", self.topics.persist()),
            ("subscriptionGroup.json", self.groups.persist()),
            ("delayOffset.json", self.schedule.persist()),
        ] {
            if let Err(e) = result {
                tracing::error!(file = what, error = %e, "persist failed");
            }
        }
    }
}

fn tls_error(what: &'static str, reason: String) -> ConfigFileError {
    ConfigFileError::Parse {
        path: "broker.conf".into(),
        what,
        reason,
    }
}

/// The remoting port's TLS server from the `tls.server.*` keys (`None` when disabled).
pub fn server_tls(
    b: &crate::config::BrokerConfig,
) -> Result<Option<Arc<security::tls::TlsServer>>, ConfigFileError> {
    let settings = b
        .server_tls()
        .map_err(|e| tls_error("tls.server.* settings", e.to_string()))?;
    security::tls::TlsServer::new(settings)
        .map_err(|e| tls_error("tls.server.* settings", e.to_string()))
}
