//! Shared by the integration tests and the `crash_writer` example: store configs with
//! tiny files and messages whose content is a pure function of an id, so a checker can
//! verify what a killed writer acknowledged.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use protocol::message::{MessageSysFlag, PhysicalOffset};
use store::commitlog::BrokerMessage;
use store::{FlushDiskType, MessageStoreConfig};

/// A store config with small files so tests cross file boundaries constantly.
pub fn small_config(root: &Path, file_size: u32, flush: FlushDiskType) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::with_root(root);
    c.mapped_file_size_commit_log = file_size;
    c.mapped_file_size_consume_queue = 20 * 256;
    c.flush_disk_type = flush;
    c.max_hash_slot_num = 64;
    c.max_index_num = 512;
    c.flush_interval_commit_log = 10;
    c.clean_resource_interval = 3_600_000;
    c.delete_commit_log_files_interval = 0;
    c
}

/// Deterministic body for `id`: 16..=700 bytes, never all zeros.
pub fn body_for(id: u64) -> Vec<u8> {
    let len = 16 + (id.wrapping_mul(2_654_435_761) % 685) as usize;
    let mut x = id ^ 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x as u8) | 1
        })
        .collect()
}

pub fn topic_for(id: u64) -> String {
    format!("T{}", id % 3)
}

pub fn message_for(id: u64) -> BrokerMessage {
    BrokerMessage {
        topic: topic_for(id),
        queue_id: (id % 4) as i32,
        flag: 0,
        body: Bytes::from(body_for(id)),
        properties: format!("ID\u{1}{id}\u{2}KEYS\u{1}k{id}\u{2}"),
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse::<SocketAddr>().unwrap(),
        store_host: "127.0.0.1:10911".parse::<SocketAddr>().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: true,
    }
}

/// Small xorshift PRNG (tests print the seed so a failure can be replayed).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn seed() -> u64 {
    std::env::var("STORE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        })
}

/// Checks a recovered store: every acknowledged `(id, offset)` reads back with the right
/// content, and the CommitLog is a valid prefix (walking records from the minimum with
/// CRC checks ends exactly at the maximum offset). Returns the number of records.
pub fn verify_store(store: &store::MessageStore, acked: &[(u64, i64)]) -> usize {
    use protocol::message::decode;
    use protocol::message::properties::find as property;
    for (id, offset) in acked {
        let bytes = store
            .read_by_offset(PhysicalOffset(*offset))
            .unwrap_or_else(|| panic!("acknowledged message {id} at {offset} is missing"));
        let view = decode(&bytes, true).unwrap_or_else(|e| panic!("message {id} at {offset}: {e}"));
        assert_eq!(
            property(view.properties(), "ID"),
            Some(id.to_string().as_str()),
            "wrong record at {offset}"
        );
        assert_eq!(view.body(), &body_for(*id)[..], "body of {id}");
    }
    let log = store.commit_log();
    let mut count = 0;
    let mut iter = log.records_from(log.min_offset());
    for record in iter.by_ref() {
        decode(&record.bytes, true).unwrap_or_else(|e| panic!("record at {}: {e}", record.offset));
        count += 1;
    }
    let end = iter.position();
    let max = log.max_offset();
    // The walk stops either exactly at the end or at a trailing BLANK's file end.
    assert!(
        end == max || log.roll_next_file(end) == log.roll_next_file(max),
        "walk ended at {end}, max {max}"
    );
    count
}
