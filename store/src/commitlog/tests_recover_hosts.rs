//! Abnormal recovery over every host-family combination (sysFlag bits 4 and 5): the
//! fields after BORNHOST move with an IPv6 born host, and recovery must read them where
//! the record's own sysFlag puts them (an IPv6 born host once
//! panicked every restart).

use std::net::SocketAddr;
use std::sync::Arc;

use protocol::message::{PhysicalOffset, decode};

use super::tests::{config, message};
use super::*;
use crate::checkpoint::StoreCheckpoint;
use crate::fs::OsFs;

const V4: &str = "10.0.0.2:5000";
const V6: &str = "[::1]:5000";
const STORE_V4: &str = "10.0.0.1:10911";
const STORE_V6: &str = "[fd00::1]:10911";

fn round(born: &str, store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), 16 * 1024);
    let born: SocketAddr = born.parse().unwrap();
    let store: SocketAddr = store.parse().unwrap();
    let mut wrote = Vec::new();
    {
        let log = CommitLog::open(&c, Arc::new(OsFs)).unwrap();
        for i in 0..200u8 {
            let mut m = message("T", 0, &vec![i | 1; 100 + usize::from(i) * 2]);
            m.born_host = born;
            m.store_host = store;
            wrote.push(log.append(&m).unwrap().wrote_offset);
        }
        log.flush(0).unwrap();
        log.shutdown();
    }
    let files_before = std::fs::read_dir(c.commit_log_dir()).unwrap().count();
    assert!(files_before > 3, "the test needs several files");

    let log = CommitLog::open(&c, Arc::new(OsFs)).unwrap();
    let checkpoint = StoreCheckpoint::open(&dir.path().join("checkpoint")).unwrap();
    // Every record is older than the bound: recovery starts from the newest file.
    checkpoint.set_physic_msg_timestamp(i64::MAX / 2);
    checkpoint.set_logics_msg_timestamp(i64::MAX / 2);
    let recovered = log.recover_abnormally(&checkpoint, false, true).unwrap();
    let last = *wrote.last().unwrap();
    let last_len = log.read_record(last).unwrap().len() as i64;
    assert_eq!(
        recovered.end,
        PhysicalOffset(last.0 + last_len),
        "{born} / {store}"
    );
    let newest_start = log.mapped_files().last().unwrap().from_offset() as i64;
    assert_eq!(
        recovered.redispatch_from,
        Some(PhysicalOffset(newest_start)),
        "the newest file's first record is older than the bound ({born} / {store})"
    );
    for offset in &wrote {
        let bytes = log.read_record(*offset).unwrap();
        let view = decode(&bytes, true).unwrap();
        assert_eq!((view.born_host(), view.store_host()), (born, store));
    }

    // With a bound older than every record, recovery starts at the first file.
    let log = {
        drop(log);
        CommitLog::open(&c, Arc::new(OsFs)).unwrap()
    };
    checkpoint.set_physic_msg_timestamp(1);
    let recovered = log.recover_abnormally(&checkpoint, false, true).unwrap();
    assert_eq!(recovered.redispatch_from, Some(PhysicalOffset(0)));
    assert_eq!(recovered.end, PhysicalOffset(last.0 + last_len));
}

#[test]
fn abnormal_recovery_born_v4_store_v4() {
    round(V4, STORE_V4);
}

#[test]
fn abnormal_recovery_born_v6_store_v4() {
    round(V6, STORE_V4);
}

#[test]
fn abnormal_recovery_born_v4_store_v6() {
    round(V4, STORE_V6);
}

#[test]
fn abnormal_recovery_born_v6_store_v6() {
    round(V6, STORE_V6);
}
