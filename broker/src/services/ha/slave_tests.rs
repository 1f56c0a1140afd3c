//! The cut of a former master's divergent tail: serialized, complete even when the follow
//! attempt that started it is abandoned, and never applied to a broker that was promoted
//! in the meantime. (Found by the partition test: a registration answer restarted the
//! follow loop mid-truncation and a second truncation overlapped the first, wedging the
//! rejoining broker.)

use std::sync::Arc;

use protocol::message::PhysicalOffset;
use store::ha::EpochEntry;

use super::{SlaveError, cut_to_master};
use crate::config::Config;
use crate::services::ha::{Ha, HaSettings, Target};
use crate::test_fixture::message;
use store::{MessageStore, MessageStoreApi, PutMessageStatus};

/// The master the former master is told to follow (never contacted by these tests).
const MASTER: &str = "127.0.0.1:1";

/// A former master of epochs 1 and 2 holding 20 messages, now a slave of epoch 3; the
/// new master's log shares epoch 1 only, up to the 10th message.
#[allow(clippy::type_complexity)]
async fn former_master(
    dir: &std::path::Path,
) -> (Arc<Ha>, Vec<EpochEntry>, PhysicalOffset, Arc<MessageStore>) {
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog=8388608\nbrokerRole=SYNC_MASTER\n",
        dir.display()
    );
    let config = Config::from_properties(&text).unwrap();
    let store = Arc::new(store::MessageStore::open(config.store.clone()).unwrap());
    store.epochs().begin(1, PhysicalOffset(0)).unwrap();
    let mut offsets = Vec::new();
    for i in 0..20 {
        if i == 10 {
            store.epochs().begin(2, store.max_phy_offset()).unwrap();
        }
        let r = store
            .put_message(&message("T", 0, &format!("m{i}"), String::new()))
            .await;
        assert_eq!(r.status, PutMessageStatus::PutOk);
        offsets.push(r.append.unwrap().wrote_offset);
    }
    let ha = Ha::new(
        HaSettings::from_config(&config),
        Arc::clone(&store) as _,
        None,
    );
    ha.become_slave(3, Some(MASTER.into()), None).unwrap();
    let remote = vec![
        EpochEntry {
            epoch: 1,
            start_offset: PhysicalOffset(0),
        },
        EpochEntry {
            epoch: 3,
            start_offset: offsets[10],
        },
    ];
    (ha, remote, offsets[10], store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_cuts_run_one_after_the_other_and_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (ha, remote, common, store) = former_master(dir.path()).await;
    let remote_end = PhysicalOffset(common.0 + 4096);
    let cuts: Vec<_> = (0..2)
        .map(|_| {
            let (ha, remote) = (Arc::clone(&ha), remote.clone());
            let target = ha.target();
            tokio::task::spawn_blocking(move || cut_to_master(&ha, &target, remote, remote_end))
        })
        .collect();
    for cut in cuts {
        tokio::time::timeout(std::time::Duration::from_secs(20), cut)
            .await
            .expect("a cut never finished")
            .unwrap()
            .unwrap();
    }
    assert_eq!(ha.store.max_phy_offset(), common);
    assert_eq!(ha.store.epochs().entries(), remote);
    assert_eq!(
        ha.counters
            .truncations
            .load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the second cut found nothing left to cut"
    );
    assert_eq!(
        MessageStoreApi::<()>::max_offset_in_queue(&*store, "T", 0).0,
        10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_started_before_a_promotion_leaves_the_new_master_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (ha, remote, _, _) = former_master(dir.path()).await;
    let end = ha.store.max_phy_offset();
    let target = ha.target();
    ha.become_master(4).await.unwrap();
    let h = Arc::clone(&ha);
    let cut =
        tokio::task::spawn_blocking(move || cut_to_master(&h, &target, remote, PhysicalOffset(0)))
            .await
            .unwrap();
    assert!(matches!(cut, Err(SlaveError::Superseded)), "{cut:?}");
    assert_eq!(ha.store.max_phy_offset(), end);
    assert_eq!(ha.store.epochs().current_epoch(), 4);
}

/// A peer answering with an empty history (or any master whose
/// history would cut below the confirm offset) used to get the log truncated at once. Such
/// a cut waits for the operator's one-shot permission naming the offset it keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cuts_below_the_confirm_offset_or_to_zero_wait_for_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let (ha, remote, common, _) = former_master(dir.path()).await;
    let end = ha.store.max_phy_offset();
    let target = ha.target();
    let cut = |remote: Vec<EpochEntry>, remote_end: PhysicalOffset| {
        let (ha, target) = (Arc::clone(&ha), target.clone());
        tokio::task::spawn_blocking(move || cut_to_master(&ha, &target, remote, remote_end))
    };
    // An empty history: nothing in common, a cut to zero.
    let r = cut(Vec::new(), PhysicalOffset(0)).await.unwrap();
    assert!(matches!(r, Err(SlaveError::UnsafeTruncation(_))), "{r:?}");
    assert_eq!(ha.store.max_phy_offset(), end, "nothing was cut");
    // A replica acknowledged beyond the common point while this broker was master.
    ha.store
        .confirm_offset()
        .set(PhysicalOffset(common.0 + 100));
    let remote_end = PhysicalOffset(common.0 + 4096);
    let r = cut(remote.clone(), remote_end).await.unwrap();
    match r {
        Err(SlaveError::UnsafeTruncation(refusal)) => {
            assert_eq!((refusal.keep, refusal.end), (common, end));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ha.store.max_phy_offset(), end);
    let status = ha.runtime_info();
    assert!(
        status
            .truncation_refused
            .as_deref()
            .is_some_and(|t| t.contains("allowHaTruncation")),
        "{status:?}"
    );
    assert_eq!(
        ha.counters
            .refused_truncations
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // A permission for another offset changes nothing; the right one is used up.
    let allow = crate::services::ha::truncation::allow_path(&*ha.store);
    std::fs::write(&allow, "12").unwrap();
    assert!(cut(remote.clone(), remote_end).await.unwrap().is_err());
    std::fs::write(&allow, format!("{}\n", common.0)).unwrap();
    cut(remote.clone(), remote_end).await.unwrap().unwrap();
    assert_eq!(ha.store.max_phy_offset(), common);
    assert!(!allow.exists());
    assert_eq!(ha.runtime_info().truncation_refused, None);
}

#[tokio::test]
async fn a_master_named_by_a_role_change_is_not_replaced_by_a_nameserver_hint() {
    let dir = tempfile::tempdir().unwrap();
    let (ha, _, _, _) = former_master(dir.path()).await;
    let mut changes = ha.subscribe_changes();
    changes.borrow_and_update();
    ha.on_registration_answer(Some("10.9.9.9:10912".into()), Some("10.9.9.9:10911".into()));
    assert_eq!(
        ha.target(),
        Target {
            master_addr: Some("127.0.0.1:1".into()),
            master_ha_addr: None,
        }
    );
    assert!(!changes.has_changed().unwrap(), "the follow loop restarted");

    // Configured with the master's HA address only: the answer supplies its remoting one.
    let configured = Ha::new(
        ha.settings.clone(),
        Arc::clone(&ha.store),
        Some("127.0.0.1:2".into()),
    );
    configured.on_registration_answer(Some("10.9.9.9:10912".into()), Some("10.9.9.9:10911".into()));
    assert_eq!(
        configured.target(),
        Target {
            master_addr: Some("10.9.9.9:10911".into()),
            master_ha_addr: Some("127.0.0.1:2".into()),
        }
    );
}
