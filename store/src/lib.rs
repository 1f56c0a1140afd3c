//! RocketMQ 4.9-compatible storage engine: CommitLog segment files on memory maps,
//! flush services (async and group-commit sync), checkpoint, abort/lock files, crash
//! recovery and retention, plus (from the read side) ConsumeQueue, IndexFile and
//! dispatch. On-disk formats are RocketMQ 4.9's byte for byte (`CommitLog`, `ConsumeQueue`,
//! `IndexFile`, `StoreCheckpoint`; `docs/architecture.md` lists them).
//!
//! # Failure policy
//!
//! Each I/O error class has one answer (the table in `docs/architecture.md`, "Store
//! failure policy", is the reference):
//!
//! * **write / flush error on the CommitLog**: trip the write fence ([`fence`]); no put is
//!   acknowledged as durable afterwards, later puts are refused, the broker reports
//!   itself not ready until a restart. Never retried: a failed `msync` loses its pages'
//!   dirty state, so a later success proves nothing.
//! * **stalled flush**: the watchdog answers FLUSH_DISK_TIMEOUT at `syncFlushTimeout`.
//! * **allocation / ENOSPC**: every file is allocated through [`fs::StoreFs`] before use
//!   (never sparse); failure is a put error, and both the CommitLog and the root volume
//!   are checked ahead of time (puts refused above the warning ratio).
//! * **ConsumeQueue / index write error**: retry, then hold dispatch on that record and
//!   refuse puts until it succeeds ([`dispatch`]).
//! * **corruption at startup**: keep the valid prefix and cut the rest durably; refuse to
//!   start (naming the file) only where no valid prefix can be told apart.

pub mod abort;
pub mod api;
pub mod checkpoint;
pub mod commitlog;
pub mod config;
pub mod error;
pub mod fence;
pub mod flush;
pub mod fs;
pub mod ha;
pub mod lock;
pub mod mapped_file;
pub mod mem;
pub mod message_store;
pub mod put_result;
pub mod replication;
pub mod retention;

pub use api::{MessageStoreApi, QueueUnit};
pub use config::{BrokerRole, FlushDiskType, MessageStoreConfig};
pub use error::StoreError;
pub use message_store::{MessageStore, PutMessageFuture, WriteRefusal};
pub use put_result::{AppendMessageResult, PutMessageResult, PutMessageStatus};
pub use replication::ReplicaStore;

// store-index modules (see /work/notes/store-interfaces.md)
pub mod config_files;
pub mod consume_queue;
pub mod dispatch;
pub mod index;
pub mod lookup;
#[cfg(test)]
mod tests_volumes;
