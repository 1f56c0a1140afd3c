//! RocketMQ 4.9-compatible storage engine: CommitLog segment files on memory maps,
//! flush services (async and group-commit sync), checkpoint, abort/lock files, crash
//! recovery and retention, plus (from the read side) ConsumeQueue, IndexFile and
//! dispatch. On-disk formats follow `shared/reference/store-format.md`.

pub mod abort;
pub mod checkpoint;
pub mod commitlog;
pub mod config;
pub mod error;
pub mod flush;
pub mod fs;
pub mod ha;
pub mod lock;
pub mod mapped_file;
pub mod message_store;
pub mod put_result;
pub mod replication;
pub mod retention;

pub use config::{BrokerRole, FlushDiskType, MessageStoreConfig};
pub use error::StoreError;
pub use message_store::{MessageStore, PutMessageFuture, WriteRefusal};
pub use put_result::{AppendMessageResult, PutMessageResult, PutMessageStatus};

// store-index modules (see /work/notes/store-interfaces.md)
pub mod config_files;
pub mod consume_queue;
pub mod dispatch;
pub mod index;
pub mod lookup;
