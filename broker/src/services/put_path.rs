//! The one way a message enters the store. Every put site — SEND_MESSAGE(_V2), batches,
//! CONSUMER_SEND_MSG_BACK, END_TRANSACTION, schedule delivery, the transaction checker's
//! re-puts and op records — calls [`Broker::put`], which applies, in order:
//!
//! 1. the fence rule: a slave, or a master fenced by a newer epoch, stores nothing
//!    (SERVICE_NOT_AVAILABLE), so a stale master cannot add records a new master lacks;
//! 2. the flush rule: the store waits for `flushDiskType` when the put asks for it
//!    (`wait_store_ok`, RocketMQ's `WAIT` property, true unless a producer cleared it);
//! 3. the replica rule: under SYNC_MASTER the answer waits for a slave's ack of the
//!    record's end (`ha::Ha::after_put`).
//!
//! In RocketMQ 4.9 every one of these sites goes through `CommitLog.asyncPutMessage`,
//! whose `handleDiskFlush` and `handleHA` apply to all of them alike (send-back waits for
//! store and slave like a send does). Here the store's put methods take a [`PutPermit`],
//! which only this module can make: a new put site cannot reach the store without going
//! through [`Broker::put`]. The store's interface ([`store::MessageStoreApi`]) takes
//! a permit of its caller's choosing; the broker holds it as [`BrokerStore`], whose
//! permit is this one.

use protocol::message::PhysicalOffset;
use store::commitlog::{BatchMessage, BrokerMessage};
use store::{MessageStoreApi, PutMessageResult, PutMessageStatus};

use crate::services::Broker;

/// The store as the broker holds it: puts need a [`PutPermit`].
pub type BrokerStore = dyn MessageStoreApi<PutPermit>;

/// Proof that a store put was issued by [`Broker::put`]. Its field is private, so no
/// other module can construct one.
#[derive(Debug)]
pub struct PutPermit(());

#[cfg(test)]
impl PutPermit {
    /// For unit tests that fill a store directly.
    pub(crate) fn for_tests() -> Self {
        Self(())
    }
}

/// What to append.
#[derive(Debug, Clone)]
pub enum Put {
    Message(BrokerMessage),
    Batch(BatchMessage),
    /// The committed copy of a transaction's half message, pointing at the half's
    /// CommitLog offset (`preparedTransactionOffset`).
    TransactionEnd {
        msg: BrokerMessage,
        prepared: PhysicalOffset,
    },
}

impl Put {
    fn wait_store_ok(&self) -> bool {
        match self {
            Put::Message(m) | Put::TransactionEnd { msg: m, .. } => m.wait_store_msg_ok,
            Put::Batch(b) => b.wait_store_msg_ok,
        }
    }
}

impl Broker {
    /// Appends `put` under the fence, flush and replica rules (see the module docs).
    pub async fn put(&self, put: Put) -> PutMessageResult {
        let ha = self.ha.get();
        if self.is_slave() || ha.is_some_and(|ha| ha.is_fenced()) {
            return PutMessageResult::failed(PutMessageStatus::ServiceNotAvailable);
        }
        let wait_store_ok = put.wait_store_ok();
        let result = match put {
            Put::Message(m) => self.store.put_message(&m, PutPermit(())).await,
            Put::Batch(b) => self.store.put_messages(&b, PutPermit(())).await,
            Put::TransactionEnd { mut msg, prepared } => {
                msg.prepared_transaction_offset = prepared;
                self.store.put_message(&msg, PutPermit(())).await
            }
        };
        match ha {
            // A master fenced while this put was in flight still answers by what a
            // slave acknowledged (`after_put`), never by the local append alone.
            Some(ha) => ha.after_put(result, wait_store_ok).await,
            None => result,
        }
    }
}

#[cfg(test)]
#[path = "put_path_tests.rs"]
mod tests;
