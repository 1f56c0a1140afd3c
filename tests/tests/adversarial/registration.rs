//! Fake master registrations on the nameserver. Before, one anonymous REGISTER_BROKER
//! under a real group's name with `masterEpoch=i32::MAX` kept the real master out of
//! the route for the whole epoch retention (24 h), however briefly the attacker stayed.
//! Open mode (no ACL, no `adminSecret`): the attacker's epoch fences only while it is
//! connected, and the real master's next registration takes the route back. With
//! `adminSecret` on the nameserver: unsigned or wrongly signed (un)registrations are
//! refused, and a real broker signing with the secret (the new one of a rotation) keeps
//! its route throughout.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use e2e::broker::FakeBroker;
use e2e::broker_harness::{BrokerProcess, TempBroker, with_fields};
use e2e::nameserver::Options;
use e2e::wait::eventually;
use e2e::{Client, NameServer};
use protocol::RemotingCommand;
use protocol::body::ClusterInfo;
use protocol::code::{request, response};
use security::admin_secret::ADMIN_ACCESS_KEY;
use security::sign::{Credentials, sign_request};

use crate::common::{metric, victim_is_served};

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// The test broker's cluster and group names (`broker_harness`).
const CLUSTER: &str = "TestCluster";
const GROUP: &str = "broker-e2e";
const OLD: &str = "old-namesrv-secret-0123456789";
const NEW: &str = "new-namesrv-secret-0123456789";

/// The address the nameserver routes the group's brokerId 0 to.
async fn master_of_group(ns: &NameServer) -> Option<String> {
    let c = Client::connect(ns.port).await.ok()?;
    let r = c
        .request(RemotingCommand::bare_request(
            request::GET_BROKER_CLUSTER_INFO,
        ))
        .await
        .ok()?;
    let info = ClusterInfo::decode(&r.body).ok()?;
    info.broker_addr_table
        .get(GROUP)?
        .broker_addrs
        .get(&0)
        .cloned()
}

async fn routed_to(ns: &NameServer, addr: &str, what: &str) {
    eventually(Duration::from_secs(30), what, || async {
        master_of_group(ns).await.as_deref() == Some(addr)
    })
    .await;
}

/// A topic change makes the broker register at once instead of at its next period.
async fn nudge_registration(b: &BrokerProcess, topic: &str, secret: Option<&str>) {
    let c = Client::connect(b.port).await.expect("broker connects");
    let mut create = with_fields(
        request::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", topic.to_owned()),
            ("defaultTopic", "TBW102".to_owned()),
            ("readQueueNums", "1".to_owned()),
            ("writeQueueNums", "1".to_owned()),
            ("perm", "6".to_owned()),
            ("topicFilterType", "SINGLE_TAG".to_owned()),
            ("topicSysFlag", "0".to_owned()),
            ("order", "false".to_owned()),
        ],
    );
    if let Some(secret) = secret {
        sign_request(
            &mut create,
            &Credentials::new(ADMIN_ACCESS_KEY, secret).stamped(),
        );
    }
    let r = c.request(create).await.expect("create answered");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
}

fn fake_master(addr: &str) -> FakeBroker {
    FakeBroker::new(CLUSTER, GROUP, addr, 0)
        .topic("Hijacked", 4)
        .epoch(i32::MAX)
}

#[test]
fn an_anonymous_epoch_fences_the_real_master_only_while_its_sender_is_connected() {
    let rt = e2e::wait::runtime();
    let mut ns = NameServer::start(Options::default());
    let mut b = TempBroker::start(Some(ns.port), &[]);
    let real = format!("127.0.0.1:{}", b.broker.port);
    rt.block_on(async {
        routed_to(&ns, &real, "the real master registered").await;
        let attacker = Client::connect_from(ATTACKER, ns.port)
            .await
            .expect("attacker connects");
        let r = attacker
            .request(fake_master("127.0.0.2:10911").register(false))
            .await
            .expect("answered");
        // Open mode: accepted, as any registration is (the documented weakness).
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        attacker.close().await;
        // Its epoch goes with it: the real master's next registration is routed.
        nudge_registration(&b.broker, "AfterAttack", None).await;
        routed_to(&ns, &real, "the real master routed again").await;
        assert!(ns.running(), "the nameserver died; log:\n{}", ns.log());
        victim_is_served(&mut b.broker).await;
    });
}

#[test]
fn with_an_admin_secret_unsigned_registrations_are_refused_and_the_signed_master_stays() {
    let rt = e2e::wait::runtime();
    // A rotation in progress: the nameserver accepts both, the broker signs with NEW.
    let mut ns =
        NameServer::start(Options::default().config("adminSecret", format!("{OLD},{NEW}")));
    let broker_secrets = format!("{NEW},{OLD}");
    let mut b = TempBroker::start(Some(ns.port), &[("adminSecret", &broker_secrets)]);
    let real = format!("127.0.0.1:{}", b.broker.port);
    rt.block_on(async {
        routed_to(&ns, &real, "the signed master registered").await;
        let attacker = Client::connect_from(ATTACKER, ns.port)
            .await
            .expect("attacker connects");
        let mut wrong = fake_master("127.0.0.2:10911").register(false);
        sign_request(
            &mut wrong,
            &Credentials::new(ADMIN_ACCESS_KEY, "not-the-namesrv-secret-42"),
        );
        let unregister_real = {
            let mut fb = FakeBroker::new(CLUSTER, GROUP, &real, 0);
            fb.master_epoch = None;
            fb.unregister()
        };
        for attempt in [
            fake_master("127.0.0.2:10911").register(false),
            wrong,
            unregister_real,
        ] {
            let r = attacker.request(attempt).await.expect("answered");
            assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
            assert!(
                r.remark.as_deref().unwrap_or("").contains("adminSecret"),
                "{:?}",
                r.remark
            );
        }
        let refused = metric(
            ns.http_port,
            "rmq_namesrv_limit_refusals_total{limit=\"adminSecret\"}",
        )
        .await;
        assert_eq!(refused, 3.0);
        assert_eq!(master_of_group(&ns).await.as_deref(), Some(real.as_str()));
        // The broker's next (signed) registration is still accepted.
        nudge_registration(&b.broker, "AfterAttack", Some(NEW)).await;
        routed_to(&ns, &real, "the signed master stays routed").await;
        assert_eq!(
            metric(
                ns.http_port,
                "rmq_namesrv_limit_refusals_total{limit=\"adminSecret\"}",
            )
            .await,
            3.0,
            "a signed registration was refused; log:\n{}",
            ns.log()
        );
        assert!(ns.running(), "the nameserver died; log:\n{}", ns.log());
        victim_is_served(&mut b.broker).await;
    });
}

/// Someone who captured the real master's signed unregistration on the wire sends it
/// again after the master registered anew: the nonce was already admitted, so the
/// nameserver refuses it and the master stays routed. A signature stamped outside
/// `adminSignatureWindowMillis` is refused too.
#[test]
fn a_captured_signed_unregistration_cannot_be_replayed() {
    let rt = e2e::wait::runtime();
    let mut ns = NameServer::start(Options::default().config("adminSecret", OLD));
    let mut b = TempBroker::start(Some(ns.port), &[("adminSecret", OLD)]);
    let real = format!("127.0.0.1:{}", b.broker.port);
    rt.block_on(async {
        routed_to(&ns, &real, "the signed master registered").await;
        let admin = Client::connect(ns.port).await.expect("connects");
        let mut captured = {
            let mut fb = FakeBroker::new(CLUSTER, GROUP, "127.0.0.3:10911", 1);
            fb.master_epoch = None;
            fb.unregister()
        };
        sign_request(
            &mut captured,
            &Credentials::new(ADMIN_ACCESS_KEY, OLD).stamped(),
        );
        let r = admin.request(captured.clone()).await.expect("answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);

        let attacker = Client::connect_from(ATTACKER, ns.port)
            .await
            .expect("attacker connects");
        let r = attacker.request(captured).await.expect("answered");
        assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
        assert!(
            r.remark.as_deref().unwrap_or("").contains("replay"),
            "{:?}",
            r.remark
        );
        // A stamp an hour old, correctly signed, is outside the window.
        let mut old = {
            let mut fb = FakeBroker::new(CLUSTER, GROUP, &real, 0);
            fb.master_epoch = None;
            fb.unregister()
        };
        let hour_ago = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis()
            - 3_600_000;
        old.ext_fields
            .insert_static(security::freshness::TIMESTAMP, hour_ago.to_string());
        old.ext_fields
            .insert_static(security::freshness::NONCE, "an-old-capture");
        sign_request(&mut old, &Credentials::new(ADMIN_ACCESS_KEY, OLD));
        let r = attacker.request(old).await.expect("answered");
        assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
        assert_eq!(
            metric(
                ns.http_port,
                "rmq_namesrv_limit_refusals_total{limit=\"adminSignatureWindowMillis\"}",
            )
            .await,
            1.0
        );
        assert_eq!(master_of_group(&ns).await.as_deref(), Some(real.as_str()));
        assert!(ns.running(), "the nameserver died; log:\n{}", ns.log());
        victim_is_served(&mut b.broker).await;
    });
}
