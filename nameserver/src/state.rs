//! State shared by every connection, the expiry scanner and the HTTP endpoint.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use crate::config::NamesrvConfig;
use crate::kv_config::KvConfig;
use crate::metrics::Metrics;
use crate::route_table::{ConnId, RouteTable};

pub struct Shared {
    pub config: RwLock<NamesrvConfig>,
    pub routes: RwLock<RouteTable>,
    pub kv: KvConfig,
    pub metrics: Metrics,
    /// The ACL when `aclEnable=true` (checked in `crate::acl` before dispatch).
    pub acl: Option<std::sync::Arc<security::acl::AclStore>>,
    /// TLS on the remoting port unless `tls.server.mode=disabled`.
    pub tls: Option<std::sync::Arc<security::tls::TlsServer>>,
    /// Slots of `Mode::Heavy` requests (`maxConcurrentRegistrations`).
    pub heavy_slots: tokio::sync::Semaphore,
    /// Open connections, so the expiry scanner can close a dead broker's channel.
    connections: Mutex<HashMap<ConnId, CancellationToken>>,
    next_conn: AtomicU64,
    pub ready: AtomicBool,
}

impl Shared {
    pub fn new(config: NamesrvConfig, kv: KvConfig) -> Self {
        let heavy = config.max_concurrent_registrations.max(1);
        Self {
            heavy_slots: tokio::sync::Semaphore::new(heavy),
            routes: RwLock::new(
                RouteTable::new(config.table_limits.route.clone())
                    .with_authenticated_registrations(
                        config.acl_enable || !config.admin_secrets.is_empty(),
                    ),
            ),
            config: RwLock::new(config),
            kv,
            metrics: Metrics::default(),
            acl: None,
            tls: None,
            connections: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
            ready: AtomicBool::new(false),
        }
    }

    pub fn with_acl(mut self, acl: Option<std::sync::Arc<security::acl::AclStore>>) -> Self {
        self.acl = acl;
        self
    }

    pub fn with_tls(mut self, tls: Option<std::sync::Arc<security::tls::TlsServer>>) -> Self {
        self.tls = tls;
        self
    }

    /// Registers a new connection; cancelling the token closes it.
    pub fn open_connection(&self, parent: &CancellationToken) -> (ConnId, CancellationToken) {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let token = parent.child_token();
        self.connections.lock().insert(id, token.clone());
        self.metrics.connection_opened();
        (id, token)
    }

    /// Forgets a connection and drops every broker registered over it
    /// (`RouteInfoManager.onChannelDestroy`).
    pub fn close_connection(&self, id: ConnId) -> Vec<String> {
        if self.connections.lock().remove(&id).is_some() {
            self.metrics.connection_closed();
        }
        self.routes
            .write()
            .on_connection_closed(id, std::time::Instant::now())
    }

    pub fn cancel_connection(&self, id: ConnId) {
        if let Some(token) = self.connections.lock().get(&id) {
            token.cancel();
        }
    }
}
