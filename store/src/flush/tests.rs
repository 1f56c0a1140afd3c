use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::message::PhysicalOffset;

use super::FlushService;
use crate::checkpoint::StoreCheckpoint;
use crate::commitlog::CommitLog;
use crate::commitlog::tests_support::{config, message};
use crate::config::FlushDiskType;
use crate::fs::OsFs;

fn setup(
    kind: FlushDiskType,
    timeout_ms: u64,
) -> (
    tempfile::TempDir,
    Arc<CommitLog>,
    Arc<StoreCheckpoint>,
    FlushService,
) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 64 * 1024);
    c.flush_disk_type = kind;
    c.sync_flush_timeout = timeout_ms;
    c.flush_interval_commit_log = 5;
    c.flush_commit_log_thorough_interval = 20;
    let log = Arc::new(CommitLog::open(&c, Arc::new(OsFs)).unwrap());
    let cp = Arc::new(StoreCheckpoint::open(&c.checkpoint_path()).unwrap());
    let service = FlushService::start(&c, Arc::clone(&log), Arc::clone(&cp)).unwrap();
    (dir, log, cp, service)
}

#[test]
fn group_commit_completes_concurrent_waiters_once_durable() {
    let (_dir, log, cp, service) = setup(FlushDiskType::SyncFlush, 5_000);
    let service = Arc::new(service);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let log = Arc::clone(&log);
        let service = Arc::clone(&service);
        tasks.push(rt.spawn(async move {
            for i in 0..50 {
                let r = log.append(&message("T", w, &[i as u8; 700])).unwrap();
                let durable = service.wait_durable(r.end_offset()).unwrap().await;
                assert!(durable);
                assert!(log.flushed_offset() >= r.end_offset());
            }
        }));
    }
    for t in tasks {
        rt.block_on(t).unwrap();
    }
    assert!(log.mapped_files().file_count() > 5);
    assert_eq!(log.flushed_offset(), log.max_offset());
    assert!(cp.physic_msg_timestamp() > 0);
    // Every completed put was acknowledged by some group commit, never more than one
    // group per put.
    let groups = service.group_commits();
    assert!((1..=16 * 50).contains(&groups), "{groups} group commits");
    service.shutdown();
}

#[test]
fn group_commit_times_out_for_data_that_never_becomes_durable() {
    let (_dir, log, _cp, service) = setup(FlushDiskType::SyncFlush, 30);
    let end = log.append(&message("T", 0, b"x")).unwrap().end_offset();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = Instant::now();
    // An offset past everything appended cannot become durable.
    let beyond = PhysicalOffset(end.0 + 1);
    assert!(!rt.block_on(service.wait_durable(beyond).unwrap()));
    assert!(start.elapsed() >= Duration::from_millis(30));
    // Already durable offsets complete without queueing.
    assert!(rt.block_on(service.wait_durable(end).unwrap()));
    service.shutdown();
    assert!(
        !rt.block_on(service.wait_durable(beyond).unwrap()),
        "after shutdown nothing waits"
    );
}

#[test]
fn async_flush_catches_up_by_itself() {
    let (_dir, log, cp, service) = setup(FlushDiskType::AsyncFlush, 5_000);
    assert!(service.wait_durable(PhysicalOffset(0)).is_none());
    for i in 0..40 {
        log.append(&message("T", 0, &[i; 1000])).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.flushed_offset() < log.max_offset() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(log.flushed_offset(), log.max_offset());
    assert!(cp.physic_msg_timestamp() > 0);
    log.append(&message("T", 0, b"tail")).unwrap();
    service.shutdown();
    assert_eq!(
        log.flushed_offset(),
        log.max_offset(),
        "shutdown flushes everything"
    );
}
