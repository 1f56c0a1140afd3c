//! The third-party `rocketmq-client-rust` producer and pull consumer with ACL credentials
//! (its `AclClientRPCHook`, a Java-compatible signer written independently of ours)
//! against a nameserver and broker with `aclEnable=true`: the right permissions work
//! end to end, a DENY topic refuses sends, and a client without credentials is refused.

#![recursion_limit = "256"]

#[path = "support/rust_client.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use e2e::broker_harness::{BrokerProcess, with_fields};
use e2e::nameserver::Options;
use e2e::{Client, NameServer};
use protocol::code::{request, response};
use rocketmq_client_rust::{
    AclClientRPCHook, DefaultMQProducer, DefaultMQPullConsumer, SessionCredentials,
};
use rocketmq_model::result::SendStatus;
use support::{body_of, client_runtime, eventually, msg, pull_all, runtime, within};

const ACL: &str = r#"
accounts:
  - accessKey: adminUser1
    secretKey: adminSecret1
    admin: true
  - accessKey: appUser01
    secretKey: appSecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [AclOrders=PUB|SUB, AclSecret=DENY]
"#;

fn hook() -> Arc<AclClientRPCHook> {
    Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(
        "appUser01",
        "appSecret01",
    )))
}

async fn producer(namesrv: &str, signed: bool) -> DefaultMQProducer {
    let mut builder = DefaultMQProducer::builder(client_runtime("acl-producer"))
        .producer_group("acl-producer".to_owned())
        .name_server_addr(namesrv.to_owned())
        .send_msg_timeout(5_000)
        .retry_times_when_send_failed(0);
    if signed {
        builder = builder.rpc_hook(hook());
    }
    let mut p = builder.build();
    within("producer start", Duration::from_secs(30), p.start())
        .await
        .expect("producer start");
    p
}

#[test]
fn rust_client_with_acl_credentials() {
    let dir = tempfile::tempdir().expect("temp dir");
    let acl_path = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_path, ACL).expect("write ACL");
    let acl = acl_path.display().to_string();
    let ns = NameServer::start(Options::default());
    let broker = BrokerProcess::start_in(
        dir.path(),
        Some(ns.port),
        &[
            ("aclEnable", "true"),
            ("aclFile", &acl),
            ("autoCreateTopicEnable", "false"),
        ],
    );
    let namesrv = format!("127.0.0.1:{}", ns.port);
    runtime().block_on(async {
        let admin = Client::connect(broker.port).await.expect("connect");
        for topic in ["AclOrders", "AclSecret"] {
            let mut create = with_fields(
                request::UPDATE_AND_CREATE_TOPIC,
                &[
                    ("topic", topic.to_owned()),
                    ("defaultTopic", "TBW102".to_owned()),
                    ("readQueueNums", "2".to_owned()),
                    ("writeQueueNums", "2".to_owned()),
                    ("perm", "6".to_owned()),
                    ("topicFilterType", "SINGLE_TAG".to_owned()),
                    ("order", "false".to_owned()),
                ],
            );
            security::sign::sign_request(
                &mut create,
                &security::sign::Credentials::new("adminUser1", "adminSecret1"),
            );
            let r = admin.request(create).await.expect("create topic");
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        eventually(Duration::from_secs(20), "routes", || async {
            let nsc = Client::connect(ns.port).await.expect("ns");
            let r = nsc
                .request(with_fields(
                    request::GET_ROUTEINFO_BY_TOPIC,
                    &[("topic", "AclSecret".to_owned())],
                ))
                .await
                .expect("route");
            r.code == response::SUCCESS
        })
        .await;

        let p = producer(&namesrv, true).await;
        for i in 0..5 {
            let r = p
                .send_with_timeout(msg("AclOrders", "T", format!("acl-{i}").as_bytes()), 5_000)
                .await
                .unwrap_or_else(|e| panic!("signed send refused: {e:?}\n{}", broker.log()))
                .expect("send result");
            assert_eq!(r.send_status, SendStatus::SendOk);
        }
        let denied = p
            .send_with_timeout(msg("AclSecret", "T", b"nope"), 5_000)
            .await;
        let text = format!("{denied:?}");
        assert!(denied.is_err(), "send to a DENY topic went through: {text}");
        assert!(
            text.contains("no PUB permission on topic AclSecret"),
            "{text}"
        );

        let unsigned = producer(&namesrv, false).await;
        let refused = unsigned
            .send_with_timeout(msg("AclOrders", "T", b"unsigned"), 5_000)
            .await;
        assert!(refused.is_err(), "unsigned send accepted: {refused:?}");

        let consumer = DefaultMQPullConsumer::builder(client_runtime("acl-pull"))
            .consumer_group("AclReaders".to_owned())
            .name_server_addr(namesrv.clone())
            .consumer_pull_timeout(Duration::from_secs(5))
            .rpc_hook(hook())
            .build()
            .expect("pull consumer");
        consumer.start().await.expect("pull consumer start");
        let got = pull_all(&consumer, "AclOrders").await;
        let mut bodies: Vec<String> = got.iter().map(body_of).collect();
        bodies.sort();
        assert_eq!(
            bodies,
            (0..5).map(|i| format!("acl-{i}")).collect::<Vec<_>>(),
            "{}",
            broker.log()
        );
    });
}
