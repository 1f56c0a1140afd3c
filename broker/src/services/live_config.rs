//! The broker settings UPDATE_BROKER_CONFIG may change while the broker runs.
//!
//! RocketMQ's `AdminBrokerProcessor.updateBrokerConfig` let any `BrokerConfig` field be
//! set remotely, which is how CVE-2023-33246 ran commands (through `rocketmqHome` /
//! `filterServerNums`) and CVE-2023-37582 rewrote paths. Here only the keys in
//! [`UPDATABLE`] can change: each is a switch or a number that the handlers read on every
//! request, or the nameserver list (`namesrvAddr`, which 4.9 also re-points live through
//! `BrokerOuterAPI.updateNameServerAddressList`), validated as `host:port[;host:port]`.
//! None names a path, a listening port or anything executable. A request that holds any
//! other key, or a bad value, is refused as a whole and changes nothing.
//!
//! An accepted update is also written into the broker.conf the broker started with, when
//! that file is writable (see [`crate::services::conf_file`]), as 4.9's
//! `Configuration.persist` does; otherwise (on Kubernetes, the operator's read-only
//! ConfigMap) it lasts until the process stops.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use parking_lot::RwLock;
use tokio::sync::Notify;

use crate::config::BrokerConfig;

/// Most nameservers a `namesrvAddr` list may name (a RocketMQ cluster runs a handful).
pub const MAX_NAMESRV_ADDRS: usize = 32;

/// Keys UPDATE_BROKER_CONFIG accepts, with RocketMQ's names.
pub const UPDATABLE: &[&str] = &[
    "brokerPermission",
    "longPollingEnable",
    "shortPollingTimeMills",
    "notifyConsumerIdsChangedEnable",
    "autoCreateSubscriptionGroup",
    "namesrvAddr",
];

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    #[error("Can not update config: {0} cannot be changed at runtime (allowed: {allowed})", allowed = UPDATABLE.join(", "))]
    NotUpdatable(String),
    /// A key no broker.conf honours (a typo, or a key of another RocketMQ version).
    #[error(
        "Can not update config: unknown key {key}{hint} (keys that can change at runtime: {allowed})",
        hint = suggestion.as_deref().map(|s| format!(", did you mean {s}?")).unwrap_or_default(),
        allowed = UPDATABLE.join(", ")
    )]
    Unknown {
        key: String,
        suggestion: Option<String>,
    },
    #[error("bad value {value:?} for {key}")]
    BadValue { key: String, value: String },
}

#[derive(Debug)]
pub struct LiveConfig {
    pub broker_permission: AtomicI32,
    pub long_polling_enable: AtomicBool,
    pub short_polling_time_mills: AtomicU64,
    pub notify_consumer_ids_changed_enable: AtomicBool,
    pub auto_create_subscription_group: AtomicBool,
    /// The nameservers registration talks to; [`Self::namesrv_changed`] fires on a change.
    namesrv_addrs: RwLock<Vec<String>>,
    pub namesrv_changed: Notify,
}

/// What an accepted update changed that other parts of the broker must act on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// brokerPermission changed: re-register so routes carry the new perm (as 4.9 does).
    pub permission: bool,
    /// namesrvAddr changed: registration re-points to the new list.
    pub namesrv: bool,
}

/// One validated setting, parsed before anything is applied.
#[derive(Debug, Clone)]
enum Setting {
    BrokerPermission(i32),
    LongPollingEnable(bool),
    ShortPollingTimeMills(u64),
    NotifyConsumerIdsChangedEnable(bool),
    AutoCreateSubscriptionGroup(bool),
    NamesrvAddr(Vec<String>),
}

/// `host:port[;host:port]` as `namesrvAddr` holds it: 1..=[`MAX_NAMESRV_ADDRS`] entries,
/// each a DNS name, IPv4 address or bracketed IPv6 address and a non-zero port.
pub fn parse_namesrv_list(value: &str) -> Option<Vec<String>> {
    let addrs: Vec<String> = value
        .split(';')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    let valid = !addrs.is_empty()
        && addrs.len() <= MAX_NAMESRV_ADDRS
        && addrs.iter().all(|a| is_host_port(a));
    valid.then_some(addrs)
}

fn is_host_port(addr: &str) -> bool {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return false;
    };
    if !matches!(port.parse::<u16>(), Ok(p) if p > 0) {
        return false;
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    // RFC 1123 host names (IPv4 addresses are a subset of the character set).
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// A validated UPDATE_BROKER_CONFIG request: every pair parsed, nothing applied yet.
#[derive(Debug, Clone)]
pub struct Update {
    settings: Vec<Setting>,
}

impl Update {
    /// `(key, value)` as broker.conf holds them, in request order.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        self.settings.iter().map(Setting::line).collect()
    }

    /// Whether the update sets `key`.
    pub fn sets(&self, key: &str) -> bool {
        self.settings.iter().any(|s| s.line().0 == key)
    }
}

impl Setting {
    /// The key and its value rendered as broker.conf holds it.
    fn line(&self) -> (&'static str, String) {
        match self {
            Self::BrokerPermission(p) => ("brokerPermission", p.to_string()),
            Self::LongPollingEnable(f) => ("longPollingEnable", f.to_string()),
            Self::ShortPollingTimeMills(ms) => ("shortPollingTimeMills", ms.to_string()),
            Self::NotifyConsumerIdsChangedEnable(f) => {
                ("notifyConsumerIdsChangedEnable", f.to_string())
            }
            Self::AutoCreateSubscriptionGroup(f) => ("autoCreateSubscriptionGroup", f.to_string()),
            Self::NamesrvAddr(addrs) => ("namesrvAddr", addrs.join(";")),
        }
    }

    fn parse(key: &str, value: &str) -> Result<Self, UpdateError> {
        let bad = || UpdateError::BadValue {
            key: key.to_owned(),
            value: value.to_owned(),
        };
        let v = value.trim();
        let flag = || v.parse::<bool>().map_err(|_| bad());
        Ok(match key {
            // PermName: only the read (4) and write (2) bits mean anything for a broker.
            "brokerPermission" => match v.parse::<i32>() {
                Ok(p) if (0..=7).contains(&p) => Self::BrokerPermission(p),
                _ => return Err(bad()),
            },
            "shortPollingTimeMills" => match v.parse::<u64>() {
                Ok(ms) if (1..=60_000).contains(&ms) => Self::ShortPollingTimeMills(ms),
                _ => return Err(bad()),
            },
            "longPollingEnable" => Self::LongPollingEnable(flag()?),
            "notifyConsumerIdsChangedEnable" => Self::NotifyConsumerIdsChangedEnable(flag()?),
            "autoCreateSubscriptionGroup" => Self::AutoCreateSubscriptionGroup(flag()?),
            "namesrvAddr" => Self::NamesrvAddr(parse_namesrv_list(v).ok_or_else(bad)?),
            other => return Err(UpdateError::NotUpdatable(other.to_owned())),
        })
    }
}

impl LiveConfig {
    pub fn new(b: &BrokerConfig) -> Self {
        Self {
            broker_permission: AtomicI32::new(b.broker_permission),
            long_polling_enable: AtomicBool::new(b.long_polling_enable),
            short_polling_time_mills: AtomicU64::new(b.short_polling_time_mills),
            notify_consumer_ids_changed_enable: AtomicBool::new(
                b.notify_consumer_ids_changed_enable,
            ),
            auto_create_subscription_group: AtomicBool::new(b.auto_create_subscription_group),
            namesrv_addrs: RwLock::new(b.namesrv_addrs()),
            namesrv_changed: Notify::new(),
        }
    }

    /// The nameservers the broker registers with now.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrv_addrs.read().clone()
    }

    pub fn broker_permission(&self) -> i32 {
        self.broker_permission.load(Ordering::Relaxed)
    }

    /// Validates every pair, then applies them all, and says what changed.
    pub fn update(&self, pairs: &[(String, String)]) -> Result<Applied, UpdateError> {
        Ok(self.apply(Self::validate(pairs)?))
    }

    /// Parses every pair; the first bad one refuses the whole request.
    pub fn validate(pairs: &[(String, String)]) -> Result<Update, UpdateError> {
        let settings = pairs
            .iter()
            .map(|(k, v)| Setting::parse(k, v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Update { settings })
    }

    /// Applies a validated update, and says what changed.
    pub fn apply(&self, update: Update) -> Applied {
        let mut applied = Applied::default();
        for setting in update.settings {
            match setting {
                Setting::BrokerPermission(p) => {
                    applied.permission |= self.broker_permission.swap(p, Ordering::Relaxed) != p;
                }
                Setting::NamesrvAddr(addrs) => {
                    let mut current = self.namesrv_addrs.write();
                    if *current != addrs {
                        *current = addrs;
                        applied.namesrv = true;
                    }
                }
                Setting::LongPollingEnable(f) => {
                    self.long_polling_enable.store(f, Ordering::Relaxed)
                }
                Setting::ShortPollingTimeMills(ms) => {
                    self.short_polling_time_mills.store(ms, Ordering::Relaxed)
                }
                Setting::NotifyConsumerIdsChangedEnable(f) => self
                    .notify_consumer_ids_changed_enable
                    .store(f, Ordering::Relaxed),
                Setting::AutoCreateSubscriptionGroup(f) => self
                    .auto_create_subscription_group
                    .store(f, Ordering::Relaxed),
            }
        }
        if applied.namesrv {
            self.namesrv_changed.notify_one();
        }
        applied
    }

    /// The live value of an updatable key, rendered as in broker.conf.
    fn render(&self, key: &str) -> Option<String> {
        let flag = |a: &AtomicBool| a.load(Ordering::Relaxed).to_string();
        Some(match key {
            "brokerPermission" => self.broker_permission().to_string(),
            "longPollingEnable" => flag(&self.long_polling_enable),
            "shortPollingTimeMills" => self
                .short_polling_time_mills
                .load(Ordering::Relaxed)
                .to_string(),
            "notifyConsumerIdsChangedEnable" => flag(&self.notify_consumer_ids_changed_enable),
            "autoCreateSubscriptionGroup" => flag(&self.auto_create_subscription_group),
            "namesrvAddr" => self.namesrv_addrs().join(";"),
            _ => return None,
        })
    }

    /// `key=value` lines of the effective config with the live values in place of
    /// the started ones (GET_BROKER_CONFIG).
    pub fn overlay(&self, rendered: &str) -> String {
        let mut out = String::with_capacity(rendered.len());
        for line in rendered.lines() {
            let key = line.split_once('=').map_or(line, |(k, _)| k);
            match self.render(key) {
                Some(v) => out.push_str(&format!("{key}={v}")),
                None => out.push_str(line),
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn allow_listed_keys_apply_and_others_change_nothing() {
        let live = LiveConfig::new(&BrokerConfig::default());
        assert_eq!(live.broker_permission(), 6);
        let changed = live
            .update(&pairs(&[
                ("brokerPermission", "4"),
                ("longPollingEnable", "false"),
                ("shortPollingTimeMills", "250"),
            ]))
            .unwrap();
        assert!(changed.permission && !changed.namesrv);
        assert_eq!(live.broker_permission(), 4);
        assert!(!live.long_polling_enable.load(Ordering::Relaxed));
        assert_eq!(live.short_polling_time_mills.load(Ordering::Relaxed), 250);

        // Path, command and address keys are refused, and nothing else in the request applies.
        for key in [
            "storePathRootDir",
            "rocketmqHome",
            "filterServerNums",
            "brokerIP1",
            "listenPort",
            "configStorePath",
        ] {
            let err = live
                .update(&pairs(&[("brokerPermission", "6"), (key, "/tmp/x")]))
                .unwrap_err();
            assert_eq!(err, UpdateError::NotUpdatable(key.to_owned()));
        }
        assert_eq!(live.broker_permission(), 4);
        assert!(matches!(
            live.update(&pairs(&[("brokerPermission", "9")])),
            Err(UpdateError::BadValue { .. })
        ));
        assert!(matches!(
            live.update(&pairs(&[("longPollingEnable", "maybe")])),
            Err(UpdateError::BadValue { .. })
        ));
        assert!(
            !live
                .update(&pairs(&[("brokerPermission", "4")]))
                .unwrap()
                .permission
        );
    }

    #[test]
    fn namesrv_list_is_validated_and_applied_whole() {
        let live = LiveConfig::new(&BrokerConfig::default());
        let applied = live
            .update(&pairs(&[(
                "namesrvAddr",
                " ns-0.ns:9876; 10.0.0.2:9876;[::1]:9876 ",
            )]))
            .unwrap();
        assert!(applied.namesrv);
        assert_eq!(
            live.namesrv_addrs(),
            vec!["ns-0.ns:9876", "10.0.0.2:9876", "[::1]:9876"]
        );
        assert_eq!(
            live.render("namesrvAddr").unwrap(),
            "ns-0.ns:9876;10.0.0.2:9876;[::1]:9876"
        );
        // The same list again changes nothing.
        assert!(
            !live
                .update(&pairs(&[(
                    "namesrvAddr",
                    "ns-0.ns:9876;10.0.0.2:9876;[::1]:9876"
                )]))
                .unwrap()
                .namesrv
        );
        let too_many = vec!["h:1"; MAX_NAMESRV_ADDRS + 1].join(";");
        for bad in [
            "",
            ";",
            "ns:0",
            "ns:99999",
            "ns",
            "/etc/passwd",
            "ns:9876;$(reboot):1",
            "a b:9876",
            "-ns:9876",
            "[zz]:9876",
            "file:///x:1",
            too_many.as_str(),
        ] {
            assert!(
                matches!(
                    live.update(&pairs(&[("brokerPermission", "2"), ("namesrvAddr", bad)])),
                    Err(UpdateError::BadValue { .. })
                ),
                "{bad:?} accepted"
            );
        }
        assert_eq!(live.namesrv_addrs().len(), 3);
        assert_eq!(live.broker_permission(), 6);
    }

    #[test]
    fn every_listed_key_is_parsed_and_rendered() {
        let live = LiveConfig::new(&BrokerConfig {
            namesrv_addr: Some("127.0.0.1:9876".into()),
            ..BrokerConfig::default()
        });
        for key in UPDATABLE {
            let current = live.render(key).unwrap();
            assert!(live.update(&pairs(&[(key, &current)])).is_ok(), "{key}");
        }
    }

    #[test]
    fn overlay_replaces_live_keys_only() {
        let live = LiveConfig::new(&BrokerConfig::default());
        live.update(&pairs(&[("brokerPermission", "2")])).unwrap();
        let out = live.overlay("brokerName=b\nbrokerPermission=6\nlongPollingEnable=true\n");
        assert_eq!(
            out,
            "brokerName=b\nbrokerPermission=2\nlongPollingEnable=true\n"
        );
    }
}
