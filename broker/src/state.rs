//! The broker's shared state: configuration, the metadata managers, connections and the
//! bound on concurrent work.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use store::config_files::ConfigFileError;
use tokio_util::sync::CancellationToken;

use crate::client_requests::ClientRequests;
use crate::clients::{ClientManager, ConnId};
use crate::config::Config;
use crate::consume_rate::ConsumeRate;
use crate::groups::GroupManager;
use crate::in_flight::InFlightLimit;
use crate::live_config::LiveConfig;
use crate::locks::LockManager;
use crate::long_polling::PullHold;
use crate::metrics::Metrics;
use crate::offsets::OffsetManager;
use crate::schedule::ScheduleService;
use crate::store_api::MessageStoreApi;
use crate::topics::TopicManager;
use crate::transaction::Transactions;

pub struct Broker {
    pub config: Config,
    /// The settings UPDATE_BROKER_CONFIG may change; read these, not `config`, for them.
    pub live: LiveConfig,
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
    pub store: Arc<dyn MessageStoreApi>,
    pub pull_hold: PullHold,
    pub transactions: Transactions,
    /// Requests in progress across all connections (`maxInFlightTotal`).
    pub in_flight: Arc<InFlightLimit>,
    /// True once recovery finished and the listener is up (`/readyz`).
    pub ready: AtomicBool,
    pub shutdown: CancellationToken,
    next_conn: AtomicU64,
    /// Replication, once started (absent in tests that build a broker without it).
    pub ha: std::sync::OnceLock<Arc<crate::ha::Ha>>,
}

impl Broker {
    /// Loads the metadata files below `storePathRootDir`.
    pub fn open(
        config: Config,
        store: Arc<dyn MessageStoreApi>,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, ConfigFileError> {
        let root = config.store.store_path_root_dir.clone();
        let b = &config.broker;
        let topics = TopicManager::open(&root, b)?;
        let groups = GroupManager::open(&root)?;
        let live = LiveConfig::new(b);
        let offsets = OffsetManager::open(&root)?;
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
        Ok(Arc::new(Self {
            topics,
            groups,
            offsets,
            clients: ClientManager::default(),
            client_requests: ClientRequests::default(),
            locks: LockManager::default(),
            schedule,
            metrics,
            store,
            pull_hold: PullHold::default(),
            transactions: Transactions::default(),
            in_flight,
            ready: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
            next_conn: AtomicU64::new(1),
            ha: std::sync::OnceLock::new(),
            live,
            consume_rate: ConsumeRate::default(),
            config,
        }))
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

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Writes every metadata file (shutdown, and the periodic offset flush).
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
