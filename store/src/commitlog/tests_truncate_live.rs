//! Cutting the log while the next file is being preallocated must
//! not leave that file behind (a gap on disk that refuses the next start).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tests::{config, message};
use super::*;
use crate::fs::{Fault, FaultFs, FaultOp, OsFs};

#[test]
fn a_file_preallocated_during_a_live_truncation_leaves_no_gap() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let c = config(dir.path(), 16 * 1024);
    let log = CommitLog::open(&c, Arc::clone(&fs) as Arc<dyn StoreFs>).unwrap();
    let mut offsets = Vec::new();
    while log.mapped_files().file_count() < 3 {
        offsets.push(
            log.append(&message("T", 0, &[1; 1000]))
                .unwrap()
                .wrote_offset,
        );
    }
    // Wait until the allocator has the next file ready, then stall the one after it.
    let count = |d: &std::path::Path| std::fs::read_dir(d).unwrap().count();
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&c.commit_log_dir()) < 4 {
        assert!(Instant::now() < deadline, "no preallocated file");
        std::thread::sleep(Duration::from_millis(2));
    }
    fs.inject(
        FaultOp::Allocate,
        dir.path(),
        Fault::Stall(Duration::from_secs(3600)),
    );
    let files = log.mapped_files().file_count();
    while log.mapped_files().file_count() == files {
        log.append(&message("T", 0, &[2; 1000])).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while fs.fired() == 0 {
        assert!(
            Instant::now() < deadline,
            "the next allocation never started"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::scope(|s| {
        let truncation = s.spawn(|| log.truncate_live(offsets[1]));
        // The stalled allocation goes on only once the truncation has deleted the later
        // files: it then waits for the file being made, or finds it made.
        let deadline = Instant::now() + Duration::from_secs(10);
        while count(&c.commit_log_dir()) > 2 {
            assert!(Instant::now() < deadline, "the truncation deleted nothing");
            std::thread::sleep(Duration::from_millis(2));
        }
        fs.heal();
        truncation.join().unwrap().unwrap();
    });
    log.shutdown();
    drop(log);
    let reopened = CommitLog::open(&c, Arc::new(OsFs)).unwrap();
    let recovered = reopened.recover_normally(true).unwrap();
    assert_eq!(recovered.end, offsets[1]);
}

/// A live truncation (a former master rejoining as slave) must not
/// change bytes that readers hold: pull bodies are zero-copy views of the mapping and
/// ConsumeQueue windows read units on demand.
#[test]
fn live_truncation_leaves_held_views_unchanged() {
    use protocol::message::QueueOffset;

    use crate::MessageStore;
    use crate::config::BrokerRole;

    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 64 * 1024)).unwrap();
    let mut offsets = Vec::new();
    for i in 0..40u8 {
        let r = store.put_message(&message("T", 0, &[i | 1; 400])).wait();
        offsets.push(r.append.unwrap().wrote_offset);
    }
    assert!(store.dispatcher().wait_caught_up(Duration::from_secs(10)));
    let held = store.read_by_offset(offsets[30]).unwrap();
    let held_copy = held.to_vec();
    let cq = store.dispatcher().consume_queues().find("T", 0).unwrap();
    let window = cq.window_from(QueueOffset(25)).unwrap();
    let units_before: Vec<_> = window.iter().collect();

    store
        .set_role(BrokerRole::Slave, Duration::from_secs(5))
        .unwrap();
    store.truncate_beyond(offsets[20]).unwrap();
    assert_eq!(store.max_phy_offset(), offsets[20]);
    assert_eq!(&held[..], &held_copy[..], "a held record view changed");
    let units_after: Vec<_> = window.iter().collect();
    assert_eq!(
        units_after, units_before,
        "a held ConsumeQueue window changed"
    );
    assert_eq!(cq.max_offset(), QueueOffset(20));

    // The cut is durable and the log continues from it.
    store
        .set_role(BrokerRole::AsyncMaster, Duration::from_secs(5))
        .unwrap();
    let r = store.put_message(&message("T", 0, b"after the cut")).wait();
    assert_eq!(r.append.unwrap().wrote_offset, offsets[20]);
    drop(store);
    let store = MessageStore::open(config(dir.path(), 64 * 1024)).unwrap();
    assert!(store.read_by_offset(offsets[20]).is_some());
    assert!(store.read_by_offset(offsets[21]).is_none());
}
