//! A bounded, stable-toolchain mutation fuzzer (no libFuzzer, no nightly): each target
//! starts from its checked-in corpus (`broker/tests/fuzz_corpus/<target>/`) plus built-in
//! seeds, mutates inputs at random for a time budget, and keeps inputs the target
//! accepted as new seeds (structure without coverage feedback). A panic is a finding:
//! the input is written to `$CARGO_TARGET_TMPDIR/fuzz-findings/<target>-<n>` and the test
//! fails naming it; a finding worth keeping goes into the corpus with its fix.
//!
//! `RMQ_FUZZ_SECONDS` (default 0.5) is the budget per target, `RMQ_FUZZ_SEED` fixes the
//! random sequence (printed on every run), `RMQ_FUZZ_SAVE_CORPUS=1` writes up to
//! [`CORPUS_KEEP`] accepted inputs of the run into the target's corpus directory.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Inputs kept in memory per target.
const POOL_MAX: usize = 512;
/// Inputs `RMQ_FUZZ_SAVE_CORPUS` adds per target.
const CORPUS_KEEP: usize = 24;

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Byte strings that matter to RocketMQ's formats: JSON tokens, extremes of the integer
/// types the decoders parse, the fastjson quirks.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"true",
    b"-",
    b"0",
    b"\\u0000",
    b"2147483647",
    b"-2147483648",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"99999999999999999999",
    b"1e308",
    b"\x01",
    b"\x02",
    b"=",
    b"\n",
    b"\\",
];

const INTS: &[i64] = &[
    0,
    1,
    -1,
    127,
    128,
    255,
    256,
    65_535,
    i32::MAX as i64,
    i32::MIN as i64,
    i64::MAX,
    i64::MIN,
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8], max_len: usize) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = [0, 0xFF, 0x7F, 0x80, b'0', b'9', b'"'][rng.below(7)];
            }
            2 => {
                let at = rng.below(len + 1);
                let t = TOKENS[rng.below(TOKENS.len())];
                input.splice(at..at, t.iter().copied());
            }
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                input.drain(a..b);
            }
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(32)).min(len);
                let copy = input[a..b].to_vec();
                let at = rng.below(len + 1);
                input.splice(at..at, copy);
            }
            5 if !other.is_empty() => {
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
            }
            6 if len >= 4 => {
                let at = rng.below(len - 3);
                let v = INTS[rng.below(INTS.len())];
                if rng.below(2) == 0 || len < at + 8 {
                    input[at..at + 4].copy_from_slice(&(v as i32).to_be_bytes());
                } else {
                    input[at..at + 8].copy_from_slice(&v.to_be_bytes());
                }
            }
            7 => {
                let at = rng.below(len + 1);
                let n = rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            _ => {
                // A digit run replaced by an extreme number (JSON numbers, header values).
                if let Some(i) = input.iter().position(|b| b.is_ascii_digit()) {
                    let end = input[i..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .map_or(input.len(), |n| i + n);
                    let v = INTS[rng.below(INTS.len())].to_string();
                    input.splice(i..end, v.bytes());
                }
            }
        }
    }
    input.truncate(max_len);
}

/// What one target run did.
pub struct Report {
    pub executions: u64,
    pub accepted: u64,
    pub pool: usize,
}

fn budget() -> Duration {
    let secs = std::env::var("RMQ_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(0.5);
    Duration::from_secs_f64(secs)
}

fn seed() -> u64 {
    std::env::var("RMQ_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// Runs `target` on the corpus, `seeds` and mutations of them for the budget. `target`
/// returns whether the input was accepted (decoded); accepted mutants join the pool.
pub fn run(
    name: &str,
    seeds: Vec<Vec<u8>>,
    max_len: usize,
    mut target: impl FnMut(&[u8]) -> bool,
) -> Report {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut pool: Vec<Vec<u8>> = corpus(name);
    pool.extend(seeds);
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    let mut report = Report {
        executions: 0,
        accepted: 0,
        pool: 0,
    };
    let mut exec = |input: &[u8], report: &mut Report| -> bool {
        report.executions += 1;
        match catch_unwind(AssertUnwindSafe(|| target(input))) {
            Ok(accepted) => accepted,
            Err(_) => {
                let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-findings");
                let _ = std::fs::create_dir_all(&dir);
                let path = dir.join(format!("{name}-{}", report.executions));
                let _ = std::fs::write(&path, input);
                panic!(
                    "fuzz target {name} panicked (seed {seed}); input saved to {}",
                    path.display()
                );
            }
        }
    };
    for input in pool.clone() {
        report.accepted += u64::from(exec(&input, &mut report));
    }
    let deadline = Instant::now() + budget();
    while Instant::now() < deadline {
        for _ in 0..64 {
            let base = rng.below(pool.len());
            let other = rng.below(pool.len());
            let mut input = pool[base].clone();
            let splice = pool[other].clone();
            mutate(&mut rng, &mut input, &splice, max_len);
            if exec(&input, &mut report) {
                report.accepted += 1;
                if pool.len() < POOL_MAX {
                    pool.push(input);
                } else {
                    let slot = rng.below(POOL_MAX);
                    pool[slot] = input;
                }
            }
        }
    }
    report.pool = pool.len();
    if std::env::var_os("RMQ_FUZZ_SAVE_CORPUS").is_some() {
        save_corpus(name, &pool);
    }
    eprintln!(
        "fuzz {name}: {} executions, {} accepted, pool {} (seed {seed})",
        report.executions, report.accepted, report.pool
    );
    report
}

fn corpus_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_corpus")
        .join(name)
}

/// Writes the newest accepted inputs (the pool's tail) as `<fnv64 hash>` files.
fn save_corpus(name: &str, pool: &[Vec<u8>]) {
    let dir = corpus_dir(name);
    let _ = std::fs::create_dir_all(&dir);
    for input in pool.iter().rev().take(CORPUS_KEEP) {
        let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
        });
        let _ = std::fs::write(dir.join(format!("{hash:016x}")), input);
    }
}
