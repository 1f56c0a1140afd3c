//! The compiled ACL and the decision for one request (4.9 `PlainPermissionManager.validate`
//! and `PlainAccessValidator`, with the deviations listed in
//! `docs/security.md`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use protocol::RemotingCommand;

use super::addr::{AddrPattern, BadPattern};
use super::file::{AccountEntry, FileDataVersion, PlainAclFile};
use super::perm::Perm;
use crate::sign::{self, SigningKey};

/// `%RETRY%<group>` / `%DLQ%<group>` topics are resources of the group.
pub const RETRY_PREFIX: &str = "%RETRY%";
pub const DLQ_PREFIX: &str = "%DLQ%";
/// Trace producers publish here without a permission entry (4.9, PR #3943).
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// 4.9: access and secret keys must be longer than 6 characters.
const MIN_KEY_LEN: usize = 7;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error(
        "account {access_key:?}: accessKey and secretKey are required and must be at least 7 characters long"
    )]
    ShortKey { access_key: String },
    #[error("account {access_key:?} appears twice")]
    Duplicate { access_key: String },
    #[error("account {access_key:?}: {pattern}")]
    AccountAddress {
        access_key: String,
        pattern: BadPattern,
    },
    #[error("globalWhiteRemoteAddresses: {0}")]
    GlobalAddress(BadPattern),
    #[error("account {access_key:?}: {what} item {item:?} is not `name=PERM`")]
    PermItem {
        access_key: String,
        what: &'static str,
        item: String,
    },
}

#[derive(Debug, Clone)]
pub struct Account {
    pub access_key: String,
    /// The account's `secretKey`, ready to check signatures with.
    pub signing_key: SigningKey,
    pub white: AddrPattern,
    pub admin: bool,
    pub default_topic: Perm,
    pub default_group: Perm,
    pub topics: BTreeMap<String, Perm>,
    pub groups: BTreeMap<String, Perm>,
}

impl Account {
    fn compile(e: &AccountEntry) -> Result<Self, TableError> {
        let ak = e.access_key.trim();
        if ak.len() < MIN_KEY_LEN || e.secret_key.trim().len() < MIN_KEY_LEN {
            return Err(TableError::ShortKey {
                access_key: ak.to_owned(),
            });
        }
        let white = AddrPattern::parse(&e.white_remote_address).map_err(|pattern| {
            TableError::AccountAddress {
                access_key: ak.to_owned(),
                pattern,
            }
        })?;
        let perms = |items: &[String], what: &'static str| {
            items
                .iter()
                .map(|item| match item.split_once('=') {
                    Some((name, perm)) if !name.trim().is_empty() && !perm.contains('=') => {
                        Ok((name.trim().to_owned(), Perm::parse_lenient(perm)))
                    }
                    _ => Err(TableError::PermItem {
                        access_key: ak.to_owned(),
                        what,
                        item: item.clone(),
                    }),
                })
                .collect::<Result<BTreeMap<_, _>, _>>()
        };
        Ok(Self {
            access_key: ak.to_owned(),
            signing_key: SigningKey::new(e.secret_key.trim()),
            white,
            admin: e.admin,
            default_topic: Perm::parse_lenient(&e.default_topic_perm),
            default_group: Perm::parse_lenient(&e.default_group_perm),
            topics: perms(&e.topic_perms, "topicPerms")?,
            groups: perms(&e.group_perms, "groupPerms")?,
        })
    }

    fn owned(&self, resource: &Resource<'_>) -> Perm {
        match resource {
            Resource::Topic(t) => self.topics.get(*t).copied().unwrap_or(self.default_topic),
            Resource::Group(g) => self.groups.get(*g).copied().unwrap_or(self.default_group),
        }
    }
}

/// A topic or a group. Built with [`Resource::topic`], so `%RETRY%g`/`%DLQ%g` become
/// group `g`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource<'a> {
    Topic(&'a str),
    Group(&'a str),
}

impl<'a> Resource<'a> {
    pub fn topic(name: &'a str) -> Self {
        if let Some(g) = name
            .strip_prefix(RETRY_PREFIX)
            .or_else(|| name.strip_prefix(DLQ_PREFIX))
        {
            Resource::Group(g)
        } else {
            Resource::Topic(name)
        }
    }

    pub fn group(name: &'a str) -> Self {
        Resource::Group(name.strip_prefix(RETRY_PREFIX).unwrap_or(name))
    }
}

/// What a request needs besides a valid signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement<'a> {
    /// Only that the caller is a known account (or whitelisted).
    Authenticated,
    /// These permissions on these resources.
    Resources(Vec<(Resource<'a>, Perm)>),
    /// An `admin: true` account.
    Admin,
}

/// Why a request was refused. [`Denial::remark`] is what the client sees: it names the
/// missing permission, and is the same for every failed secret check;
/// [`Denial::reason`] is the metric label, which does tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    MissingAccessKey,
    UnknownAccessKey,
    BadSignature,
    NotAdmin {
        code: i32,
    },
    NoPermission {
        group: bool,
        name: String,
        perm: Perm,
    },
}

impl Denial {
    pub fn reason(&self) -> &'static str {
        match self {
            Denial::MissingAccessKey => "missing_access_key",
            Denial::UnknownAccessKey => "unknown_access_key",
            Denial::BadSignature => "bad_signature",
            Denial::NotAdmin { .. } => "not_admin",
            Denial::NoPermission { group: false, .. } => "topic_permission",
            Denial::NoPermission { group: true, .. } => "group_permission",
        }
    }

    pub fn remark(&self) -> String {
        match self {
            Denial::MissingAccessKey | Denial::UnknownAccessKey | Denial::BadSignature => {
                "ACL: this request needs an authenticated account (a known AccessKey and a valid Signature)"
                    .to_owned()
            }
            Denial::NotAdmin { code } => format!(
                "ACL: request code {code} ({}) needs an admin account",
                protocol::code::request::name(*code).unwrap_or("unknown")
            ),
            Denial::NoPermission { group, name, perm } => format!(
                "ACL: no {perm} permission on {} {name}",
                if *group { "group" } else { "topic" }
            ),
        }
    }
}

/// Who passed the check (borrowed from the table: checking a request allocates nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant<'t> {
    /// Matched `globalWhiteRemoteAddresses`: no key, no signature, nothing else checked.
    GlobalWhitelist,
    Account {
        access_key: &'t str,
        admin: bool,
    },
}

/// The compiled content of one `plain_acl.yml`.
#[derive(Debug, Clone, Default)]
pub struct AclTable {
    global_white: Vec<AddrPattern>,
    accounts: BTreeMap<String, Account>,
    pub version: FileDataVersion,
}

impl AclTable {
    pub fn compile(file: &PlainAclFile) -> Result<Self, TableError> {
        let global_white = file
            .global_white_remote_addresses
            .iter()
            .map(|p| AddrPattern::parse(p).map_err(TableError::GlobalAddress))
            .collect::<Result<Vec<_>, _>>()?;
        let mut accounts = BTreeMap::new();
        for entry in &file.accounts {
            let account = Account::compile(entry)?;
            if accounts.contains_key(&account.access_key) {
                return Err(TableError::Duplicate {
                    access_key: account.access_key,
                });
            }
            accounts.insert(account.access_key.clone(), account);
        }
        Ok(Self {
            global_white,
            accounts,
            version: file.version(),
        })
    }

    pub fn account(&self, access_key: &str) -> Option<&Account> {
        self.accounts.get(access_key)
    }

    pub fn account_count(&self) -> usize {
        self.accounts.len()
    }

    /// The decision for `cmd` from `peer`. `peer: None` means whitelists do not apply
    /// (the nameserver requires a signature from everyone).
    ///
    /// Order (4.9 with two deviations, see docs/security.md): global whitelist accepts
    /// everything; then the AccessKey must name an account; the signature is checked
    /// unless the account's `whiteRemoteAddress` matches the peer (4.9 also skipped the
    /// permission check there; here permissions still apply); admin-only codes need
    /// `admin: true`; resources need their permission (an admin without any topic or
    /// group entry has them all, as 4.9).
    pub fn check(
        &self,
        peer: Option<IpAddr>,
        cmd: &RemotingCommand,
        need: &Requirement<'_>,
    ) -> Result<Grant<'_>, Denial> {
        if let Some(peer) = peer
            && self.global_white.iter().any(|p| p.matches(peer))
        {
            return Ok(Grant::GlobalWhitelist);
        }
        let ak = cmd
            .ext_fields
            .get(sign::ACCESS_KEY)
            .ok_or(Denial::MissingAccessKey)?;
        let account = self.accounts.get(ak).ok_or(Denial::UnknownAccessKey)?;
        let whitelisted = peer.is_some_and(|p| account.white.matches(p));
        if !whitelisted && !account.signing_key.verify(cmd) {
            return Err(Denial::BadSignature);
        }
        let grant = Grant::Account {
            access_key: &account.access_key,
            admin: account.admin,
        };
        Self::grants(account, cmd.code, need).map(|()| grant)
    }

    /// Whether the account `access_key` (authenticated earlier, on a signed request of
    /// the same connection), reached at `peer`, holds `need` now. For what the broker
    /// pushes unasked: a transaction check-back carries a pending half's body, so the
    /// connection it goes to must still be allowed that half's topic.
    pub fn permits(
        &self,
        peer: Option<IpAddr>,
        access_key: Option<&str>,
        need: &Requirement<'_>,
    ) -> bool {
        if let Some(peer) = peer
            && self.global_white.iter().any(|p| p.matches(peer))
        {
            return true;
        }
        access_key
            .and_then(|ak| self.accounts.get(ak))
            .is_some_and(|account| Self::grants(account, 0, need).is_ok())
    }

    /// The permission part of [`Self::check`]: `code` only names the request in a
    /// refusal.
    fn grants(account: &Account, code: i32, need: &Requirement<'_>) -> Result<(), Denial> {
        match need {
            Requirement::Authenticated => Ok(()),
            Requirement::Admin if account.admin => Ok(()),
            Requirement::Admin => Err(Denial::NotAdmin { code }),
            Requirement::Resources(needs) => {
                if account.admin && account.topics.is_empty() && account.groups.is_empty() {
                    return Ok(());
                }
                for (resource, perm) in needs {
                    if *resource == Resource::Topic(TRACE_TOPIC) && *perm == Perm::PUB {
                        continue;
                    }
                    if !Perm::grants(account.owned(resource), *perm) {
                        let (group, name) = match resource {
                            Resource::Topic(t) => (false, *t),
                            Resource::Group(g) => (true, *g),
                        };
                        return Err(Denial::NoPermission {
                            group,
                            name: name.to_owned(),
                            perm: *perm,
                        });
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::{Credentials, sign_request};

    const FILE: &str = r#"
globalWhiteRemoteAddresses: ["10.10.103.*"]
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB]
  - accessKey: rocketmq2
    secretKey: "87654321"
    whiteRemoteAddress: 192.168.1.*
    admin: true
"#;

    fn table() -> AclTable {
        AclTable::compile(&PlainAclFile::parse(FILE).unwrap()).unwrap()
    }

    fn signed(code: i32, ak: &str, sk: &str) -> RemotingCommand {
        let mut cmd = RemotingCommand::bare_request(code);
        cmd.ext_fields.insert("topic", "topicB");
        sign_request(&mut cmd, &Credentials::new(ak, sk));
        cmd
    }

    const LOCAL: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    #[test]
    fn authentication() {
        let t = table();
        let ok = signed(10, "RocketMQ", "12345678");
        assert!(t.check(LOCAL, &ok, &Requirement::Authenticated).is_ok());
        let wrong = signed(10, "RocketMQ", "12345679");
        assert_eq!(
            t.check(LOCAL, &wrong, &Requirement::Authenticated),
            Err(Denial::BadSignature)
        );
        let unknown = signed(10, "Nobody00", "12345678");
        assert_eq!(
            t.check(LOCAL, &unknown, &Requirement::Authenticated),
            Err(Denial::UnknownAccessKey)
        );
        let bare = RemotingCommand::bare_request(10);
        assert_eq!(
            t.check(LOCAL, &bare, &Requirement::Authenticated),
            Err(Denial::MissingAccessKey)
        );
        // The client sees one remark for all three.
        assert_eq!(
            Denial::BadSignature.remark(),
            Denial::UnknownAccessKey.remark()
        );
        // Global whitelist: nothing needed, even admin.
        let white = Some("10.10.103.9".parse().unwrap());
        assert_eq!(
            t.check(white, &bare, &Requirement::Admin),
            Ok(Grant::GlobalWhitelist)
        );
        // ...unless whitelists do not apply (nameserver).
        assert!(t.check(None, &bare, &Requirement::Admin).is_err());
        // Account whitelist: no signature needed, but admin still checked.
        let mut keyed = RemotingCommand::bare_request(17);
        keyed.ext_fields.insert(sign::ACCESS_KEY, "rocketmq2");
        assert!(
            t.check(
                Some("192.168.1.5".parse().unwrap()),
                &keyed,
                &Requirement::Admin
            )
            .is_ok()
        );
        assert_eq!(
            t.check(LOCAL, &keyed, &Requirement::Admin),
            Err(Denial::BadSignature)
        );
    }

    #[test]
    fn permissions() {
        let t = table();
        let cmd = signed(10, "RocketMQ", "12345678");
        let need = |r, p| Requirement::Resources(vec![(r, p)]);
        assert!(
            t.check(LOCAL, &cmd, &need(Resource::topic("topicB"), Perm::PUB))
                .is_ok()
        );
        let denied = t.check(LOCAL, &cmd, &need(Resource::topic("topicA"), Perm::PUB));
        assert_eq!(
            denied.map_err(|d| d.remark()),
            Err("ACL: no PUB permission on topic topicA".to_owned())
        );
        assert!(
            t.check(LOCAL, &cmd, &need(Resource::topic("topicC"), Perm::PUB))
                .is_err()
        );
        assert!(
            t.check(LOCAL, &cmd, &need(Resource::topic("other"), Perm::SUB))
                .is_err()
        );
        // Retry and DLQ topics are their group's.
        assert!(
            t.check(
                LOCAL,
                &cmd,
                &need(Resource::topic("%RETRY%groupB"), Perm::PUB)
            )
            .is_ok()
        );
        assert!(
            t.check(
                LOCAL,
                &cmd,
                &need(Resource::topic("%DLQ%groupA"), Perm::SUB)
            )
            .is_err()
        );
        assert!(
            t.check(LOCAL, &cmd, &need(Resource::group("anyGroup"), Perm::SUB))
                .is_ok()
        );
        assert!(
            t.check(LOCAL, &cmd, &need(Resource::topic(TRACE_TOPIC), Perm::PUB))
                .is_ok()
        );
        assert_eq!(
            t.check(LOCAL, &cmd, &Requirement::Admin),
            Err(Denial::NotAdmin { code: 10 })
        );
        let admin = signed(17, "rocketmq2", "87654321");
        assert!(t.check(LOCAL, &admin, &Requirement::Admin).is_ok());
        assert!(
            t.check(LOCAL, &admin, &need(Resource::topic("x"), Perm::PUB))
                .is_ok()
        );
    }

    #[test]
    fn bad_files_are_refused_with_the_account_named() {
        let short = "accounts:\n  - accessKey: abc\n    secretKey: 12345678\n";
        let e = AclTable::compile(&PlainAclFile::parse(short).unwrap()).unwrap_err();
        assert!(e.to_string().contains("\"abc\""));
        assert!(!e.to_string().contains("12345678"));
        let bad_addr = "accounts:\n  - accessKey: abcdefg\n    secretKey: 12345678\n    whiteRemoteAddress: 1.2.3\n";
        assert!(AclTable::compile(&PlainAclFile::parse(bad_addr).unwrap()).is_err());
        let bad_perm = "accounts:\n  - accessKey: abcdefg\n    secretKey: 12345678\n    topicPerms: [justaname]\n";
        assert!(AclTable::compile(&PlainAclFile::parse(bad_perm).unwrap()).is_err());
        let dup = "accounts:\n  - {accessKey: abcdefg, secretKey: 12345678}\n  - {accessKey: abcdefg, secretKey: 12345679}\n";
        assert!(AclTable::compile(&PlainAclFile::parse(dup).unwrap()).is_err());
    }
}
