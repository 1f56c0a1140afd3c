//! A store whose first CommitLog file does not start at offset 0 (a
//! fresh slave that starts from its master's last file) must flush, and once promoted
//! must acknowledge SYNC_FLUSH puts. The flushed position used to stay at 0, which no
//! file holds, so nothing was ever synced and every waiting put timed out.

use std::time::{Duration, Instant};

use protocol::message::PhysicalOffset;

use crate::MessageStore;
use crate::commitlog::tests_support::{config, message};
use crate::config::{BrokerRole, FlushDiskType};
use crate::put_result::PutMessageStatus;

const FILE: u32 = 16 * 1024;

#[test]
fn replica_starting_mid_log_flushes_and_serves_sync_flush_puts_when_promoted() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = MessageStore::open(config(md.path(), FILE)).unwrap();
    for i in 0..120usize {
        let m = message("T", 0, &vec![(i % 251) as u8 | 1; 300 + i * 7]);
        assert_eq!(
            master.put_message(&m).wait().status,
            PutMessageStatus::PutOk
        );
    }
    let log = master.commit_log();
    let start = log.mapped_files().last().unwrap().from_offset() as i64;
    assert!(start > 0, "the master needs more than one file");

    let mut c = config(sd.path(), FILE);
    c.flush_disk_type = FlushDiskType::SyncFlush;
    c.broker_role = BrokerRole::Slave;
    c.sync_flush_timeout = 2_000;
    let slave = MessageStore::open(c).unwrap();
    let mut writer = slave.replica_writer();
    let mut at = PhysicalOffset(start);
    while at < log.max_offset() {
        let window = log.read_to_file_end(at).unwrap();
        writer.accept(at, &window).unwrap();
        at = PhysicalOffset(at.0 + window.len() as i64);
    }
    assert_eq!(slave.max_phy_offset(), log.max_offset());
    assert_eq!(slave.min_phy_offset(), PhysicalOffset(start));

    // The flush service syncs what was replicated.
    let deadline = Instant::now() + Duration::from_secs(10);
    while slave.flushed_phy_offset() < slave.max_phy_offset() {
        assert!(
            Instant::now() < deadline,
            "replicated bytes never flushed: flushed {} of {}",
            slave.flushed_phy_offset(),
            slave.max_phy_offset()
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    slave
        .set_role(BrokerRole::AsyncMaster, Duration::from_secs(5))
        .unwrap();
    for i in 0..20usize {
        let r = slave
            .put_message(&message("T", 0, &vec![7; 200 + i]))
            .wait();
        assert_eq!(r.status, PutMessageStatus::PutOk, "put {i} after promotion");
        assert!(slave.flushed_phy_offset() >= r.append.unwrap().end_offset());
    }
}
