//! What replication asks of a running store (`DefaultMessageStore` of RocketMQ 5.x in
//! controller mode): the current role, the epoch history and confirm offset, a writer
//! for the master's stream, visibility of ConsumeQueue entries up to the confirm offset,
//! and cutting every file back to an offset for a former master that rejoins as slave.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use protocol::message::PhysicalOffset;

use crate::commitlog::CommitLog;
use crate::config::BrokerRole;
use crate::error::StoreError;
use crate::ha::{ConfirmOffset, EpochFile, HistoryProof, ProofError, ReplicaWriter};
use crate::message_store::MessageStore;

/// The store as replication sees it: the master streams the CommitLog and checks a
/// slave's history, the slave writes the stream, cuts a diverged tail and changes role.
/// The broker's HA service holds a `dyn ReplicaStore`, never the store itself; message
/// puts and reads go through [`crate::MessageStoreApi`].
pub trait ReplicaStore: Send + Sync {
    fn role(&self) -> BrokerRole;
    /// See [`MessageStore::set_role`].
    fn set_role(&self, role: BrokerRole, dispatch_wait: Duration) -> Result<(), RoleError>;
    fn epochs(&self) -> &EpochFile;
    fn confirm_offset(&self) -> &ConfirmOffset;
    /// The CommitLog the master streams from (`HAConnection.WriteSocketService`).
    fn commit_log(&self) -> &Arc<CommitLog>;
    fn max_phy_offset(&self) -> PhysicalOffset;
    /// A writer placing the master's stream into this store's CommitLog.
    fn replica_writer(&self) -> ReplicaWriter;
    /// Consumers are served ConsumeQueue entries only up to `limit` (`None`: all).
    fn set_visible_limit(&self, limit: Option<PhysicalOffset>);
    /// See [`MessageStore::truncate_beyond`].
    fn truncate_beyond(&self, offset: PhysicalOffset) -> Result<(), StoreError>;
    /// What a slave presents to its master: its end and the bytes just before it.
    fn history_proof(&self) -> HistoryProof;
    /// The master's check of a slave's [`HistoryProof`] against its own CommitLog.
    fn check_history_proof(&self, proof: &HistoryProof) -> Result<(), ProofError>;
    /// `storePathRootDir`, where the operator's replication files live.
    fn root_dir(&self) -> &Path;
}

impl ReplicaStore for MessageStore {
    fn role(&self) -> BrokerRole {
        MessageStore::role(self)
    }

    fn set_role(&self, role: BrokerRole, dispatch_wait: Duration) -> Result<(), RoleError> {
        MessageStore::set_role(self, role, dispatch_wait)
    }

    fn epochs(&self) -> &EpochFile {
        MessageStore::epochs(self)
    }

    fn confirm_offset(&self) -> &ConfirmOffset {
        MessageStore::confirm_offset(self)
    }

    fn commit_log(&self) -> &Arc<CommitLog> {
        MessageStore::commit_log(self)
    }

    fn max_phy_offset(&self) -> PhysicalOffset {
        MessageStore::max_phy_offset(self)
    }

    fn replica_writer(&self) -> ReplicaWriter {
        MessageStore::replica_writer(self)
    }

    fn set_visible_limit(&self, limit: Option<PhysicalOffset>) {
        MessageStore::set_visible_limit(self, limit);
    }

    fn truncate_beyond(&self, offset: PhysicalOffset) -> Result<(), StoreError> {
        MessageStore::truncate_beyond(self, offset)
    }

    fn history_proof(&self) -> HistoryProof {
        MessageStore::history_proof(self)
    }

    fn check_history_proof(&self, proof: &HistoryProof) -> Result<(), ProofError> {
        MessageStore::check_history_proof(self, proof)
    }

    fn root_dir(&self) -> &Path {
        &self.config.store_path_root_dir
    }
}

/// Why a role change was refused.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    #[error(
        "dispatch is {behind} bytes behind the CommitLog (reput at {reput}, end {end}) after \
         waiting {waited:?}: promotion refused until the ConsumeQueues cover every replicated byte"
    )]
    DispatchBehind {
        behind: u64,
        reput: PhysicalOffset,
        end: PhysicalOffset,
        waited: Duration,
    },
}

/// A [`BrokerRole`] that can change while the store runs.
#[derive(Debug)]
pub struct RoleCell(AtomicU8);

impl RoleCell {
    pub fn new(role: BrokerRole) -> Self {
        Self(AtomicU8::new(Self::code(role)))
    }

    fn code(role: BrokerRole) -> u8 {
        match role {
            BrokerRole::AsyncMaster => 0,
            BrokerRole::SyncMaster => 1,
            BrokerRole::Slave => 2,
        }
    }

    pub fn get(&self) -> BrokerRole {
        match self.0.load(Ordering::Acquire) {
            0 => BrokerRole::AsyncMaster,
            1 => BrokerRole::SyncMaster,
            _ => BrokerRole::Slave,
        }
    }

    pub fn set(&self, role: BrokerRole) {
        self.0.store(Self::code(role), Ordering::Release);
    }
}

impl MessageStore {
    pub fn role(&self) -> BrokerRole {
        self.role.get()
    }

    /// Changes the role. Becoming a master first waits up to `dispatch_wait` for dispatch
    /// to cover everything replicated so far, then rebuilds the next queue offsets from
    /// the ConsumeQueues (a slave's appends never assigned any). When dispatch is still
    /// behind the role stays SLAVE and [`RoleError::DispatchBehind`] says by how much:
    /// next queue offsets taken from queues that miss replicated records would be handed
    /// out again, and reput would then drop the new, acknowledged message as a duplicate
    /// of the replicated one. The caller must not take writes (nor record an epoch) then.
    pub fn set_role(&self, role: BrokerRole, dispatch_wait: Duration) -> Result<(), RoleError> {
        if role != BrokerRole::Slave && self.role.get() == BrokerRole::Slave {
            if !self.dispatcher.wait_caught_up(dispatch_wait) {
                return Err(RoleError::DispatchBehind {
                    behind: self.dispatcher.dispatch_behind_bytes(),
                    reput: self.dispatcher.reput_offset(),
                    end: self.commit_log.max_offset(),
                    waited: dispatch_wait,
                });
            }
            self.commit_log
                .set_queue_offsets(self.dispatcher.queue_max_offsets());
        }
        self.role.set(role);
        Ok(())
    }

    pub fn epochs(&self) -> &EpochFile {
        &self.epochs
    }

    pub fn confirm_offset(&self) -> &ConfirmOffset {
        &self.confirm
    }

    /// A writer placing the master's stream into this store's CommitLog.
    pub fn replica_writer(&self) -> ReplicaWriter {
        ReplicaWriter::new(
            std::sync::Arc::clone(&self.commit_log),
            self.config.check_crc_on_recover,
            self.config.max_message_size,
        )
    }

    /// Consumers are served ConsumeQueue entries only up to `limit` (`None`: all).
    pub fn set_visible_limit(&self, limit: Option<PhysicalOffset>) {
        self.dispatcher.set_visible_limit(limit);
    }

    /// Cuts the CommitLog, the ConsumeQueues and the IndexFiles back to `offset` while
    /// the store runs (`truncateDirtyFiles`), for a former master whose tail its new
    /// master does not have. Dispatch is stopped meanwhile and restarted from the lowest
    /// offset whose index entries must be rebuilt; the epoch history and the confirm
    /// offset are cut too. Writes must already be refused (slave role). Blocks until
    /// dispatch has caught up again.
    pub fn truncate_beyond(&self, offset: PhysicalOffset) -> Result<(), StoreError> {
        let offset = offset.max(PhysicalOffset(0));
        if offset >= self.commit_log.max_offset() {
            return Ok(());
        }
        tracing::warn!(
            from = %offset,
            to = %self.commit_log.max_offset(),
            "truncating the CommitLog tail the master does not have"
        );
        self.dispatcher.shutdown()?;
        self.commit_log.truncate_live(offset)?;
        let reput_from = self.dispatcher.truncate_beyond(offset)?;
        self.commit_log
            .set_queue_offsets(self.dispatcher.queue_max_offsets());
        self.epochs
            .truncate_beyond(offset)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.confirm.clamp_to(offset);
        self.dispatcher.start(reput_from)
    }
}

#[cfg(test)]
#[path = "replication_tests.rs"]
mod tests;
