//! Permissions of `plain_acl.yml` (4.9 `Permission`): bits DENY=1, ANY=2, PUB=4, SUB=8.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Perm(u8);

impl Perm {
    pub const DENY: Perm = Perm(1);
    pub const ANY: Perm = Perm(2);
    pub const PUB: Perm = Perm(4);
    pub const SUB: Perm = Perm(8);
    pub const PUB_SUB: Perm = Perm(12);

    /// 4.9's `parsePermFromString`: `PUB`, `SUB`, `PUB|SUB`, `SUB|PUB`, `DENY`; anything
    /// else (a typo, lower case, `ANY`) parses as DENY, so a mistake fails closed.
    pub fn parse_lenient(text: &str) -> Perm {
        Self::parse_strict(text).unwrap_or(Perm::DENY)
    }

    /// The same values, refusing anything else (the admin edits of code 50 do).
    pub fn parse_strict(text: &str) -> Option<Perm> {
        match text.trim() {
            "PUB" => Some(Perm::PUB),
            "SUB" => Some(Perm::SUB),
            "PUB|SUB" | "SUB|PUB" => Some(Perm::PUB_SUB),
            "DENY" => Some(Perm::DENY),
            _ => None,
        }
    }

    /// 4.9 `Permission.checkPermission(needed, owned)`.
    pub fn grants(owned: Perm, needed: Perm) -> bool {
        if owned.0 & Perm::DENY.0 != 0 {
            return false;
        }
        if needed.0 & Perm::ANY.0 != 0 {
            return owned.0 & (Perm::PUB.0 | Perm::SUB.0) != 0;
        }
        needed.0 & owned.0 != 0
    }
}

impl fmt::Display for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match *self {
            Perm::PUB => "PUB",
            Perm::SUB => "SUB",
            Perm::PUB_SUB => "PUB|SUB",
            Perm::ANY => "ANY",
            _ => "DENY",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_grant_as_4_9() {
        assert_eq!(Perm::parse_lenient(" SUB|PUB "), Perm::PUB_SUB);
        assert_eq!(Perm::parse_lenient("pub"), Perm::DENY);
        assert_eq!(Perm::parse_lenient("ANY"), Perm::DENY);
        assert!(Perm::parse_strict("ANY").is_none());
        assert!(Perm::grants(Perm::PUB_SUB, Perm::PUB));
        assert!(Perm::grants(Perm::SUB, Perm::SUB));
        assert!(!Perm::grants(Perm::SUB, Perm::PUB));
        assert!(!Perm::grants(Perm::DENY, Perm::PUB));
        assert!(Perm::grants(Perm::PUB, Perm::ANY));
    }
}
