//! The operator's admin client (`operator::admin::RemotingAdmin`) against real
//! `rmq-nameserver` and `rmq-broker` processes, for every request the operator sends.
//! The operator's reconcile tests use a fake `Admin`; this suite is
//! what proves the real broker accepts what the operator asks.
//!
//! [`Recording`] implements the `Admin` trait by delegating to the real client and
//! noting each call, so a request added to the trait does not compile here until it
//! is exercised, and the test fails unless every method ran against a real process.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use e2e::NameServer;
use e2e::broker_harness::TempBroker;
use e2e::nameserver::Options;
use e2e::wait::{eventually, eventually_ok, runtime};
use futures::future::BoxFuture;
use operator::admin::{
    Admin, AdminError, ClusterInfo, EpochCache, HaStatus, PeerAccess, RemotingAdmin, RoleChange,
    RuntimeInfo, TopicConfig, ha::HaRole,
};

const CLUSTER: &str = "TestCluster";
const BROKER_NAME: &str = "broker-e2e";

/// The real client, noting which trait methods were called.
struct Recording {
    inner: RemotingAdmin,
    seen: Mutex<BTreeSet<&'static str>>,
}

impl Recording {
    fn note(&self, name: &'static str) {
        self.seen.lock().expect("lock").insert(name);
    }
}

impl Admin for Recording {
    /// Not a request: the signing / TLS variant of the real client, unrecorded.
    fn scoped(&self, access: PeerAccess) -> std::sync::Arc<dyn Admin> {
        self.inner.scoped(access)
    }
    fn cluster_info<'a>(
        &'a self,
        namesrv: &'a str,
    ) -> BoxFuture<'a, Result<ClusterInfo, AdminError>> {
        self.note("cluster_info");
        self.inner.cluster_info(namesrv)
    }
    fn create_topic<'a>(
        &'a self,
        broker: &'a str,
        config: &'a TopicConfig,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        self.note("create_topic");
        self.inner.create_topic(broker, config)
    }
    fn delete_topic_in_broker<'a>(
        &'a self,
        broker: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        self.note("delete_topic_in_broker");
        self.inner.delete_topic_in_broker(broker, topic)
    }
    fn delete_topic_in_namesrv<'a>(
        &'a self,
        namesrv: &'a str,
        topic: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        self.note("delete_topic_in_namesrv");
        self.inner.delete_topic_in_namesrv(namesrv, topic, cluster)
    }
    fn runtime_info<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<RuntimeInfo, AdminError>> {
        self.note("runtime_info");
        self.inner.runtime_info(broker)
    }
    fn topic_configs<'a>(
        &'a self,
        broker: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, TopicConfig>, AdminError>> {
        self.note("topic_configs");
        self.inner.topic_configs(broker)
    }
    fn update_broker_config<'a>(
        &'a self,
        broker: &'a str,
        properties: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        self.note("update_broker_config");
        self.inner.update_broker_config(broker, properties)
    }
    fn ha_status<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<HaStatus, AdminError>> {
        self.note("ha_status");
        self.inner.ha_status(broker)
    }
    fn epoch_cache<'a>(&'a self, broker: &'a str) -> BoxFuture<'a, Result<EpochCache, AdminError>> {
        self.note("epoch_cache");
        self.inner.epoch_cache(broker)
    }
    fn notify_role_changed<'a>(
        &'a self,
        broker: &'a str,
        change: &'a RoleChange,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        self.note("notify_role_changed");
        self.inner.notify_role_changed(broker, change)
    }
}

/// Every method of `operator::admin::Admin`.
const ALL_REQUESTS: &[&str] = &[
    "cluster_info",
    "create_topic",
    "delete_topic_in_broker",
    "delete_topic_in_namesrv",
    "runtime_info",
    "topic_configs",
    "update_broker_config",
    "ha_status",
    "epoch_cache",
    "notify_role_changed",
];

async fn master_of(admin: &Recording, namesrv: &str) -> Option<String> {
    let info = admin.cluster_info(namesrv).await.ok()?;
    info.masters(CLUSTER)
        .into_iter()
        .find(|(name, _)| name == BROKER_NAME)
        .map(|(_, addr)| addr)
}

#[test]
fn every_operator_admin_request_is_served_by_real_processes() {
    let ns1 = NameServer::start(Options::default());
    let ns2 = NameServer::start(Options::default());
    let b = TempBroker::start(Some(ns1.port), &[]);
    let (ns1_addr, ns2_addr) = (
        format!("127.0.0.1:{}", ns1.port),
        format!("127.0.0.1:{}", ns2.port),
    );
    let broker = b.broker.addr();
    let admin = Recording {
        inner: RemotingAdmin::new(Duration::from_secs(5)),
        seen: Mutex::default(),
    };
    runtime().block_on(async {
        eventually(
            Duration::from_secs(15),
            "broker registered with ns1",
            || {
                let (admin, ns1_addr) = (&admin, &ns1_addr);
                async move { master_of(admin, ns1_addr).await.is_some() }
            },
        )
        .await;

        let topic = TopicConfig {
            topic: "OperatorTopic".into(),
            read_queues: 4,
            write_queues: 4,
            perm: 6,
            order: false,
        };
        admin
            .create_topic(&broker, &topic)
            .await
            .expect("create topic");
        // The Topic reconciler's drift check reads back what the broker holds.
        let held = admin.topic_configs(&broker).await.expect("topic configs");
        let got = held.get("OperatorTopic").expect("created topic listed");
        assert_eq!(
            (got.read_queues, got.write_queues, got.perm),
            (4, 4, 6),
            "{got:?}"
        );
        let info = admin.runtime_info(&broker).await.expect("runtime info");
        assert!(info.commit_log_max_offset().is_some(), "{info:?}");
        assert!(info.dispatch_behind_bytes().is_some(), "{info:?}");

        // Scaling the nameservers: the operator pushes the new list, the broker
        // registers with the new nameserver and leaves the old one at once.
        let props = BTreeMap::from([("namesrvAddr".to_owned(), ns2_addr.clone())]);
        admin
            .update_broker_config(&broker, &props)
            .await
            .unwrap_or_else(|e| panic!("namesrvAddr refused: {e}\n{}", b.broker.log()));
        eventually(
            Duration::from_secs(15),
            "broker registered with ns2",
            || {
                let (admin, ns2_addr) = (&admin, &ns2_addr);
                async move { master_of(admin, ns2_addr).await.is_some() }
            },
        )
        .await;
        eventually(Duration::from_secs(15), "broker gone from ns1", || {
            let (admin, ns1_addr) = (&admin, &ns1_addr);
            async move { master_of(admin, ns1_addr).await.is_none() }
        })
        .await;
        // A list that is not host:port is refused and changes nothing.
        let bad = BTreeMap::from([("namesrvAddr".to_owned(), "ns;rm -rf /".to_owned())]);
        assert!(matches!(
            admin.update_broker_config(&broker, &bad).await,
            Err(AdminError::Refused { .. })
        ));
        assert_eq!(master_of(&admin, &ns2_addr).await, Some(broker.clone()));

        admin
            .delete_topic_in_broker(&broker, &topic.topic)
            .await
            .expect("delete topic in broker");
        admin
            .delete_topic_in_namesrv(&ns2_addr, &topic.topic, CLUSTER)
            .await
            .expect("delete topic in nameserver");

        // Failover requests: fence the master at a new epoch, then promote it back.
        let status = admin.ha_status(&broker).await.expect("ha status");
        assert!(status.master, "{status:?}");
        let epochs = admin.epoch_cache(&broker).await.expect("epoch cache");
        let epoch = status.epoch.max(epochs.last_epoch().unwrap_or(0));
        let fence = RoleChange {
            master_address: String::new(),
            master_epoch: epoch + 1,
            sync_state_set_epoch: epoch + 1,
            master_broker_id: operator::admin::ha::NO_MASTER_BROKER_ID,
        };
        admin
            .notify_role_changed(&broker, &fence)
            .await
            .expect("fence");
        let fenced = admin.ha_status(&broker).await.expect("ha status");
        assert_eq!(fenced.role, HaRole::Slave, "{fenced:?}");
        // The operator promotes a member by the id it registers with (GET_BROKER_HA_STATUS):
        // a fenced former master configured as brokerId 0 registers as 1, and "master is
        // brokerId 0" would name the group's old master, not this broker.
        let promote = RoleChange {
            master_address: broker.clone(),
            master_epoch: epoch + 2,
            sync_state_set_epoch: epoch + 2,
            master_broker_id: fenced.broker_id,
        };
        admin
            .notify_role_changed(&broker, &promote)
            .await
            .expect("promote");
        // Promotion completes once dispatch covers every replicated byte.
        let promoted = eventually_ok(Duration::from_secs(10), "the promotion", || async {
            let s = admin.ha_status(&broker).await.expect("ha status");
            if s.master {
                Ok(s)
            } else {
                Err(format!("{s:?}"))
            }
        })
        .await;
        assert!(promoted.master, "{promoted:?}");
        assert_eq!(promoted.epoch, epoch + 2);
    });
    let seen = admin.seen.lock().expect("lock").clone();
    let missing: Vec<_> = ALL_REQUESTS.iter().filter(|r| !seen.contains(*r)).collect();
    assert!(missing.is_empty(), "requests not exercised: {missing:?}");
}

/// A nameserver with ACL on refuses the operator's unsigned route deletion and accepts
/// it signed with an admin account of its own file (`NameServer`
/// `spec.security.adminCredentials`).
#[test]
fn a_nameserver_with_acl_takes_route_deletions_only_signed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl,
        "accounts:\n  - accessKey: nsAdmin\n    secretKey: nsAdminSecret\n    admin: true\n  \
         - accessKey: brokerAcct\n    secretKey: brokerSecret\n    admin: true\n",
    )
    .expect("write ACL");
    let ns = NameServer::start(
        Options::default()
            .config("aclEnable", "true")
            .config("aclFile", acl.display()),
    );
    let b = TempBroker::start(
        Some(ns.port),
        &[("accessKey", "brokerAcct"), ("secretKey", "brokerSecret")],
    );
    let ns_addr = format!("127.0.0.1:{}", ns.port);
    let broker = b.broker.addr();
    let unsigned = RemotingAdmin::new(Duration::from_secs(5));
    let signed = unsigned.scoped(PeerAccess {
        credentials: Some(security::sign::Credentials::new("nsAdmin", "nsAdminSecret")),
        tls: None,
    });
    let topic = TopicConfig {
        topic: "RoutedTopic".into(),
        read_queues: 2,
        write_queues: 2,
        perm: 6,
        order: false,
    };
    runtime().block_on(async {
        let ns_client = e2e::Client::connect(ns.port).await.expect("connect ns");
        let route_code = || async {
            let route = e2e::broker_harness::with_fields(
                protocol::code::request::GET_ROUTEINFO_BY_TOPIC,
                &[("topic", "RoutedTopic".to_owned())],
            );
            ns_client.request(route).await.expect("route").code
        };
        unsigned
            .create_topic(&broker, &topic)
            .await
            .expect("create topic on a broker without ACL");
        eventually(Duration::from_secs(15), "route registered", || async {
            route_code().await == protocol::code::response::SUCCESS
        })
        .await;

        // As the Topic reconcile deletes: from the brokers first, then from the routes.
        unsigned
            .delete_topic_in_broker(&broker, &topic.topic)
            .await
            .expect("delete topic in broker");
        let refused = unsigned
            .delete_topic_in_namesrv(&ns_addr, &topic.topic, CLUSTER)
            .await;
        assert!(
            matches!(
                refused,
                Err(AdminError::Refused {
                    code: protocol::code::response::NO_PERMISSION,
                    ..
                })
            ),
            "{refused:?}"
        );
        assert_eq!(route_code().await, protocol::code::response::SUCCESS);

        signed
            .cluster_info(&ns_addr)
            .await
            .expect("signed cluster info");
        signed
            .delete_topic_in_namesrv(&ns_addr, &topic.topic, CLUSTER)
            .await
            .expect("signed route deletion");
        assert_eq!(
            route_code().await,
            protocol::code::response::TOPIC_NOT_EXIST
        );
    });
}

/// A broker with `adminSecret` (what the operator's pods get as `RMQ_ADMIN_SECRET`)
/// refuses the operator's unsigned role change and config push, and serves both signed
/// the way the operator signs for a Broker without `acl`: the first secret of the list,
/// as `rmq-admin`.
#[test]
fn a_broker_with_an_admin_secret_takes_role_changes_only_signed_with_it() {
    let secret = "9f2c4e6a8b0d1f3e5a7c9e1b3d5f7a9c";
    let b = TempBroker::start(None, &[("adminSecret", secret)]);
    let broker = b.broker.addr();
    let unsigned = RemotingAdmin::new(Duration::from_secs(5));
    let signed = unsigned.scoped(PeerAccess {
        credentials: security::admin_secret::signer(secret).expect("valid list"),
        tls: None,
    });
    runtime().block_on(async {
        let status = signed.ha_status(&broker).await.expect("ha status");
        let keep_master = RoleChange {
            master_address: broker.clone(),
            master_epoch: status.epoch + 1,
            sync_state_set_epoch: status.epoch + 1,
            master_broker_id: status.broker_id,
        };
        let push = BTreeMap::from([("longPollingEnable".to_owned(), "true".to_owned())]);
        match unsigned.notify_role_changed(&broker, &keep_master).await {
            Err(AdminError::Refused { code, remark, .. }) => {
                assert_eq!(code, protocol::code::response::NO_PERMISSION);
                assert!(remark.contains("adminSecret"), "{remark}");
            }
            other => panic!("unsigned role change: {other:?}"),
        }
        assert!(matches!(
            unsigned.update_broker_config(&broker, &push).await,
            Err(AdminError::Refused { .. })
        ));
        signed
            .notify_role_changed(&broker, &keep_master)
            .await
            .expect("signed role change");
        signed
            .update_broker_config(&broker, &push)
            .await
            .expect("signed config push");
        let after = signed.ha_status(&broker).await.expect("ha status");
        assert_eq!(after.epoch, status.epoch + 1, "{after:?}");
        assert!(after.master, "{after:?}");
    });
}
