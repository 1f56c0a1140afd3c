//! Crash tests with a real child process (`examples/crash_writer.rs`): a writer under
//! SYNC_FLUSH is SIGKILLed at random moments, many times; after each restart every
//! acknowledged message must be readable with the right content, the CommitLog must be a
//! valid prefix, and appends resume.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Rng, seed, small_config, verify_store};
use store::{FlushDiskType, MessageStore};

const FILE_SIZE: u32 = 64 * 1024;

/// The example binary: `cargo test` builds examples into `<target>/<profile>/examples`;
/// when only this test target was built, build the example the same way.
fn crash_writer() -> PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_owned();
    let path = profile_dir.join("examples").join("crash_writer");
    BUILD.call_once(|| {
        if !path.exists() {
            let target_dir = profile_dir.parent().unwrap();
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "-p",
                    "rmq-store",
                    "--example",
                    "crash_writer",
                    "--target-dir",
                ])
                .arg(target_dir)
                .status()
                .unwrap();
            assert!(status.success(), "building the crash_writer example failed");
        }
    });
    assert!(path.exists(), "{} missing", path.display());
    path
}

struct Run {
    acked: Vec<(u64, i64)>,
    ready: bool,
}

fn run_and_kill(dir: &Path, run: u64, kill_after: Duration) -> Run {
    let mut child = Command::new(crash_writer())
        .args([
            dir.to_str().unwrap(),
            &FILE_SIZE.to_string(),
            &run.to_string(),
            "4",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Run {
            acked: Vec::new(),
            ready: false,
        };
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let mut parts = line.split_whitespace();
            match (parts.next(), parts.next(), parts.next()) {
                (Some("ACK"), Some(id), Some(offset)) => {
                    if let (Ok(id), Ok(offset)) = (id.parse(), offset.parse()) {
                        out.acked.push((id, offset));
                    }
                }
                (Some("READY"), _, _) => out.ready = true,
                _ => {}
            }
        }
        out
    });
    // Time itself: the kill lands at a seeded random moment of the writer's run.
    std::thread::sleep(kill_after);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap()
}

#[test]
fn sigkill_under_sync_flush_keeps_every_acknowledged_message() {
    let seed = seed();
    println!("STORE_TEST_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    // Whether a child opened the store since the last clean shutdown: one killed before
    // opening it (the 0–150 ms kills) leaves no abort file of its own.
    let mut opened = false;
    let rounds = 14;
    for run in 0..rounds {
        // Sometimes kill during startup/recovery, mostly while appending.
        let kill_after = Duration::from_millis(if rng.below(5) == 0 {
            rng.below(150)
        } else {
            150 + rng.below(500)
        });
        let out = run_and_kill(dir.path(), run, kill_after);
        println!(
            "run {run}: killed after {kill_after:?}, {} acks",
            out.acked.len()
        );
        opened |= out.ready;
        acked.extend(out.acked);
        // Every other round the next child recovers from the crash itself; otherwise
        // check here (this open is an abnormal recovery, its shutdown a clean one).
        if run % 2 == 1 || run + 1 == rounds {
            let store = MessageStore::open(small_config(
                dir.path(),
                FILE_SIZE,
                FlushDiskType::SyncFlush,
            ))
            .unwrap();
            assert!(
                !opened || !store.last_exit_ok(),
                "a killed writer leaves the abort file"
            );
            opened = false;
            let records = verify_store(&store, &acked);
            assert!(records >= acked.len());
            store.shutdown().unwrap();
        }
    }
    assert!(
        acked.len() > 200,
        "only {} messages acknowledged in {rounds} runs",
        acked.len()
    );
    let files = std::fs::read_dir(dir.path().join("commitlog"))
        .unwrap()
        .count();
    assert!(
        files > 3,
        "the writers crossed file boundaries ({files} files)"
    );
}

#[test]
fn second_process_on_the_same_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(small_config(
        dir.path(),
        FILE_SIZE,
        FlushDiskType::SyncFlush,
    ))
    .unwrap();
    let out = Command::new(crash_writer())
        .args([
            dir.path().to_str().unwrap(),
            &FILE_SIZE.to_string(),
            "0",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Lock failed"));
    // In-process too: the lock is per open, not per process.
    let again = MessageStore::open(small_config(
        dir.path(),
        FILE_SIZE,
        FlushDiskType::SyncFlush,
    ));
    assert!(matches!(again, Err(store::StoreError::LockFailed(_))));
    drop(store);
    MessageStore::open(small_config(
        dir.path(),
        FILE_SIZE,
        FlushDiskType::SyncFlush,
    ))
    .unwrap();
}
