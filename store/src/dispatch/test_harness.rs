//! Shared fixtures for dispatch and lookup tests: a store root with tiny ConsumeQueue and
//! IndexFile sizes, an in-memory CommitLog of 4 KiB files, and a raw on-disk decoder of
//! ConsumeQueue files written from RocketMQ's 20-byte unit layout (independent of the store's reader).

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use protocol::message::{PhysicalOffset, QueueOffset, TransactionType};
use tempfile::TempDir;

use super::Dispatcher;
use super::memory_log::{MemoryLog, TestMessage, props};
use crate::checkpoint::StoreCheckpoint;
use crate::config::MessageStoreConfig;

pub const CQ_UNITS_PER_FILE: usize = 5;
pub const LOG_FILE_SIZE: usize = 4096;
pub const T0: i64 = 1_700_000_000_000;

pub struct Harness {
    _root: TempDir,
    pub log: Arc<MemoryLog>,
    pub config: MessageStoreConfig,
}

impl Harness {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = MessageStoreConfig::with_root(dir.path());
        config.mapped_file_size_consume_queue = (CQ_UNITS_PER_FILE * 20) as u32;
        config.max_hash_slot_num = 11;
        config.max_index_num = 16;
        config.flush_interval_consume_queue = 5;
        Self {
            _root: dir,
            log: Arc::new(MemoryLog::new(LOG_FILE_SIZE)),
            config,
        }
    }

    pub fn checkpoint(&self) -> Arc<StoreCheckpoint> {
        Arc::new(StoreCheckpoint::open(&self.config.checkpoint_path()).unwrap())
    }

    /// Open + recover + truncate to the log end + start at the queues' end, like
    /// `MessageStore::open` after a clean exit.
    pub fn start(&self, last_exit_ok: bool, reput_from: Option<PhysicalOffset>) -> Dispatcher {
        let d = Dispatcher::open(&self.config, self.log.clone(), self.checkpoint()).unwrap();
        let cq_end = d.recover(last_exit_ok).unwrap();
        d.truncate_dirty(crate::dispatch::CommitLogReader::max_offset(&*self.log))
            .unwrap();
        d.start(reput_from.unwrap_or(cq_end)).unwrap();
        assert_eq!(d.dispatch_behind_bytes(), 0);
        d
    }

    /// A NOT-type message stored at `T0 + n` seconds.
    pub fn put(
        &self,
        topic: &str,
        queue_id: i32,
        n: i64,
        tags: Option<&str>,
        keys: Option<&str>,
    ) -> (PhysicalOffset, QueueOffset) {
        self.put_tx(topic, queue_id, n, tags, keys, TransactionType::Not)
    }

    pub fn put_tx(
        &self,
        topic: &str,
        queue_id: i32,
        n: i64,
        tags: Option<&str>,
        keys: Option<&str>,
        transaction: TransactionType,
    ) -> (PhysicalOffset, QueueOffset) {
        let body = format!("body-{n}");
        let uniq = format!("UNIQ{n:08}");
        self.log.append(&TestMessage {
            topic,
            queue_id,
            properties: props(tags, keys, Some(&uniq)),
            transaction,
            body: body.as_bytes(),
            store_timestamp: T0 + n * 1000,
        })
    }

    pub fn queue_dir(&self, topic: &str, queue_id: i32) -> std::path::PathBuf {
        self.config
            .consume_queue_dir()
            .join(topic)
            .join(queue_id.to_string())
    }
}

pub fn wait_caught_up(d: &Dispatcher) {
    assert!(
        d.wait_caught_up(Duration::from_secs(10)),
        "dispatch did not catch up"
    );
}

/// (physical offset, size, tags code) of every written unit of a queue directory, read
/// straight from the files: 20-digit names, 20-byte big-endian units, stop at the first
/// unit with offset < 0 or size <= 0. Index in the Vec = logical offset − first file start.
pub fn raw_cq_units(dir: &Path) -> Vec<(i64, (i64, i32, i64))> {
    let mut names: Vec<String> = match fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect(),
        Err(_) => return Vec::new(),
    };
    names.sort();
    let mut out = Vec::new();
    for name in names {
        assert_eq!(name.len(), 20);
        let from: i64 = name.parse().unwrap();
        let bytes = fs::read(dir.join(&name)).unwrap();
        assert_eq!(bytes.len(), CQ_UNITS_PER_FILE * 20);
        for (n, u) in bytes.chunks_exact(20).enumerate() {
            let offset = i64::from_be_bytes(u[0..8].try_into().unwrap());
            let size = i32::from_be_bytes(u[8..12].try_into().unwrap());
            let tags = i64::from_be_bytes(u[12..20].try_into().unwrap());
            if offset < 0 || size <= 0 {
                return out;
            }
            out.push(((from + 20 * n as i64) / 20, (offset, size, tags)));
        }
    }
    out
}

/// Java `String.hashCode` written out here as `IndexFile.indexKeyHashMethod` uses it.
pub fn ref_java_hash(s: &str) -> i64 {
    i64::from(
        s.encode_utf16()
            .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u))),
    )
}
