//! `connectionLimitExemptAddresses`: sources the per-source share does not apply to,
//! given as comma-separated IP addresses and CIDR blocks (`10.0.0.7, 192.168.0.0/16,
//! fd00::/8`). Meant for many clients behind one NAT address; the listener's cap and
//! its reserve still apply to them.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::acl::AddrPattern;

/// A parsed exemption list; keeps its text for config dumps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExemptSources {
    text: String,
    patterns: Vec<AddrPattern>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither an IP address nor a CIDR block (address/prefix)")]
pub struct BadExemption(pub String);

impl FromStr for ExemptSources {
    type Err = BadExemption;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut patterns = Vec::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let bad = || BadExemption(item.to_owned());
            // Only the two forms the key documents; the ACL's 4.9 wildcard forms would
            // make a typo exempt far more than meant.
            let pattern = AddrPattern::parse(item).map_err(|_| bad())?;
            match &pattern {
                AddrPattern::Cidr { .. } => {}
                AddrPattern::Set(one) if one.len() == 1 => {}
                _ => return Err(bad()),
            }
            patterns.push(pattern);
        }
        Ok(Self {
            text: text.trim().to_owned(),
            patterns,
        })
    }
}

impl ExemptSources {
    /// Whether the per-source share spares `ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.patterns.iter().any(|p| p.matches(ip))
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

impl fmt::Display for ExemptSources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
