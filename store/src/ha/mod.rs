//! The storage side of master/slave replication (no networking here): the epoch file,
//! the confirm offset, and the writer that appends bytes received from a master at the
//! master's physical offsets after validating them record by record, and the proof a
//! reconnecting slave gives that its log is a prefix of the master's.
//!
//! Runtime truncation of the CommitLog, ConsumeQueues and IndexFiles beyond an offset
//! (a former master rejoining as slave) is [`crate::MessageStore::truncate_beyond`].

mod confirm_offset;
mod epoch_file;
mod history_proof;
mod replica_writer;

pub use confirm_offset::ConfirmOffset;
pub use epoch_file::{EpochEntry, EpochError, EpochFile, last_consistent_point};
pub use history_proof::{HistoryProof, ProofError, TAIL_LEN};
pub use replica_writer::{ReplicaError, ReplicaWriter};
