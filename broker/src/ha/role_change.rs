//! Role changes with epochs (`ReplicasManager.changeToMaster` / `changeToSlave` of
//! RocketMQ 5.x): a broker named master of epoch E records that E writes from its
//! current CommitLog end and starts accepting writes; any other broker becomes a slave
//! of the named master. An epoch below the highest one this broker knows is refused, so
//! a delayed or replayed order from an old election cannot undo a newer one.

use std::sync::Arc;

use store::BrokerRole;

use super::{Ha, Target};

#[derive(Debug, thiserror::Error)]
pub enum RoleChangeError {
    #[error("stale epoch {got}: this broker is at epoch {current}")]
    StaleEpoch { current: i32, got: i32 },
    #[error("becoming a slave needs the master's address")]
    NoMasterAddress,
    #[error("recording the epoch failed: {0}")]
    Epoch(String),
}

impl Ha {
    fn check_epoch(&self, epoch: i32) -> Result<(), RoleChangeError> {
        let current = self.epoch().max(self.store.epochs().current_epoch());
        if epoch < current {
            return Err(RoleChangeError::StaleEpoch {
                current,
                got: epoch,
            });
        }
        Ok(())
    }

    /// Becomes master of `epoch`. Replication from a former master stops first (the
    /// replica gate), then dispatch catches up and the queue offsets are rebuilt.
    pub async fn become_master(self: &Arc<Self>, epoch: i32) -> Result<(), RoleChangeError> {
        self.check_epoch(epoch)?;
        let role = self.settings.promoted_role;
        let was = {
            let mut s = self.state.lock();
            let was = s.role;
            s.role = role;
            s.epoch = s.epoch.max(epoch);
            s.target = Target::default();
            was
        };
        self.changes.send_modify(|g| *g += 1);
        let _gate = self.replica_gate.lock().await;
        let store = Arc::clone(&self.store);
        let recorded = tokio::task::spawn_blocking(move || {
            let max = store.max_phy_offset();
            store
                .epochs()
                .begin(epoch, max)
                .map_err(|e| e.to_string())?;
            store.set_role(role);
            Ok::<_, String>(max)
        })
        .await
        .map_err(|e| RoleChangeError::Epoch(e.to_string()))?;
        let start = match recorded {
            Ok(start) => start,
            Err(e) => {
                self.state.lock().role = was;
                self.bump();
                return Err(RoleChangeError::Epoch(e));
            }
        };
        // Everything up to here is on this broker; nothing newer exists anywhere.
        self.store.confirm_offset().set(start);
        self.fenced
            .store(false, std::sync::atomic::Ordering::Release);
        self.apply_visibility();
        tracing::info!(epoch, %start, role = super::role_name(role), "became master");
        self.bump();
        Ok(())
    }

    /// Becomes a slave of the master at `master_addr` (remoting address; its HA address
    /// is `master_ha_addr` or asked from it).
    pub fn become_slave(
        &self,
        epoch: i32,
        master_addr: Option<String>,
        master_ha_addr: Option<String>,
    ) -> Result<(), RoleChangeError> {
        self.check_epoch(epoch)?;
        if master_addr.is_none() && master_ha_addr.is_none() {
            return Err(RoleChangeError::NoMasterAddress);
        }
        {
            let mut s = self.state.lock();
            s.role = BrokerRole::Slave;
            s.epoch = s.epoch.max(epoch);
            s.target = Target {
                master_addr,
                master_ha_addr,
            };
        }
        self.store.set_role(BrokerRole::Slave);
        self.apply_visibility();
        tracing::info!(epoch, target = ?self.target(), "became slave");
        self.bump();
        Ok(())
    }
}
