//! Remote-address patterns of `plain_acl.yml` (4.9 `RemoteAddressStrategyFactory`), plus
//! CIDR (`10.0.0.0/8`, `fd00::/8`), which 4.9 rejects.
//!
//! | pattern | matches |
//! |---|---|
//! | blank | nothing |
//! | `*`, `*.*.*.*`, `*:*:*:*:*:*:*:*` | everything |
//! | `192.168.1.{1,2,3}` | the listed last octets (IPv6: last segment) |
//! | `10.0.0.1,10.0.0.2` | the listed addresses |
//! | `192.168.0.*`, `192.168.1-10.*`, `10.*.*.*`, `10.0.0.5-9` | octets before the first wildcard or range equal, that octet in range; later octets ignored, as 4.9 |
//! | `10.0.0.0/8` | CIDR |
//! | anything else | one literal IPv4 or IPv6 address |

use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddrPattern {
    Never,
    Any,
    Set(Vec<IpAddr>),
    /// IPv4: `fixed` leading octets equal, the next one within `lo..=hi`.
    Range {
        fixed: Vec<u8>,
        lo: u8,
        hi: u8,
    },
    Cidr {
        net: IpAddr,
        prefix: u8,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid remote address pattern {0:?}")]
pub struct BadPattern(pub String);

impl AddrPattern {
    pub fn parse(text: &str) -> Result<Self, BadPattern> {
        let t = text.trim();
        let bad = || BadPattern(t.to_owned());
        if t.is_empty() {
            return Ok(Self::Never);
        }
        if matches!(t, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
            return Ok(Self::Any);
        }
        if let Some((net, prefix)) = t.split_once('/') {
            let net: IpAddr = net.trim().parse().map_err(|_| bad())?;
            let prefix: u8 = prefix.trim().parse().map_err(|_| bad())?;
            let max = if net.is_ipv4() { 32 } else { 128 };
            if prefix > max {
                return Err(bad());
            }
            return Ok(Self::Cidr { net, prefix });
        }
        if let Some(open) = t.find('{')
            && t.ends_with('}')
        {
            let prefix = &t[..open];
            let set = t[open + 1..t.len() - 1]
                .split(',')
                .map(|last| format!("{prefix}{}", last.trim()).parse::<IpAddr>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| bad())?;
            return Ok(Self::Set(set));
        }
        if t.contains(',') {
            let set = t
                .split(',')
                .map(|a| a.trim().parse::<IpAddr>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| bad())?;
            return Ok(Self::Set(set));
        }
        if (t.contains('*') || t.contains('-')) && !t.contains(':') {
            return Self::parse_v4_range(t).ok_or_else(bad);
        }
        t.parse::<IpAddr>()
            .map(|a| Self::Set(vec![a]))
            .map_err(|_| bad())
    }

    fn parse_v4_range(t: &str) -> Option<Self> {
        let parts: Vec<&str> = t.split('.').collect();
        if parts.len() != 4 {
            return None;
        }
        let mut fixed = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let (lo, hi) = if *part == "*" {
                (0, 255)
            } else if let Some((lo, hi)) = part.split_once('-') {
                let (lo, hi) = (lo.parse::<u8>().ok()?, hi.parse::<u8>().ok()?);
                if lo > hi {
                    return None;
                }
                (lo, hi)
            } else {
                fixed.push(part.parse::<u8>().ok()?);
                continue;
            };
            // The first octet cannot be a wildcard (4.9 refuses it too); later octets
            // must still be well-formed even though they are ignored.
            if i == 0 {
                return None;
            }
            for rest in &parts[i + 1..] {
                let ok = *rest == "*"
                    || rest.parse::<u8>().is_ok()
                    || rest
                        .split_once('-')
                        .is_some_and(|(a, b)| a.parse::<u8>().is_ok() && b.parse::<u8>().is_ok());
                if !ok {
                    return None;
                }
            }
            return Some(Self::Range { fixed, lo, hi });
        }
        None
    }

    pub fn matches(&self, peer: IpAddr) -> bool {
        let peer = canonical(peer);
        match self {
            Self::Never => false,
            Self::Any => true,
            Self::Set(set) => set.iter().any(|a| canonical(*a) == peer),
            Self::Range { fixed, lo, hi } => match peer {
                IpAddr::V4(v4) => {
                    let o = v4.octets();
                    o[..fixed.len()] == fixed[..] && (*lo..=*hi).contains(&o[fixed.len()])
                }
                IpAddr::V6(_) => false,
            },
            Self::Cidr { net, prefix } => match (canonical(*net), peer) {
                (IpAddr::V4(n), IpAddr::V4(p)) => {
                    let mask = u32::MAX.checked_shl(32 - u32::from(*prefix)).unwrap_or(0);
                    u32::from(n) & mask == u32::from(p) & mask
                }
                (IpAddr::V6(n), IpAddr::V6(p)) => {
                    let mask = u128::MAX.checked_shl(128 - u32::from(*prefix)).unwrap_or(0);
                    u128::from(n) & mask == u128::from(p) & mask
                }
                _ => false,
            },
        }
    }
}

/// An IPv4 peer reached over a dual-stack socket shows up as `::ffff:a.b.c.d`.
fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, peer: &str) -> bool {
        AddrPattern::parse(pattern)
            .unwrap()
            .matches(peer.parse().unwrap())
    }

    #[test]
    fn patterns_of_4_9_and_cidr() {
        assert!(!m("", "10.0.0.1"));
        assert!(m("*", "10.0.0.1"));
        assert!(m("*", "::1"));
        assert!(m("192.168.1.*", "192.168.1.77"));
        assert!(!m("192.168.1.*", "192.168.2.77"));
        assert!(m("192.168.1-10.*", "192.168.10.1"));
        assert!(!m("192.168.1-10.*", "192.168.11.1"));
        assert!(m("10.*.*.*", "10.200.1.1"));
        assert!(m("10.0.0.5-9", "10.0.0.7"));
        assert!(!m("10.0.0.5-9", "10.0.0.10"));
        // 4.9 quirk: octets after the first wildcard are ignored.
        assert!(m("192.168.*.5", "192.168.3.6"));
        assert!(m("192.168.1.{1,2,3}", "192.168.1.2"));
        assert!(!m("192.168.1.{1,2,3}", "192.168.1.4"));
        assert!(m("10.0.0.1, 10.0.0.2", "10.0.0.2"));
        assert!(m("10.0.0.0/8", "10.9.8.7"));
        assert!(!m("10.0.0.0/8", "11.0.0.1"));
        assert!(m("0.0.0.0/0", "1.2.3.4"));
        assert!(m("127.0.0.1/32", "::ffff:127.0.0.1"));
        assert!(m("fd00::/8", "fd12::1"));
        assert!(m("127.0.0.1", "127.0.0.1"));
        assert!(m("::1", "::1"));
        for bad in [
            "*.1.2.3",
            "10.0.0",
            "10.0.0.300",
            "10.0.0.0/33",
            "abc",
            "10.0.0.9-5",
        ] {
            assert!(AddrPattern::parse(bad).is_err(), "{bad}");
        }
    }
}
