//! `namesrv.conf` / `broker.conf` rendering (Java properties) and the config hash that
//! drives rolling restarts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::listener::Advertised;
use super::secrets::{MountedSecrets, TLS_DIR};
use crate::crd::{AckMode, Broker, DEFAULT_GRPC_PORT, NameServer};
use crate::names::{BROKER_HA_PORT, BROKER_PORT, BrokerNames, NAMESERVER_PORT};

/// Where the ConfigMap is mounted and the stores live inside the pods.
pub const CONFIG_DIR: &str = "/etc/rocketmq";
pub const DATA_DIR: &str = "/var/lib/rocketmq";
pub const STORE_DIR: &str = "/var/lib/rocketmq/store";
pub const LOG_DIR: &str = "/var/log/rocketmq";
pub const NAMESERVER_CONF: &str = "namesrv.conf";
/// How long a terminating broker keeps serving after it unregistered: one client route
/// refresh (4.9 `pollNameServerInterval`, 30 s).
pub const SHUTDOWN_UNREGISTER_WAIT_SECS: i64 = 30;
/// Termination grace of broker pods: the unregister wait plus time to flush and stop.
pub const BROKER_TERMINATION_GRACE_SECS: i64 = SHUTDOWN_UNREGISTER_WAIT_SECS + 60;

/// One broker's identity inside its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberIdentity {
    pub ordinal: i32,
    /// RocketMQ brokerId: 0 for the master, > 0 for slaves.
    pub broker_id: i64,
}

/// brokerIds of a group whose master is the pod with `master_ordinal`. RocketMQ 4.x requires
/// brokerId 0 on the master; after a switchover the old master takes the new master's
/// ordinal as its id, so every id stays unique and stable for the others.
pub fn member_identities(replicas: i32, master_ordinal: i32) -> Vec<MemberIdentity> {
    (0..replicas.max(0))
        .map(|ordinal| {
            let broker_id = if ordinal == master_ordinal {
                0
            } else if ordinal == 0 {
                i64::from(master_ordinal)
            } else {
                i64::from(ordinal)
            };
            MemberIdentity { ordinal, broker_id }
        })
        .collect()
}

/// Identities while the group's master is fenced mid-failover and no successor is
/// promoted yet: the fenced master takes the spare id `replicas`, so no member's
/// configuration says brokerId 0 (the id RocketMQ 4.x routes writes to) and a pod
/// restarted now comes back as a slave.
pub fn fenced_identities(replicas: i32, master_ordinal: i32) -> Vec<MemberIdentity> {
    member_identities(replicas, master_ordinal)
        .into_iter()
        .map(|m| MemberIdentity {
            broker_id: if m.broker_id == 0 {
                i64::from(replicas)
            } else {
                m.broker_id
            },
            ..m
        })
        .collect()
}

/// Java-properties text with keys in sorted order. Escapes follow
/// `java.util.Properties.store` except that `=`, `:`, `#` and `!` stay literal inside values
/// (`load` only splits on the first separator), so `namesrvAddr=a:9876;b:9876` reads as
/// written. Non-ASCII becomes `\uXXXX`: RocketMQ loads the file as ISO-8859-1.
pub fn render_properties(props: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (k, v) in props {
        let _ = writeln!(out, "{}={}", escape(k, true), escape(v, false));
    }
    out
}

fn escape(s: &str, is_key: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '=' | ':' | '#' | '!' if is_key => {
                out.push('\\');
                out.push(c);
            }
            ' ' if is_key || i == 0 => out.push_str("\\ "),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04X}");
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// `namesrv.conf` of a NameServer.
pub fn nameserver_conf(ns: &NameServer) -> String {
    let mut props = ns.spec.config.clone();
    props.insert("listenPort".to_owned(), NAMESERVER_PORT.to_string());
    props.insert("metricsPort".to_owned(), ns.spec.metrics.port.to_string());
    props.insert(
        "kvConfigPath".to_owned(),
        format!("{DATA_DIR}/namesrv/kvConfig.json"),
    );
    MountedSecrets::of_nameserver(ns).insert_server_props(&mut props);
    render_properties(&props)
}

/// broker.conf of one member; `namesrv_addr` is the `a:9876;b:9876` list.
pub fn broker_conf(
    broker: &Broker,
    group: i32,
    member: MemberIdentity,
    namesrv_addr: &str,
    cluster_domain: &str,
    advertised: Option<&Advertised>,
) -> String {
    let names = BrokerNames::of(broker);
    let pod_host = names.pod_host(group, member.ordinal, cluster_domain);
    let mut props = broker.spec.config.clone();
    let master_role = match broker.spec.replication.ack_mode {
        AckMode::Async => "ASYNC_MASTER",
        AckMode::Sync => "SYNC_MASTER",
    };
    let role = if member.broker_id == 0 {
        master_role
    } else {
        "SLAVE"
    };
    let owned = [
        ("brokerClusterName", names.cluster.clone()),
        ("brokerName", names.broker_name(group)),
        ("brokerId", member.broker_id.to_string()),
        ("brokerRole", role.to_owned()),
        // What a slave becomes when the failover machine promotes it.
        ("haMasterRole", master_role.to_owned()),
        ("namesrvAddr", namesrv_addr.to_owned()),
        ("listenPort", BROKER_PORT.to_string()),
        ("haListenPort", BROKER_HA_PORT.to_string()),
        ("metricsPort", broker.spec.metrics.port.to_string()),
        // What clients get from the nameservers: the external address when there is one.
        (
            "brokerIP1",
            advertised
                .map_or(pod_host.as_str(), |a| a.host.as_str())
                .to_owned(),
        ),
        ("storePathRootDir", STORE_DIR.to_owned()),
        ("storePathCommitLog", format!("{STORE_DIR}/commitlog")),
        (
            "flushDiskType",
            broker.spec.flush_disk_type.conf_value().to_owned(),
        ),
    ];
    for (k, v) in owned {
        props.insert(k.to_owned(), v);
    }
    // Slaves reach their master's HA port at brokerIP2 (the haServerAddr a registration
    // returns), which must stay inside the cluster. Without an external address brokerIP1
    // already is that, and the file stays as before (no restart on upgrade).
    if let Some(a) = advertised {
        props.insert("brokerIP2".to_owned(), pod_host);
        // Behind a node port the broker listens on the advertised port itself and keeps
        // 10911 as its VIP port (same protocol) for everything inside.
        if a.port != BROKER_PORT {
            props.insert("listenPort".to_owned(), a.port.to_string());
            props.insert("fastListenPort".to_owned(), BROKER_PORT.to_string());
            props.insert("fastListenPortEnable".to_owned(), "true".to_owned());
        }
    }
    // The gRPC endpoint: the broker's own default port is left implicit (an operator
    // upgrade then changes no broker.conf); behind a node port the broker listens on the
    // node port's number, as it does for remoting.
    match broker.spec.grpc.enabled_port() {
        None => {
            props.insert("grpcServerPort".to_owned(), "0".to_owned());
        }
        Some(port) => {
            let listen = advertised.and_then(|a| a.grpc_port).unwrap_or(port);
            if listen != DEFAULT_GRPC_PORT {
                props.insert("grpcServerPort".to_owned(), listen.to_string());
            }
        }
    }
    // The preStop behaviour: on SIGTERM the broker unregisters, serves this long so
    // clients refresh their routes, then closes (unless the spec chose another wait). A
    // shorter grace period than the default shortens the wait to a third of it, leaving
    // the rest for the flush.
    let grace = broker
        .spec
        .pod
        .termination_grace_period_seconds
        .unwrap_or(BROKER_TERMINATION_GRACE_SECS);
    let wait_secs = SHUTDOWN_UNREGISTER_WAIT_SECS.min(grace.max(0) / 3);
    props
        .entry("shutdownUnregisterWaitMs".to_owned())
        .or_insert_with(|| (wait_secs * 1000).to_string());
    // Secrets are mounted; broker.conf names only their paths.
    MountedSecrets::of_broker(broker).insert_server_props(&mut props);
    if let Some(tls) = &broker.spec.security.tls {
        // Used when `tls.enable=true` (spec.config, or `enforcing`): slaves to their
        // master and registrations to TLS nameservers, with the same certificate.
        if tls.enforcing() {
            // An enforcing master takes no plaintext slave, so every member dials TLS.
            props.insert("tls.enable".to_owned(), "true".to_owned());
        }
        for (k, file) in [
            ("tls.client.trustCertPath", "ca.crt"),
            ("tls.client.certPath", "tls.crt"),
            ("tls.client.keyPath", "tls.key"),
        ] {
            props.insert(k.to_owned(), format!("{TLS_DIR}/{file}"));
        }
    }
    render_properties(&props)
}

/// File name of a member's broker.conf inside the group ConfigMap.
pub fn broker_conf_key(pod: &str) -> String {
    format!("{pod}.conf")
}

/// 64-bit FNV-1a over the given parts, hex encoded. Stable across Rust releases (unlike
/// `DefaultHasher`), so a new operator version does not restart every pod.
pub fn config_hash<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0u8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    }
    format!("{h:016x}")
}

/// Drops the keys the operator changes on running brokers before hashing, so changing
/// them never restarts a pod: `namesrvAddr` (pushed with UPDATE_BROKER_CONFIG, which
/// RocketMQ applies live through `updateNameServerAddressList`) and `brokerId` /
/// `brokerRole` (a failover changes roles live with NOTIFY_BROKER_ROLE_CHANGED; the file
/// only matters at the next start).
pub fn restart_relevant(conf: &str) -> String {
    conf.lines()
        .filter(|l| {
            !l.starts_with("namesrvAddr=")
                && !l.starts_with("brokerId=")
                && !l.starts_with("brokerRole=")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An external address is what clients get (brokerIP1); replication keeps the pod's
    /// DNS name (brokerIP2), and the address is restart-relevant (it must reach the file).
    #[test]
    fn an_advertised_host_becomes_broker_ip1_and_replication_stays_inside() {
        let mut b = Broker::new("b", crate::crd::BrokerSpec::default());
        b.metadata.namespace = Some("ns".to_owned());
        let member = MemberIdentity {
            ordinal: 1,
            broker_id: 1,
        };
        let conf =
            |a: Option<&Advertised>| broker_conf(&b, 0, member, "ns:9876", "cluster.local", a);
        let inside = "b-0-1.b-broker-headless.ns.svc.cluster.local";
        let lb = Advertised {
            host: "203.0.113.9".to_owned(),
            port: BROKER_PORT,
            grpc_port: Some(8081),
        };
        let external = conf(Some(&lb));
        assert!(external.contains("brokerIP1=203.0.113.9\n"), "{external}");
        assert!(
            external.contains(&format!("brokerIP2={inside}\n")),
            "{external}"
        );
        let internal = conf(None);
        assert!(
            internal.contains(&format!("brokerIP1={inside}\n")),
            "{internal}"
        );
        assert!(!internal.contains("brokerIP2="), "{internal}");
        assert_ne!(restart_relevant(&external), restart_relevant(&internal));
        assert!(external.contains("listenPort=10911\n"), "{external}");

        // A node port: listened on and advertised; 10911 stays served as the VIP port.
        let node_port = Advertised {
            host: "nodes.example.com".to_owned(),
            port: 31234,
            grpc_port: Some(31235),
        };
        let np = conf(Some(&node_port));
        for line in [
            "brokerIP1=nodes.example.com\n",
            "listenPort=31234\n",
            "fastListenPort=10911\n",
            "fastListenPortEnable=true\n",
            "haListenPort=10912\n",
            "grpcServerPort=31235\n",
        ] {
            assert!(np.contains(line), "{line} in {np}");
        }
        // The default gRPC port stays implicit (the broker's default); another port or
        // "off" is written.
        assert!(!external.contains("grpcServerPort"), "{external}");
        assert!(!internal.contains("grpcServerPort"), "{internal}");
        let mut other = b.clone();
        other.spec.grpc.port = 9091;
        let c = broker_conf(&other, 0, member, "ns:9876", "cluster.local", None);
        assert!(c.contains("grpcServerPort=9091\n"), "{c}");
        other.spec.grpc.port = 0;
        let c = broker_conf(&other, 0, member, "ns:9876", "cluster.local", None);
        assert!(c.contains("grpcServerPort=0\n"), "{c}");
    }

    #[test]
    fn the_unregister_wait_fits_in_the_grace_period() {
        use crate::crd::BrokerSpec;
        let wait = |grace: Option<i64>, config: &[(&str, &str)]| {
            let mut spec = BrokerSpec::default();
            spec.pod.termination_grace_period_seconds = grace;
            spec.config = config
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            let mut b = Broker::new("b", spec);
            b.metadata.namespace = Some("ns".to_owned());
            let conf = broker_conf(
                &b,
                0,
                MemberIdentity {
                    ordinal: 0,
                    broker_id: 0,
                },
                "ns:9876",
                "cluster.local",
                None,
            );
            conf.lines()
                .find_map(|l| l.strip_prefix("shutdownUnregisterWaitMs="))
                .unwrap()
                .to_owned()
        };
        assert_eq!(wait(None, &[]), "30000");
        assert_eq!(wait(Some(30), &[]), "10000");
        assert_eq!(wait(None, &[("shutdownUnregisterWaitMs", "5000")]), "5000");
    }

    /// A promoted slave of an ASYNC group stays ASYNC_MASTER (`haMasterRole`).
    #[test]
    fn every_member_names_the_groups_master_role() {
        use crate::crd::{AckMode, BrokerSpec};
        for (mode, role) in [
            (AckMode::Async, "ASYNC_MASTER"),
            (AckMode::Sync, "SYNC_MASTER"),
        ] {
            let mut spec = BrokerSpec::default();
            spec.replication.ack_mode = mode;
            let mut b = Broker::new("b", spec);
            b.metadata.namespace = Some("ns".to_owned());
            for broker_id in [0, 1] {
                let conf = broker_conf(
                    &b,
                    0,
                    MemberIdentity {
                        ordinal: broker_id as i32,
                        broker_id,
                    },
                    "ns:9876",
                    "cluster.local",
                    None,
                );
                assert!(conf.contains(&format!("haMasterRole={role}\n")), "{conf}");
            }
        }
    }

    #[test]
    fn master_takes_id_zero_and_old_master_takes_its_ordinal() {
        let ids: Vec<_> = member_identities(3, 0)
            .iter()
            .map(|m| m.broker_id)
            .collect();
        assert_eq!(ids, [0, 1, 2]);
        let ids: Vec<_> = member_identities(3, 2)
            .iter()
            .map(|m| m.broker_id)
            .collect();
        assert_eq!(ids, [2, 1, 0]);
    }

    #[test]
    fn properties_escape_separators_and_non_ascii() {
        let props = BTreeMap::from([
            ("a key".to_owned(), " lead=x:y\nü".to_owned()),
            ("plain".to_owned(), "v".to_owned()),
        ]);
        assert_eq!(
            render_properties(&props),
            "a\\ key=\\ lead=x:y\\n\\u00FC\nplain=v\n"
        );
    }

    #[test]
    fn hash_is_stable_and_separates_parts() {
        assert_eq!(config_hash(["a", "b"]), config_hash(["a", "b"]));
        assert_ne!(config_hash(["ab"]), config_hash(["a", "b"]));
        assert_eq!(config_hash([""]).len(), 16);
    }

    #[test]
    fn live_keys_are_excluded_from_the_hash_input() {
        let conf = "brokerId=0\nbrokerRole=SLAVE\nnamesrvAddr=a:9876\nlistenPort=10911\n";
        assert_eq!(restart_relevant(conf), "listenPort=10911");
    }

    #[test]
    fn a_fenced_master_takes_a_spare_id() {
        let ids: Vec<_> = fenced_identities(3, 1)
            .iter()
            .map(|m| m.broker_id)
            .collect();
        assert_eq!(ids, [1, 3, 2]);
    }
}
