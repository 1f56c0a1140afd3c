//! Child process of the crash tests: opens the store at `<dir>` under SYNC_FLUSH with
//! `<file_size>`-byte CommitLog files and appends from `<writers>` threads until killed,
//! printing `ACK <id> <physical offset>` after every acknowledged (durable) put.
//! Ids are `run << 40 | writer << 32 | n`; contents derive from the id.
//!
//! Exit codes: 3 when another process holds the store lock, 2 on other errors.
//!
//! `cargo run -p rmq-store --example crash_writer -- /tmp/s 65536 0 4`

#[allow(clippy::unwrap_used)]
#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::sync::Arc;

use store::{FlushDiskType, MessageStore, PutMessageStatus, StoreError};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, file_size, run, writers] = args.as_slice() else {
        eprintln!("usage: crash_writer <dir> <file_size> <run> <writers>");
        std::process::exit(2);
    };
    let (Ok(file_size), Ok(run), Ok(writers)) = (
        file_size.parse(),
        run.parse::<u64>(),
        writers.parse::<u64>(),
    ) else {
        eprintln!("bad numeric argument");
        std::process::exit(2);
    };
    let config = common::small_config(dir.as_ref(), file_size, FlushDiskType::SyncFlush);
    let store = match MessageStore::open(config) {
        Ok(store) => Arc::new(store),
        Err(e @ StoreError::LockFailed(_)) => {
            eprintln!("{e}");
            std::process::exit(3);
        }
        Err(e) => {
            eprintln!("open failed: {e}");
            std::process::exit(2);
        }
    };
    println!("READY {}", store.max_phy_offset());
    let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let store = Arc::clone(&store);
            let out = Arc::clone(&out);
            std::thread::spawn(move || {
                for n in 0.. {
                    let id = run << 40 | w << 32 | n;
                    let result = store.put_message(&common::message_for(id)).wait();
                    match (result.status, result.append) {
                        (PutMessageStatus::PutOk, Some(append)) => {
                            let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
                            let _ = writeln!(out, "ACK {id} {}", append.wrote_offset);
                            let _ = out.flush();
                        }
                        (status, _) => {
                            eprintln!("put {id} failed: {}", status.as_str());
                            std::process::exit(2);
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}
