use protocol::message::PhysicalOffset;

use super::{HistoryProof, ProofError};
use crate::MessageStore;
use crate::commitlog::tests_support::{config, message};
use crate::config::BrokerRole;
use crate::put_result::PutMessageStatus;

const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn open(dir: &std::path::Path) -> MessageStore {
    MessageStore::open(config(dir, 64 * 1024)).unwrap()
}

fn put(store: &MessageStore, body: &str) -> PhysicalOffset {
    let r = store.put_message(&message("T", 0, body.as_bytes())).wait();
    assert_eq!(r.status, PutMessageStatus::PutOk);
    store.max_phy_offset()
}

/// Copies `from`'s CommitLog bytes `[at, to)` into `to_store` as a slave would.
fn replicate(from: &MessageStore, to_store: &MessageStore, to: PhysicalOffset) {
    let mut writer = to_store.replica_writer();
    let mut at = writer.written_offset();
    while at < to {
        let window = from.commit_log().read_to_file_end(at).unwrap();
        let n = window.len().min((to.0 - at.0) as usize);
        writer.accept(at, &window[..n]).unwrap();
        at = PhysicalOffset(at.0 + n as i64);
    }
}

fn slave(dir: &std::path::Path) -> MessageStore {
    let s = open(dir);
    s.set_role(BrokerRole::Slave, WAIT).unwrap();
    s
}

#[test]
fn a_true_prefix_is_accepted_at_every_record_boundary_and_across_files() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(md.path());
    master.epochs().begin(1, PhysicalOffset(0)).unwrap();
    let ends: Vec<_> = (0..600)
        .map(|i| put(&master, &format!("m{i:04}-{}", "x".repeat(200 + i % 300))))
        .collect();
    assert!(master.commit_log().mapped_files().file_count() > 2);
    let s = slave(sd.path());
    s.epochs().replace(master.epochs().entries()).unwrap();
    assert_eq!(master.check_history_proof(&s.history_proof()), Ok(()));
    for end in ends.iter().step_by(37) {
        replicate(&master, &s, *end);
        let proof = s.history_proof();
        assert_eq!(proof.end, *end);
        assert_eq!(master.check_history_proof(&proof), Ok(()), "end {end}");
    }
}

/// The master streamed up to X, lost its unflushed tail, recovered to
/// F < X and wrote new records past X in the same epoch. The slave's report X used to
/// count as an ack of the master's different bytes.
#[test]
fn a_slave_holding_bytes_the_restarted_master_rewrote_is_refused() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let before_crash = open(dirs[0].path());
    let ends: Vec<_> = (0..20)
        .map(|i| put(&before_crash, &format!("old-{i}")))
        .collect();
    let s = slave(dirs[1].path());
    replicate(&before_crash, &s, ends[19]);
    // The restarted master: the first 10 records survived, then new writes past X.
    let after = open(dirs[2].path());
    after.set_role(BrokerRole::Slave, WAIT).unwrap();
    replicate(&before_crash, &after, ends[9]);
    after.set_role(BrokerRole::AsyncMaster, WAIT).unwrap();
    for i in 0..30 {
        put(&after, &format!("new-{i}-longer"));
    }
    assert!(after.max_phy_offset() > ends[19]);
    let proof = s.history_proof();
    assert_eq!(proof.end, ends[19]);
    assert!(
        matches!(
            after.check_history_proof(&proof),
            Err(ProofError::BytesDiffer { .. } | ProofError::NotBoundary { .. })
        ),
        "{:?}",
        after.check_history_proof(&proof)
    );
    // With the new term recorded (what a restarted master does now) the epoch alone
    // shows the divergence.
    after.epochs().begin(1, ends[9]).unwrap();
    assert!(matches!(
        after.check_history_proof(&proof),
        Err(ProofError::EpochMismatch { epoch: 0, .. })
    ));
    // The slave's share up to F is still proven.
    let ok = HistoryProof {
        end: ends[9],
        epoch: proof.epoch,
        tail: before_crash
            .commit_log()
            .read(PhysicalOffset(ends[8].0), (ends[9].0 - ends[8].0) as usize)
            .unwrap(),
    };
    assert_eq!(after.check_history_proof(&ok), Ok(()));
}

#[test]
fn ends_beyond_the_log_or_inside_a_record_are_refused() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(md.path());
    let ends: Vec<_> = (0..5).map(|i| put(&master, &format!("m{i}"))).collect();
    let s = slave(sd.path());
    replicate(&master, &s, ends[4]);
    let mut proof = s.history_proof();
    proof.end = PhysicalOffset(ends[4].0 + 10);
    assert!(matches!(
        master.check_history_proof(&proof),
        Err(ProofError::Beyond { .. })
    ));
    // The same bytes claimed as ending mid-record.
    let mid = PhysicalOffset(ends[2].0 + 7);
    let forged = HistoryProof {
        end: mid,
        epoch: proof.epoch,
        tail: master
            .commit_log()
            .read(PhysicalOffset(ends[1].0), (mid.0 - ends[1].0) as usize)
            .unwrap(),
    };
    assert!(matches!(
        master.check_history_proof(&forged),
        Err(ProofError::NotBoundary { .. })
    ));
}
