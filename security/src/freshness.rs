//! Freshness of admin-secret signatures: a timestamp and a nonce inside the signed
//! fields, checked against a window and a bounded record of the nonces seen in it.
//!
//! ACL 1.0 signatures (`AclClientRPCHook`) cover the extFields and the body but nothing
//! that changes between two sends of one request, so 4.9 accepts a captured request
//! again verbatim. For the requests the admin secret protects (role changes,
//! registrations, config pushes) that is a replayed demotion or read-only switch. A signer
//! whose credentials are [`crate::sign::Credentials::stamped`] adds [`TIMESTAMP`] and [`NONCE`] before signing, so both are covered by
//! the signature; the server accepts a request only while its timestamp is within the
//! window of its own clock, and only once per nonce. A nonce is remembered until its
//! timestamp leaves the window, after which the timestamp alone refuses it.
//!
//! The ACL 1.0 signature does not cover the request code either, so a captured signed
//! UPDATE_AND_CREATE_TOPIC (whose `topic` field is all DELETE_TOPIC_IN_BROKER reads)
//! would pass as a deletion at any server whose record has not seen its nonce. The
//! stamp therefore also carries [`REQUEST_CODE`], and the server admits a request only
//! under the code that was signed.

use std::collections::{BTreeSet, HashSet};
use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use protocol::RemotingCommand;

/// Signed extField: the signer's clock, in milliseconds since the Unix epoch.
pub const TIMESTAMP: &str = "adminTimestamp";
/// Signed extField: unique per signed request.
pub const NONCE: &str = "adminNonce";
/// Signed extField: the request code the signer meant (the signature covers extFields
/// and body only).
pub const REQUEST_CODE: &str = "adminRequestCode";
/// Longest nonce accepted (the signer's are 32 hex digits).
pub const MAX_NONCE_LEN: usize = 64;

/// `adminSignatureWindowMillis` (not a RocketMQ key): how far a signed timestamp may be
/// from the server's clock, either way. Five minutes tolerates unsynchronised clocks
/// while keeping the nonce record small.
pub const DEFAULT_WINDOW_MILLIS: u64 = 300_000;
/// `adminReplayCacheMaxEntries` (not a RocketMQ key): most nonces remembered. Only
/// holders of the secret can add one, so when it is full the server refuses further
/// admin requests until old ones leave the window rather than forgetting a nonce.
pub const DEFAULT_MAX_ENTRIES: usize = 65_536;

/// Why a correctly signed request is still refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stale {
    #[error(
        "the signed request carries no {TIMESTAMP} and {NONCE} (a signer older than this server?)"
    )]
    Unstamped,
    #[error(
        "{TIMESTAMP} is {skew_millis} ms from this server's clock; adminSignatureWindowMillis allows {window_millis}"
    )]
    OutsideWindow {
        skew_millis: u64,
        window_millis: u64,
    },
    #[error("{REQUEST_CODE} {signed:?} was signed but the request code is {sent}")]
    WrongCode { signed: Option<String>, sent: i32 },
    #[error("this {NONCE} was already used: the request is a replay")]
    Replayed,
    #[error("{entries} admin requests inside the window; adminReplayCacheMaxEntries is full")]
    Full { entries: usize },
}

/// Which limit a refusal is counted under.
impl Stale {
    pub fn limit_key(&self) -> &'static str {
        match self {
            Stale::Full { .. } => "adminReplayCacheMaxEntries",
            Stale::OutsideWindow { .. } => "adminSignatureWindowMillis",
            Stale::Unstamped | Stale::WrongCode { .. } | Stale::Replayed => "adminSecret",
        }
    }
}

/// The server side: the window and the nonces seen in it. Shared by clones.
#[derive(Debug)]
pub struct ReplayGuard {
    window_millis: u64,
    max_entries: usize,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    /// (forget-after millis, nonce), oldest first.
    by_expiry: BTreeSet<(u64, String)>,
    nonces: HashSet<String>,
}

impl Seen {
    /// Drops the nonces whose timestamps have left the window.
    fn forget_before(&mut self, now: u64) {
        while self.by_expiry.first().is_some_and(|first| first.0 < now) {
            if let Some((_, old)) = self.by_expiry.pop_first() {
                self.nonces.remove(&old);
            }
        }
    }
}

impl Default for ReplayGuard {
    fn default() -> Self {
        Self::new(DEFAULT_WINDOW_MILLIS, DEFAULT_MAX_ENTRIES)
    }
}

impl ReplayGuard {
    pub fn new(window_millis: u64, max_entries: usize) -> Self {
        Self {
            window_millis,
            max_entries,
            seen: Mutex::new(Seen::default()),
        }
    }

    /// Nonces currently remembered (a gauge for the metrics).
    pub fn entries(&self) -> usize {
        self.seen.lock().nonces.len()
    }

    /// Admits `cmd` (whose signature the caller has verified) once: fresh timestamp,
    /// unseen nonce. Records the nonce when it admits.
    pub fn admit(&self, cmd: &RemotingCommand) -> Result<(), Stale> {
        self.admit_at(cmd, now_millis())
    }

    fn admit_at(&self, cmd: &RemotingCommand, now: u64) -> Result<(), Stale> {
        let (Some(ts), Some(nonce)) = (cmd.ext_fields.get(TIMESTAMP), cmd.ext_fields.get(NONCE))
        else {
            return Err(Stale::Unstamped);
        };
        let ts: u64 = ts.trim().parse().map_err(|_| Stale::Unstamped)?;
        if nonce.is_empty() || nonce.len() > MAX_NONCE_LEN {
            return Err(Stale::Unstamped);
        }
        let mut seen = self.seen.lock();
        seen.forget_before(now);
        let skew_millis = now.abs_diff(ts);
        if skew_millis > self.window_millis {
            return Err(Stale::OutsideWindow {
                skew_millis,
                window_millis: self.window_millis,
            });
        }
        let signed_code = cmd.ext_fields.get(REQUEST_CODE);
        if signed_code.and_then(|c| c.trim().parse::<i32>().ok()) != Some(cmd.code) {
            return Err(Stale::WrongCode {
                signed: signed_code.map(str::to_owned),
                sent: cmd.code,
            });
        }
        if seen.nonces.contains(nonce) {
            return Err(Stale::Replayed);
        }
        if seen.nonces.len() >= self.max_entries {
            return Err(Stale::Full {
                entries: seen.nonces.len(),
            });
        }
        // After ts + window the timestamp alone refuses the request.
        let forget_after = ts.saturating_add(self.window_millis);
        seen.nonces.insert(nonce.to_owned());
        seen.by_expiry.insert((forget_after, nonce.to_owned()));
        Ok(())
    }
}

/// Adds [`TIMESTAMP`], a fresh [`NONCE`] and the [`REQUEST_CODE`] to a request about
/// to be signed.
pub fn stamp(cmd: &mut RemotingCommand) {
    cmd.ext_fields
        .insert_static(REQUEST_CODE, cmd.code.to_string());
    cmd.ext_fields
        .insert_static(TIMESTAMP, now_millis().to_string());
    cmd.ext_fields.insert_static(NONCE, next_nonce());
}

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// 64 random bits per process (std's `RandomState` is seeded from the OS) and a
/// counter: unique across the pods of a cluster, whose processes often share a pid.
fn next_nonce() -> String {
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{seed:016x}{n:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped() -> RemotingCommand {
        let mut cmd = RemotingCommand::bare_request(26);
        stamp(&mut cmd);
        cmd
    }

    #[test]
    fn admits_each_nonce_once_within_the_window() {
        let guard = ReplayGuard::new(1_000, 16);
        let cmd = stamped();
        let ts: u64 = cmd.ext_fields.get(TIMESTAMP).unwrap().parse().unwrap();
        assert_eq!(guard.admit_at(&cmd, ts + 10), Ok(()));
        assert_eq!(guard.admit_at(&cmd, ts + 20), Err(Stale::Replayed));
        // Past the window the timestamp refuses it, and the nonce is forgotten.
        assert!(matches!(
            guard.admit_at(&cmd, ts + 1_002),
            Err(Stale::OutsideWindow { .. })
        ));
        assert_eq!(guard.entries(), 0);
        assert_ne!(stamped().ext_fields.get(NONCE), cmd.ext_fields.get(NONCE));
    }

    #[test]
    fn admits_a_request_only_under_the_code_that_was_signed() {
        let guard = ReplayGuard::new(1_000, 16);
        let mut cmd = RemotingCommand::bare_request(17);
        stamp(&mut cmd);
        let ts: u64 = cmd.ext_fields.get(TIMESTAMP).unwrap().parse().unwrap();
        let mut swapped = cmd.clone();
        swapped.code = 215;
        assert!(matches!(
            guard.admit_at(&swapped, ts),
            Err(Stale::WrongCode { sent: 215, .. })
        ));
        // The refused copy left no nonce behind: the original is still admitted once.
        assert_eq!(guard.entries(), 0);
        assert_eq!(guard.admit_at(&cmd, ts), Ok(()));
        let mut unbound = RemotingCommand::bare_request(17);
        stamp(&mut unbound);
        unbound.ext_fields.remove(REQUEST_CODE);
        assert!(matches!(
            guard.admit_at(&unbound, ts),
            Err(Stale::WrongCode { signed: None, .. })
        ));
    }

    #[test]
    fn refuses_unstamped_skewed_and_oversized_and_stays_bounded() {
        let guard = ReplayGuard::new(1_000, 2);
        assert_eq!(
            guard.admit(&RemotingCommand::bare_request(26)),
            Err(Stale::Unstamped)
        );
        let cmd = stamped();
        let ts: u64 = cmd.ext_fields.get(TIMESTAMP).unwrap().parse().unwrap();
        assert!(matches!(
            guard.admit_at(&cmd, ts - 5_000),
            Err(Stale::OutsideWindow {
                skew_millis: 5_000,
                ..
            })
        ));
        let mut long = stamped();
        long.ext_fields
            .insert_static(NONCE, "x".repeat(MAX_NONCE_LEN + 1));
        assert_eq!(guard.admit_at(&long, ts), Err(Stale::Unstamped));
        assert_eq!(guard.admit_at(&stamped(), ts), Ok(()));
        assert_eq!(guard.admit_at(&stamped(), ts), Ok(()));
        assert_eq!(
            guard.admit_at(&stamped(), ts),
            Err(Stale::Full { entries: 2 })
        );
        // Once the first two leave the window their nonces are forgotten.
        let mut later = stamped();
        later
            .ext_fields
            .insert_static(TIMESTAMP, (ts + 1_001).to_string());
        assert_eq!(guard.admit_at(&later, ts + 1_001), Ok(()));
        assert!(guard.entries() <= 2);
    }
}
