use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::Config;
use crate::services::ha::HaSettings;

fn ha_in(dir: &Path, conf: &str) -> Arc<Ha> {
    ha_and_store_in(dir, conf).0
}

fn ha_and_store_in(dir: &Path, conf: &str) -> (Arc<Ha>, Arc<store::MessageStore>) {
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog=8388608\nhaListenPort=0\n{conf}",
        dir.display()
    );
    let config = Config::from_properties(&text).unwrap();
    let store = Arc::new(store::MessageStore::open(config.store.clone()).unwrap());
    let ha = Ha::new(
        HaSettings::from_config(&config),
        Arc::clone(&store) as _,
        None,
    );
    (ha, store)
}

#[tokio::test]
async fn the_operators_fence_with_no_master_refuses_writes_and_follows_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let ha = ha_in(dir.path(), "brokerRole=SYNC_MASTER\nbrokerId=0\n");
    assert!(!ha.refuses_writes());
    // NOTIFY_BROKER_ROLE_CHANGED with masterBrokerId -1 and an empty masterAddress.
    assert!(!ha.names_me(-1));
    ha.become_slave(3, Some(String::new()), Some(" ".to_owned()))
        .unwrap();
    assert!(ha.refuses_writes());
    assert_eq!((ha.role(), ha.epoch()), (BrokerRole::Slave, 3));
    assert_eq!(
        ha.target(),
        Target::default(),
        "an empty address is no master"
    );
    assert!(matches!(
        ha.become_slave(2, None, None),
        Err(RoleChangeError::StaleEpoch { current: 3, got: 2 })
    ));
    // Fenced, it registers as brokerId 1: "follow brokerId 0" is not its promotion,
    // "promote brokerId 1" (what its HA status reports) is.
    assert_eq!(ha.registered_broker_id(), 1);
    assert!(!ha.names_me(0));
    assert!(ha.names_me(1));
    ha.become_master(4).await.unwrap();
    assert!(!ha.refuses_writes());
    assert_eq!(ha.role(), BrokerRole::SyncMaster);
    assert_eq!((ha.epoch(), ha.store.epochs().current_epoch()), (4, 4));
    assert!(ha.names_me(0));
}

#[tokio::test]
async fn a_promoted_slave_stops_following_before_it_takes_writes() {
    let dir = tempfile::tempdir().unwrap();
    let ha = ha_in(dir.path(), "brokerRole=SLAVE\nbrokerId=1\n");
    ha.become_slave(1, Some("127.0.0.1:1".into()), Some("127.0.0.1:2".into()))
        .unwrap();
    let mut changes = ha.subscribe_changes();
    changes.borrow_and_update();
    // A replica append is in progress.
    let gate = ha.replica_gate.lock().await;
    let promotion = tokio::spawn({
        let ha = Arc::clone(&ha);
        async move { ha.become_master(2).await }
    });
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .unwrap()
        .unwrap();
    // The slave loop is told to stop (no master to follow) while writes stay refused and
    // the epoch waits for the append to finish.
    assert_eq!(ha.target(), Target::default());
    // Time itself: that the promotion does NOT go on while the gate is held. A promotion
    // that skipped the gate would be in its blocking store work, which this outlasts.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(ha.refuses_writes());
    assert!(ha.store.epochs().current_epoch() < 2);
    drop(gate);
    promotion.await.unwrap().unwrap();
    assert!(!ha.refuses_writes());
    assert_eq!(ha.store.epochs().current_epoch(), 2);
}

#[tokio::test]
async fn a_demoted_master_drops_its_slave_connections_once_it_follows_another() {
    let dir = tempfile::tempdir().unwrap();
    let ha = ha_in(dir.path(), "brokerRole=SYNC_MASTER\nbrokerId=0\n");
    ha.become_master(1).await.unwrap();
    let watcher = tokio::spawn({
        let ha = Arc::clone(&ha);
        async move { crate::services::ha::master::superseded(&ha, 1).await }
    });
    // Time itself: the watcher does NOT finish within a window (nothing to wait for).
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!watcher.is_finished(), "still master of epoch 1");
    // Fenced with no successor: the stream goes on so a switchover target catches up.
    ha.become_slave(2, None, None).unwrap();
    // Time itself, as above.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!watcher.is_finished(), "fenced, not yet following anyone");
    ha.become_slave(2, Some("127.0.0.1:1".into()), None)
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), watcher)
        .await
        .expect("connections close once it follows another master")
        .unwrap();
    // Promoted again at a newer epoch: connections from before are dropped too.
    ha.become_master(3).await.unwrap();
    let stale = tokio::spawn({
        let ha = Arc::clone(&ha);
        async move { crate::services::ha::master::superseded(&ha, 2).await }
    });
    tokio::time::timeout(Duration::from_secs(5), stale)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_second_master_at_the_same_epoch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ha = ha_in(dir.path(), "brokerRole=SLAVE\nbrokerId=1\n");
    // Operator A promoted another broker at epoch 2 and told this one to follow it.
    ha.become_slave(2, Some("10.0.0.1:10911".into()), None)
        .unwrap();
    // Operator B, stale, promotes this broker at the same epoch: refused.
    assert!(matches!(
        ha.become_master(2).await,
        Err(RoleChangeError::EpochTaken { epoch: 2, .. })
    ));
    assert!(matches!(
        ha.become_slave(2, Some("10.0.0.2:10911".into()), None),
        Err(RoleChangeError::EpochTaken { epoch: 2, .. })
    ));
    assert_eq!(ha.role(), BrokerRole::Slave);
    // Replays of the same order, and a newer epoch, are fine.
    ha.become_slave(2, Some("10.0.0.1:10911".into()), None)
        .unwrap();
    ha.become_master(3).await.unwrap();
    // Once master at 3, nobody else is named master at 3.
    assert!(
        ha.become_slave(3, Some("10.0.0.1:10911".into()), None)
            .is_err()
    );
}

/// A master restarted in the same epoch could write different bytes at offsets its slave
/// already held under that epoch. Every start as master now records
/// a new epoch at the recovered CommitLog end.
#[tokio::test]
async fn every_start_as_master_begins_a_new_epoch_at_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let (ha, store) = ha_and_store_in(dir.path(), "brokerRole=SYNC_MASTER\nbrokerId=0\n");
    ha.begin_term().unwrap();
    assert_eq!(ha.epoch(), 1);
    let m = crate::test_fixture::message("T", 0, "x", String::new());
    store.put_message(&m).await;
    let end = ha.store.max_phy_offset();
    // The same store under a new process (the old one lost power).
    let again = Ha::new(ha.settings.clone(), Arc::clone(&ha.store), None);
    again.begin_term().unwrap();
    assert_eq!(again.epoch(), 2);
    let entries = again.store.epochs().entries();
    assert_eq!(
        (
            entries.last().unwrap().epoch,
            entries.last().unwrap().start_offset
        ),
        (2, end)
    );
    // A slave's start is no term of its own.
    let slave_dir = tempfile::tempdir().unwrap();
    let slave = ha_in(slave_dir.path(), "brokerRole=SLAVE\nbrokerId=1\n");
    slave.begin_term().unwrap();
    assert_eq!(slave.store.epochs().current_epoch(), 0);
}

/// A slave that adopted its master's epoch history (no role change involved) reports that
/// epoch, and refuses to be promoted at it: the epoch was the old master's. Before, it
/// reported 0, the operator elected at 1, and the new master continued the old master's
/// epoch 1, so the old master, holding an unacknowledged tail of epoch 1, could never
/// rejoin (the failover suite's group stuck without a slave).
#[tokio::test]
async fn a_promotion_never_continues_an_epoch_another_master_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let ha = ha_in(dir.path(), "brokerRole=SLAVE\nbrokerId=1\n");
    // What replication does: adopt the master's history.
    ha.store
        .epochs()
        .replace(vec![store::ha::EpochEntry {
            epoch: 1,
            start_offset: protocol::message::PhysicalOffset(0),
        }])
        .unwrap();
    assert_eq!(ha.epoch(), 1, "the held history counts as seen");
    assert!(matches!(
        ha.become_master(1).await,
        Err(RoleChangeError::EpochWritten { epoch: 1 })
    ));
    assert_eq!(ha.role(), BrokerRole::Slave);
    ha.become_master(2).await.unwrap();
    // Replaying the same promotion (an operator retrying after a crash) is harmless.
    ha.become_master(2).await.unwrap();
    assert_eq!(ha.store.epochs().current_epoch(), 2);
}

/// The term a master began at start-up is its own: an operator naming it master at that
/// epoch (what its HA status reports) continues its writes.
#[tokio::test]
async fn a_started_master_may_be_named_master_of_its_own_term() {
    let dir = tempfile::tempdir().unwrap();
    let ha = ha_in(dir.path(), "brokerRole=SYNC_MASTER\nbrokerId=0\n");
    ha.begin_term().unwrap();
    ha.become_master(1).await.unwrap();
    assert_eq!(ha.store.epochs().current_epoch(), 1);
}
