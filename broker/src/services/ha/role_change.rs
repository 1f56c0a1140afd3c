//! Role changes with epochs (`ReplicasManager.changeToMaster` / `changeToSlave` of
//! RocketMQ 5.x): a broker named master of epoch E records that E writes from its
//! current CommitLog end and starts accepting writes; any other broker becomes a slave
//! of the named master. An epoch below the highest one this broker knows is refused, so
//! a delayed or replayed order from an old election cannot undo a newer one.

use std::sync::Arc;

use store::BrokerRole;

use super::{EpochMaster, Ha, Target};

#[derive(Debug, thiserror::Error)]
pub enum RoleChangeError {
    #[error("stale epoch {got}: this broker is at epoch {current}")]
    StaleEpoch { current: i32, got: i32 },
    #[error("recording the epoch failed: {0}")]
    Epoch(String),
    /// Two controllers (operators) promoting two brokers at one epoch: the second one
    /// loses. Every election must use an epoch above any a member has seen.
    #[error("epoch {epoch} already has master {master}; a different master needs a newer epoch")]
    EpochTaken { epoch: i32, master: String },
    /// Promotion at an epoch this broker's CommitLog already holds entries of.
    #[error("epoch {epoch} is already in this broker's epoch history; promote at a newer epoch")]
    EpochWritten { epoch: i32 },
    #[error("not promoted: {0}")]
    NotCaughtUp(String),
}

/// How long a promotion waits for dispatch to index everything replicated before it is
/// refused (the operator retries, or elects another replica).
pub const PROMOTION_DISPATCH_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Ha {
    /// Refuses to name a second, different master at the epoch this broker is at.
    fn check_named(&self, epoch: i32, named: &EpochMaster) -> Result<(), RoleChangeError> {
        let s = self.state.lock();
        match &s.epoch_master {
            Some(known) if epoch == s.epoch && known != named => Err(RoleChangeError::EpochTaken {
                epoch,
                master: match known {
                    EpochMaster::Me => "this broker".to_owned(),
                    EpochMaster::Other(addr) => addr.clone(),
                },
            }),
            _ => Ok(()),
        }
    }

    /// A new master's epoch must be one nobody has written in yet. The epoch history
    /// this broker holds (its own or adopted from a master) was written by whoever was
    /// master then; continuing that epoch from here would make bytes of two masters
    /// read as one history, and a former master holding an unacknowledged tail of that
    /// epoch could then never prove a prefix nor be cut back (seen as a group stuck
    /// without a slave after failover). Continuing this broker's own epoch (a replayed
    /// promotion, or the term it began at start-up) is fine.
    fn check_unwritten(&self, epoch: i32) -> Result<(), RoleChangeError> {
        let held = self.store.epochs().current_epoch();
        let s = self.state.lock();
        let mine = (s.epoch == epoch && s.epoch_master == Some(EpochMaster::Me))
            || (held == epoch && s.own_term == Some(epoch));
        if epoch <= held && !mine {
            return Err(RoleChangeError::EpochWritten { epoch });
        }
        Ok(())
    }

    fn check_epoch(&self, epoch: i32) -> Result<(), RoleChangeError> {
        let current = self.epoch();
        if epoch < current {
            return Err(RoleChangeError::StaleEpoch {
                current,
                got: epoch,
            });
        }
        Ok(())
    }

    /// Becomes master of `epoch`. The replication client is stopped first: the target is
    /// cleared (the slave loop goes idle and drops its connection), then the replica gate
    /// is taken so no replicated frame lands after the epoch's start offset is recorded.
    /// Writes stay refused (the role is still SLAVE) until the epoch is on disk.
    pub async fn become_master(self: &Arc<Self>, epoch: i32) -> Result<(), RoleChangeError> {
        self.check_epoch(epoch)?;
        self.check_named(epoch, &EpochMaster::Me)?;
        self.check_unwritten(epoch)?;
        let role = self.settings.promoted_role;
        let target = std::mem::take(&mut self.state.lock().target);
        self.changes.send_modify(|g| *g += 1);
        let _gate = self.replica_gate.lock().await;
        let store = Arc::clone(&self.store);
        let recorded = tokio::task::spawn_blocking(move || {
            let max = store.max_phy_offset();
            // Dispatch must cover every replicated byte before the store takes writes;
            // refused, nothing changed (no epoch recorded) and the operator may retry.
            store
                .set_role(role, PROMOTION_DISPATCH_WAIT)
                .map_err(|e| RoleChangeError::NotCaughtUp(e.to_string()))?;
            if let Err(e) = store.epochs().begin(epoch, max) {
                let _ = store.set_role(BrokerRole::Slave, PROMOTION_DISPATCH_WAIT);
                return Err(RoleChangeError::Epoch(e.to_string()));
            }
            Ok::<_, RoleChangeError>(max)
        })
        .await
        .map_err(|e| RoleChangeError::Epoch(e.to_string()))
        .and_then(|r| r);
        let start = match recorded {
            Ok(start) => start,
            Err(e) => {
                let mut s = self.state.lock();
                if s.role == BrokerRole::Slave {
                    s.target = target;
                }
                drop(s);
                self.bump();
                return Err(e);
            }
        };
        // Everything up to here is on this broker; nothing newer exists anywhere.
        self.store.confirm_offset().set(start);
        {
            let mut s = self.state.lock();
            s.role = role;
            s.epoch = s.epoch.max(epoch);
            s.epoch_master = Some(EpochMaster::Me);
            s.target = Target::default();
        }
        self.fenced
            .store(false, std::sync::atomic::Ordering::Release);
        self.apply_visibility();
        tracing::info!(epoch, %start, role = super::role_name(role), "became master");
        self.bump();
        Ok(())
    }

    /// A broker starting as master begins a new term: a new epoch recorded from its
    /// CommitLog end before it takes writes or serves slaves. A master that lost an
    /// unflushed tail (recovered to F below what it had streamed, X) then writes past F
    /// in an epoch its slaves never saw, so a slave holding the old bytes up to X shares
    /// only F with it and is cut there, instead of reading as an identical replica up to
    /// X (5.x gets the same from its controller's elections).
    pub fn begin_term(&self) -> Result<(), RoleChangeError> {
        if self.is_slave() {
            return Ok(());
        }
        let epoch = self.epoch().saturating_add(1);
        let start = self.store.max_phy_offset();
        self.store
            .epochs()
            .begin(epoch, start)
            .map_err(|e| RoleChangeError::Epoch(e.to_string()))?;
        // A term begun here is local, not an election: no master is named for it, so an
        // operator's order naming the group's elected master at this same number still
        // wins (a restarted former master can pick the number a newer master already
        // holds; the history proof then finds where the two logs differ).
        {
            let mut s = self.state.lock();
            s.epoch = epoch;
            s.own_term = Some(epoch);
        }
        tracing::info!(epoch, %start, "new master term");
        Ok(())
    }

    /// Becomes a slave of the master at `master_addr` (remoting address; its HA address
    /// is `master_ha_addr` or asked from it). Without either (the operator's fence:
    /// masterBrokerId -1 and an empty address) the broker is fenced at `epoch`: it refuses
    /// writes and follows no one until a later role change names the new master.
    pub fn become_slave(
        &self,
        epoch: i32,
        master_addr: Option<String>,
        master_ha_addr: Option<String>,
    ) -> Result<(), RoleChangeError> {
        self.check_epoch(epoch)?;
        let target = Target {
            master_addr: master_addr.filter(|a| !a.trim().is_empty()),
            master_ha_addr: master_ha_addr.filter(|a| !a.trim().is_empty()),
        };
        // A fence names no master; following one names it for this epoch.
        let named = target
            .master_addr
            .clone()
            .or_else(|| target.master_ha_addr.clone())
            .map(EpochMaster::Other);
        if let Some(named) = &named {
            self.check_named(epoch, named)?;
        }
        {
            let mut s = self.state.lock();
            s.role = BrokerRole::Slave;
            s.epoch = s.epoch.max(epoch);
            s.epoch_master = named;
            s.target = target;
        }
        // Demotion never waits for anything and cannot fail.
        let _ = self
            .store
            .set_role(BrokerRole::Slave, PROMOTION_DISPATCH_WAIT);
        self.apply_visibility();
        tracing::info!(epoch, target = ?self.target(), "became slave");
        self.bump();
        Ok(())
    }

    /// Whether a NOTIFY_BROKER_ROLE_CHANGED naming `master_broker_id` names this broker:
    /// its configured id, or the id it registers with (what GET_BROKER_HA_STATUS reports
    /// and the operator promotes by: 0 as master, the configured id or 1 as slave). A
    /// fenced former master configured as brokerId 0 registers as 1, so a later "follow
    /// brokerId 0" is not read as its own promotion.
    pub fn names_me(&self, master_broker_id: i64) -> bool {
        let configured = self.settings.broker_id;
        master_broker_id >= 0
            && (master_broker_id == self.registered_broker_id()
                || (master_broker_id != 0 && master_broker_id == configured))
    }
}

#[cfg(test)]
#[path = "role_change_tests.rs"]
mod tests;
