//! The shared admin secret (`adminSecret`, not a RocketMQ key): what authenticates the
//! requests that change who is master — role changes, broker (un)registration, config
//! pushes — when no ACL is on. 4.9 has nothing of the kind: without ACL anyone who
//! reaches the port may demote a master or register a fake one.
//!
//! The secret is presented as an ACL 1.0 signature ([`crate::sign`]): `AccessKey` is
//! the fixed name [`ADMIN_ACCESS_KEY`] and `Signature` is HmacSHA1 over the request
//! with the secret as key, so any client that signs ACL requests can sign these.
//!
//! Replays: the signer stamps a timestamp and a nonce into the signed fields and the
//! server admits each nonce once within a window ([`crate::freshness`]).
//!
//! Rotation: the configured value is a comma-separated list. A server accepts a
//! signature made with any of them; a signer uses the first. Rolling out a new secret is
//! `old,new` everywhere (servers accept both, signers still use `old`), then `new,old`
//! (signers switch), then `new` alone; no request is refused at any step.

use std::fmt;
use std::sync::Arc;

use protocol::RemotingCommand;

use crate::freshness::{ReplayGuard, Stale};
use crate::sign::{self, Credentials, SigningKey};

/// The access key an admin-secret signature carries. With ACL off, servers check the
/// secret for it; with ACL on, the ACL file alone decides (this name is then just an
/// account name, unknown unless the file lists it).
pub const ADMIN_ACCESS_KEY: &str = "rmq-admin";

/// Most secrets one `adminSecret` list may hold (a rollout needs two).
pub const MAX_SECRETS: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminSecretError {
    #[error("adminSecret lists {0} secrets; at most {MAX_SECRETS} are accepted")]
    TooMany(usize),
    #[error("adminSecret holds a secret shorter than {MIN_LEN} characters")]
    TooShort,
}

/// Shortest secret accepted: a guessable secret is no protection.
pub const MIN_LEN: usize = 16;

/// The accepted admin secrets, first one used to sign. Empty: open mode (nothing is
/// checked), what a local broker without the key runs in.
#[derive(Clone, Default)]
pub struct AdminSecrets {
    /// (secret text, its keyed HMAC), in configured order.
    keys: Vec<(sign::Secret, SigningKey)>,
    /// Nonces admitted within the window; shared by clones.
    guard: Arc<ReplayGuard>,
}

/// Why [`AdminSecrets::check`] refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("not signed with the adminSecret (access key {ADMIN_ACCESS_KEY})")]
    Unsigned,
    #[error(transparent)]
    Stale(#[from] Stale),
}

impl Refusal {
    /// The config key a refusal is counted under.
    pub fn limit_key(&self) -> &'static str {
        match self {
            Refusal::Unsigned => "adminSecret",
            Refusal::Stale(s) => s.limit_key(),
        }
    }
}

impl AdminSecrets {
    /// Parses a comma-separated list; blank entries are ignored, so an empty value is
    /// open mode.
    pub fn parse(text: &str) -> Result<Self, AdminSecretError> {
        let secrets: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if secrets.len() > MAX_SECRETS {
            return Err(AdminSecretError::TooMany(secrets.len()));
        }
        if secrets.iter().any(|s| s.len() < MIN_LEN) {
            return Err(AdminSecretError::TooShort);
        }
        Ok(Self {
            keys: secrets
                .into_iter()
                .map(|s| (sign::Secret::new(s), SigningKey::new(s)))
                .collect(),
            guard: Arc::default(),
        })
    }

    /// These secrets with a replay window of `window_millis` remembering at most
    /// `max_entries` nonces (`adminSignatureWindowMillis`, `adminReplayCacheMaxEntries`).
    pub fn with_replay_window(mut self, window_millis: u64, max_entries: usize) -> Self {
        self.guard = Arc::new(ReplayGuard::new(window_millis, max_entries));
        self
    }

    /// These secrets keeping `other`'s record of admitted nonces: a secret rotated at
    /// runtime must not re-admit what was seen under the old list.
    pub fn with_guard_of(mut self, other: &AdminSecrets) -> Self {
        self.guard = Arc::clone(&other.guard);
        self
    }

    /// Nonces remembered now (for a gauge).
    pub fn replay_entries(&self) -> usize {
        self.guard.entries()
    }

    /// Whether no secret is configured (open mode).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether `cmd` carries `AccessKey` = [`ADMIN_ACCESS_KEY`] and a signature made with
    /// one of the secrets. Always false in open mode (callers check [`Self::is_empty`]).
    /// Says nothing about freshness: servers use [`Self::check`].
    pub fn verify(&self, cmd: &RemotingCommand) -> bool {
        if cmd.ext_fields.get(sign::ACCESS_KEY) != Some(ADMIN_ACCESS_KEY) {
            return false;
        }
        self.keys.iter().any(|(_, key)| key.verify(cmd))
    }

    /// What a server admits: a valid signature ([`Self::verify`]) on a request stamped
    /// within the window with a nonce not seen before, which is then remembered. Always
    /// refused in open mode (callers check [`Self::is_empty`]).
    pub fn check(&self, cmd: &RemotingCommand) -> Result<(), Refusal> {
        if !self.verify(cmd) {
            return Err(Refusal::Unsigned);
        }
        Ok(self.guard.admit(cmd)?)
    }

    /// What a signer signs with: the first secret under [`ADMIN_ACCESS_KEY`], stamping
    /// each request with a timestamp and a nonce.
    pub fn credentials(&self) -> Option<Credentials> {
        self.keys
            .first()
            .map(|(s, _)| Credentials::new(ADMIN_ACCESS_KEY, s.expose()).stamped())
    }
}

/// Credentials signing with the first secret of `text` (a comma-separated list), for
/// clients given the list as it is configured (a flag, an environment variable, a
/// Kubernetes Secret); `None` when it holds none.
pub fn signer(text: &str) -> Result<Option<Credentials>, AdminSecretError> {
    Ok(AdminSecrets::parse(text)?.credentials())
}

impl fmt::Debug for AdminSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AdminSecrets(<{} redacted>)", self.keys.len())
    }
}

impl PartialEq for AdminSecrets {
    fn eq(&self, other: &Self) -> bool {
        self.keys.len() == other.keys.len()
            && self
                .keys
                .iter()
                .zip(&other.keys)
                .all(|((a, _), (b, _))| a == b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::sign_request;

    const OLD: &str = "old-secret-0123456789";
    const NEW: &str = "new-secret-0123456789";

    fn role_change() -> RemotingCommand {
        let mut cmd = RemotingCommand::bare_request(1008);
        cmd.ext_fields.insert("masterBrokerId", "1");
        cmd.ext_fields.insert("masterEpoch", "7");
        cmd
    }

    #[test]
    fn any_listed_secret_verifies_and_the_first_signs() {
        let both = AdminSecrets::parse(&format!(" {OLD} , {NEW} ")).unwrap();
        assert_eq!(both.len(), 2);
        for secret in [OLD, NEW] {
            let mut cmd = role_change();
            sign_request(&mut cmd, &Credentials::new(ADMIN_ACCESS_KEY, secret));
            assert!(both.verify(&cmd), "{secret}");
        }
        let creds = both.credentials().unwrap();
        assert_eq!(creds.access_key, ADMIN_ACCESS_KEY);
        assert_eq!(creds.secret_key().expose(), OLD);
        let only_new = AdminSecrets::parse(NEW).unwrap();
        let mut old_signed = role_change();
        sign_request(&mut old_signed, &creds);
        assert!(!only_new.verify(&old_signed));
    }

    #[test]
    fn a_signed_request_is_admitted_once() {
        let secrets = AdminSecrets::parse(OLD).unwrap();
        let mut cmd = role_change();
        sign_request(&mut cmd, &secrets.credentials().unwrap());
        assert_eq!(secrets.check(&cmd), Ok(()));
        assert_eq!(
            secrets.clone().check(&cmd),
            Err(Refusal::Stale(Stale::Replayed))
        );
        // A signature without the stamp (a 4.9-style signer) verifies but is not admitted.
        let mut plain = role_change();
        sign_request(&mut plain, &Credentials::new(ADMIN_ACCESS_KEY, OLD));
        assert!(secrets.verify(&plain));
        assert_eq!(secrets.check(&plain), Err(Refusal::Stale(Stale::Unstamped)));
        // Changing the stamp breaks the signature.
        let mut moved = cmd.clone();
        moved
            .ext_fields
            .insert_static(crate::freshness::NONCE, "another-nonce");
        assert_eq!(secrets.check(&moved), Err(Refusal::Unsigned));
    }

    #[test]
    fn unsigned_wrong_name_or_tampered_requests_fail() {
        let secrets = AdminSecrets::parse(OLD).unwrap();
        assert!(!secrets.verify(&role_change()));
        let mut other_name = role_change();
        sign_request(&mut other_name, &Credentials::new("someone", OLD));
        assert!(!secrets.verify(&other_name));
        let mut tampered = role_change();
        sign_request(&mut tampered, &Credentials::new(ADMIN_ACCESS_KEY, OLD));
        tampered.ext_fields.insert("masterBrokerId", "2");
        assert!(!secrets.verify(&tampered));
    }

    #[test]
    fn open_mode_limits_and_redaction() {
        assert!(AdminSecrets::parse("").unwrap().is_empty());
        assert!(AdminSecrets::parse(" , ").unwrap().credentials().is_none());
        assert_eq!(
            AdminSecrets::parse("short").unwrap_err(),
            AdminSecretError::TooShort
        );
        let many = [OLD; 5].join(",");
        assert_eq!(
            AdminSecrets::parse(&many).unwrap_err(),
            AdminSecretError::TooMany(5)
        );
        let printed = format!("{:?}", AdminSecrets::parse(OLD).unwrap());
        assert!(!printed.contains("secret-0123"), "{printed}");
    }
}
