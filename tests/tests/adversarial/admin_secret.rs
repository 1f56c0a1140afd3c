//! Role changes with the ACL off: once `adminSecret` is set, an anonymous
//! NOTIFY_BROKER_ROLE_CHANGED (or UPDATE_BROKER_CONFIG) from another host is refused and
//! the master keeps serving writes; the same request signed with any secret of the list
//! (old or new, during a rotation) is served.

use e2e::Client;
use e2e::broker_harness::{TempBroker, ha_status, with_fields};
use e2e::wait::runtime;
use protocol::RemotingCommand;
use protocol::code::{request, response};
use security::admin_secret::ADMIN_ACCESS_KEY;
use security::sign::{Credentials, sign_request};

use crate::common::{refusals, victim_is_served};

const OLD: &str = "old-admin-secret-0123456789";
const NEW: &str = "new-admin-secret-0123456789";

/// NOTIFY_BROKER_ROLE_CHANGED naming `master_id` as master at `epoch`.
fn role_change(master_id: i64, epoch: i32) -> RemotingCommand {
    with_fields(
        request::NOTIFY_BROKER_ROLE_CHANGED,
        &[
            ("masterAddress", "127.0.0.1:1".to_owned()),
            ("masterHaAddress", "127.0.0.1:2".to_owned()),
            ("masterEpoch", epoch.to_string()),
            ("syncStateSetEpoch", epoch.to_string()),
            ("masterBrokerId", master_id.to_string()),
        ],
    )
}

fn signed(mut cmd: RemotingCommand, secret: &str) -> RemotingCommand {
    sign_request(
        &mut cmd,
        &Credentials::new(ADMIN_ACCESS_KEY, secret).stamped(),
    );
    cmd
}

fn config_update(text: &str) -> RemotingCommand {
    RemotingCommand::bare_request(request::UPDATE_BROKER_CONFIG).with_body(text.as_bytes().to_vec())
}

async fn is_master(c: &Client) -> bool {
    ha_status(c).await["master"].as_bool() == Some(true)
}

#[test]
fn unsigned_role_changes_are_refused_and_either_rotated_secret_is_accepted() {
    let secrets = format!("{OLD},{NEW}");
    let mut b = TempBroker::start(None, &[("adminSecret", &secrets)]);
    runtime().block_on(async {
        let attacker_ip = std::net::IpAddr::from([127, 0, 0, 2]);
        let attacker = Client::connect_from(attacker_ip, b.broker.port)
            .await
            .expect("attacker connects");
        let admin = Client::connect(b.broker.port)
            .await
            .expect("admin connects");
        assert!(is_master(&admin).await);

        // Anonymous, signed with a wrong secret, or signed by an ACL-style account of
        // another name: each demotion is refused and counted.
        let forged = {
            let mut cmd = role_change(1, i32::MAX);
            sign_request(&mut cmd, &Credentials::new("someone", OLD));
            cmd
        };
        for attempt in [
            role_change(1, i32::MAX),
            signed(role_change(1, i32::MAX), "not-the-admin-secret-42"),
            forged,
            config_update("brokerPermission=4\n"),
        ] {
            let r = attacker.request(attempt).await.expect("answered");
            assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
            assert!(
                r.remark.as_deref().unwrap_or("").contains("adminSecret"),
                "{:?}",
                r.remark
            );
        }
        assert_eq!(refusals(b.broker.http_port, "adminSecret").await, 4.0);
        assert!(
            is_master(&admin).await,
            "an unsigned request demoted the master"
        );
        victim_is_served(&mut b.broker).await;

        // Signed with the old and the new secret (a rotation in progress): both served.
        let r = admin
            .request(signed(role_change(0, 2), OLD))
            .await
            .expect("answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = admin
            .request(signed(config_update("longPollingEnable=true\n"), NEW))
            .await
            .expect("answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = admin
            .request(signed(role_change(0, 3), NEW))
            .await
            .expect("answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let status = ha_status(&admin).await;
        assert_eq!(status["epoch"].as_i64(), Some(3), "{status}");
        assert!(is_master(&admin).await);
        victim_is_served(&mut b.broker).await;
    });
}

/// Topic, group and offset administration are protected like role changes: unsigned
/// from another host, each is refused and nothing changes; signed, each is served.
#[test]
fn unsigned_topic_group_and_offset_administration_is_refused() {
    let mut b = TempBroker::start(None, &[("adminSecret", NEW)]);
    runtime().block_on(async {
        let attacker = Client::connect_from(std::net::IpAddr::from([127, 0, 0, 2]), b.broker.port)
            .await
            .expect("attacker connects");
        let admin = Client::connect(b.broker.port)
            .await
            .expect("admin connects");
        // The victim's topic exists (auto-created by its first send).
        victim_is_served(&mut b.broker).await;
        let read_only_topic = with_fields(
            request::UPDATE_AND_CREATE_TOPIC,
            &[
                ("topic", "VictimTopic".to_owned()),
                ("defaultTopic", "TBW102".to_owned()),
                ("readQueueNums", "4".to_owned()),
                ("writeQueueNums", "4".to_owned()),
                ("perm", "4".to_owned()),
                ("topicFilterType", "SINGLE_TAG".to_owned()),
                ("topicSysFlag", "0".to_owned()),
                ("order", "false".to_owned()),
            ],
        );
        let delete_topic = with_fields(
            request::DELETE_TOPIC_IN_BROKER,
            &[("topic", "VictimTopic".to_owned())],
        );
        let group = RemotingCommand::bare_request(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(
                br#"{"groupName":"victim_group","consumeEnable":false,"retryQueueNums":1}"#
                    .to_vec(),
            );
        let delete_group = with_fields(
            request::DELETE_SUBSCRIPTIONGROUP,
            &[("groupName", "victim_group".to_owned())],
        );
        let reset = with_fields(
            request::INVOKE_BROKER_TO_RESET_OFFSET,
            &[
                ("topic", "VictimTopic".to_owned()),
                ("group", "victim_group".to_owned()),
                ("timestamp", "0".to_owned()),
                ("isForce", "true".to_owned()),
            ],
        );
        let attempts = [read_only_topic, delete_topic, group, delete_group, reset];
        for attempt in attempts.iter().cloned() {
            let r = attacker.request(attempt).await.expect("answered");
            assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
            assert!(
                r.remark.as_deref().unwrap_or("").contains("adminSecret"),
                "{:?}",
                r.remark
            );
        }
        assert_eq!(refusals(b.broker.http_port, "adminSecret").await, 5.0);
        // Nothing changed: the victim still writes to its topic.
        victim_is_served(&mut b.broker).await;
        // Signed by the administrator, the topic update is served.
        let r = admin
            .request(signed(attempts[0].clone(), NEW))
            .await
            .expect("answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    });
}

/// Without `adminSecret` (a local broker) the documented open mode stays: an unsigned
/// role change is served, as in 4.9.
#[test]
fn without_an_admin_secret_role_changes_stay_open() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connects");
        let r = c.request(role_change(0, 2)).await.expect("answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert!(is_master(&c).await);
        victim_is_served(&mut b.broker).await;
    });
}

/// `rmqctl --admin-secret` (or `RMQ_ADMIN_SECRET`) signs as `rmq-admin`: a config push
/// without it is refused, with it served; the secret never shows in its output.
#[test]
fn rmqctl_signs_with_the_admin_secret() {
    let mut b = TempBroker::start(None, &[("adminSecret", NEW)]);
    let addr = format!("127.0.0.1:{}", b.broker.port);
    let update = [
        "broker",
        "config",
        "update",
        "-b",
        &addr,
        "longPollingEnable=true",
    ];
    let out = e2e::cli::run("rmqctl", &update);
    assert_eq!(out.code, 1, "unsigned rmqctl must be refused: {out:?}");
    assert!(out.stderr.contains("adminSecret"), "{out:?}");
    let signed: Vec<&str> = ["--admin-secret", NEW].into_iter().chain(update).collect();
    let out = e2e::cli::run("rmqctl", &signed);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains(NEW) && !out.stderr.contains(NEW));
    runtime().block_on(victim_is_served(&mut b.broker));
}
