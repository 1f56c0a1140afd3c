//! Registries keyed by what a client names: compiled SQL92 filters, client groups and
//! their subscriptions, queue locks, committed offsets. Each is bounded (a refusal names
//! the key), never evicts a live entry to make room, and shrinks when its owners go.

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, pull, send_v2, with_fields};
use e2e::wait::{eventually, runtime};
use protocol::RemotingCommand;
use protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, LockBatchRequestBody,
    LockBatchResponseBody, MessageModel, MessageQueue,
};
use protocol::code::{request, response};

use crate::common::{heartbeat, metric, refusals, sql_subscription, victim_is_served};

/// One HEART_BEAT of `groups` consumer groups, each subscribing `subs` topics with a
/// distinct SQL92 selector of about 1.4 KB.
fn sql_flood(client: &str, first_group: usize, groups: usize, subs: usize) -> RemotingCommand {
    let consumers = (first_group..first_group + groups)
        .map(|g| ConsumerData {
            group_name: format!("flood-{g}"),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            subscription_data_set: (0..subs)
                .map(|t| {
                    let selector = (0..60)
                        .map(|k| format!("p{k} = 'g{g}t{t}k{k}'"))
                        .collect::<Vec<_>>()
                        .join(" OR ");
                    sql_subscription(&format!("T{t}"), &selector, 1)
                })
                .collect(),
            unit_mode: false,
        })
        .collect();
    let data = HeartbeatData {
        client_id: client.to_owned(),
        producer_data_set: Vec::new(),
        consumer_data_set: consumers,
    };
    RemotingCommand::bare_request(request::HEART_BEAT).with_body(protocol::body::encode(&data))
}

/// The reported growth: heartbeats carrying 20,000 distinct SQL92 subscriptions took
/// 1.5 GB that stayed after the connections closed. Now the compiled filters stay within
/// `filterRegistryMaxBytes`, a victim's filter registered first keeps working, and
/// everything the attacker registered goes when its connection closes.
#[test]
fn sql92_subscriptions_cannot_grow_the_broker_without_bound() {
    let mut b = TempBroker::start(
        None,
        &[
            ("enablePropertyFilter", "true"),
            ("filterRegistryMaxBytes", &(16 << 20).to_string()),
        ],
    );
    runtime().block_on(async {
        let victim = Client::connect(b.broker.port).await.expect("victim");
        let r = victim
            .request(send_v2("T0", 0, b"x", "p0\u{1}keep"))
            .await
            .expect("send");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = victim
            .request(heartbeat(
                "127.0.0.1@victim",
                "victim-group",
                vec![sql_subscription("T0", "p0 = 'keep'", 1)],
            ))
            .await
            .expect("victim heartbeat");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let baseline = b.broker.anon_rss_kib().expect("rss");

        let attacker = Client::connect(b.broker.port).await.expect("attacker");
        let mut refused = 0;
        for round in 0..3 {
            let r = attacker
                .request(sql_flood("127.0.0.2@attacker", round * 7, 7, 1000))
                .await
                .expect("flood answered");
            refused += usize::from(r.code != response::SUCCESS);
        }
        assert!(refused > 0, "21,000 subscriptions of 1.4 KB fit 16 MiB?");
        assert!(refusals(b.broker.http_port, "filterRegistryMaxBytes").await >= 1.0);
        let held = metric(b.broker.http_port, "rocketmq_broker_filter_registry_bytes").await;
        assert!(held <= f64::from(16 << 20), "registry holds {held} bytes");
        let grown_mib = b
            .broker
            .anon_rss_kib()
            .expect("rss")
            .saturating_sub(baseline)
            / 1024;
        // Registry (16 MiB) + the clients' subscription tables (128 MiB at most) +
        // decoding buffers; before the bound this attack took 1.5 GB.
        assert!(grown_mib < 400, "resident memory grew {grown_mib} MiB");

        // The victim's filter, registered first, is still served.
        let mut p = pull("victim-group", "T0", 0, 0, 32, None, "");
        p.ext_fields.insert("sysFlag", "0");
        p.ext_fields.insert("expressionType", "SQL92");
        let r = victim.request(p).await.expect("victim pull");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);

        // The attacker leaves: its groups and filters go.
        attacker.close().await;
        eventually(
            Duration::from_secs(20),
            "attacker's entries dropped",
            || async {
                metric(
                    b.broker.http_port,
                    "rocketmq_broker_filter_registry_entries",
                )
                .await
                    == 1.0
                    && metric(b.broker.http_port, "rocketmq_broker_client_groups").await == 1.0
            },
        )
        .await;
        victim_is_served(&mut b.broker).await;
    });
}

/// One connection naming ever new groups: capped at `maxGroupsPerConnection`, and the
/// broker-wide table at `maxClientGroups`; other connections keep their groups.
#[test]
fn group_memberships_are_capped_per_connection_and_broker_wide() {
    let mut b = TempBroker::start(
        None,
        &[
            ("maxGroupsPerConnection", "50"),
            ("maxClientGroups", "100"),
            ("maxHeartbeatGroups", "40"),
        ],
    );
    runtime().block_on(async {
        let hb = |first: usize| {
            let data = HeartbeatData {
                client_id: "127.0.0.2@attacker".to_owned(),
                producer_data_set: Vec::new(),
                consumer_data_set: (first..first + 40)
                    .map(|g| ConsumerData {
                        group_name: format!("g{g}"),
                        consume_type: ConsumeType::ConsumePassively,
                        message_model: MessageModel::Clustering,
                        consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                        subscription_data_set: Vec::new(),
                        unit_mode: false,
                    })
                    .collect(),
            };
            RemotingCommand::bare_request(request::HEART_BEAT)
                .with_body(protocol::body::encode(&data))
        };
        let a = Client::connect(b.broker.port).await.expect("connect");
        assert_eq!(a.request(hb(0)).await.unwrap().code, response::SUCCESS);
        // Refreshing the same groups is no growth.
        assert_eq!(a.request(hb(0)).await.unwrap().code, response::SUCCESS);
        let r = a.request(hb(40)).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert!(
            r.remark
                .unwrap_or_default()
                .contains("maxGroupsPerConnection")
        );
        // Other connections fill the broker-wide table up to its cap.
        let others = [
            Client::connect(b.broker.port).await.unwrap(),
            Client::connect(b.broker.port).await.unwrap(),
        ];
        let r = others[0].request(hb(40)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = others[1].request(hb(80)).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
        assert!(r.remark.unwrap_or_default().contains("maxClientGroups"));
        assert!(refusals(b.broker.http_port, "maxGroupsPerConnection").await >= 1.0);
        assert!(refusals(b.broker.http_port, "maxClientGroups").await >= 1.0);
        // The first connection's groups are untouched; when it leaves, room is made.
        a.close().await;
        eventually(
            Duration::from_secs(20),
            "room after the owner left",
            || async {
                others[1]
                    .request(hb(80))
                    .await
                    .is_ok_and(|r| r.code == response::SUCCESS)
            },
        )
        .await;
        victim_is_served(&mut b.broker).await;
    });
}

/// Offsets and queue locks of queues that do not exist, or of groups the broker does
/// not know, are not kept: those tables are keyed by what the client names.
#[test]
fn offsets_and_locks_of_unknown_queues_are_not_kept() {
    let mut b = TempBroker::start(None, &[("autoCreateSubscriptionGroup", "false")]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c.request(send_v2("Real", 0, b"x", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let commit = |group: &str, topic: &str, queue: i32| {
            with_fields(
                request::UPDATE_CONSUMER_OFFSET,
                &[
                    ("consumerGroup", group.to_owned()),
                    ("topic", topic.to_owned()),
                    ("queueId", queue.to_string()),
                    ("commitOffset", "1".to_owned()),
                ],
            )
        };
        let r = c.request(commit("nobody", "Real", 0)).await.unwrap();
        assert_eq!(
            r.code,
            response::SUBSCRIPTION_GROUP_NOT_EXIST,
            "{:?}",
            r.remark
        );
        // A known group (created by an admin request), unknown topic or queue.
        let r = c
            .request(
                with_fields(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, &[])
                    .with_body(br#"{"groupName":"known","consumeEnable":true}"#.to_vec()),
            )
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        for (topic, queue) in [("NoSuchTopic", 0), ("Real", 4096), ("Real", -1)] {
            let r = c.request(commit("known", topic, queue)).await.unwrap();
            assert_eq!(
                r.code,
                response::TOPIC_NOT_EXIST,
                "{topic}/{queue}: {:?}",
                r.remark
            );
        }
        let r = c.request(commit("known", "Real", 0)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);

        let lock = |group: &str, topic: &str, broker_name: &str| {
            let body = LockBatchRequestBody {
                consumer_group: group.to_owned(),
                client_id: "127.0.0.2@attacker".to_owned(),
                only_this_broker: false,
                mq_set: [MessageQueue {
                    topic: topic.into(),
                    broker_name: broker_name.into(),
                    queue_id: 0,
                }]
                .into_iter()
                .collect(),
            };
            RemotingCommand::bare_request(request::LOCK_BATCH_MQ)
                .with_body(protocol::body::encode(&body))
        };
        for (group, topic, broker_name, locks) in [
            ("known", "Real", "broker-e2e", true),
            ("nobody", "Real", "broker-e2e", false),
            ("known", "NoSuchTopic", "broker-e2e", false),
            ("known", "Real", "another-broker", false),
        ] {
            let r = c.request(lock(group, topic, broker_name)).await.unwrap();
            assert_eq!(r.code, response::SUCCESS);
            let body: LockBatchResponseBody = protocol::body::decode(&r.body).unwrap();
            assert_eq!(
                !body.lock_ok_mq_set.is_empty(),
                locks,
                "{group} {topic} {broker_name}"
            );
        }
        victim_is_served(&mut b.broker).await;
    });
}

/// Topics and subscription groups are persisted and keyed by what the client names:
/// sends to ever new topics (or new groups' retry topics), heartbeats of ever new groups
/// and admin creates all stop at `maxTopics` / `maxSubscriptionGroups`; what exists keeps
/// working.
#[test]
fn topics_and_groups_cannot_be_minted_without_bound() {
    let mut b = TempBroker::start(
        None,
        &[("maxTopics", "40"), ("maxSubscriptionGroups", "30")],
    );
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        // The victim's topic exists before the attack.
        let r = c
            .request(send_v2("VictimTopic", 0, b"v", ""))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let mut refused = 0;
        for i in 0..100 {
            let r = c
                .request(send_v2(&format!("Minted{i}"), 0, b"x", ""))
                .await
                .unwrap();
            if r.code != response::SUCCESS {
                assert!(r.remark.unwrap_or_default().contains("maxTopics"));
                refused += 1;
            }
        }
        assert!(refused >= 60, "only {refused} of 100 new topics refused");
        for i in 0..40 {
            let r = c
                .request(heartbeat(
                    &format!("127.0.0.2@m{i}"),
                    &format!("minted-group-{i}"),
                    vec![],
                ))
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        let r = c
            .request(send_v2("%RETRY%made-up-group", 0, b"x", ""))
            .await
            .unwrap();
        assert_eq!(
            r.code,
            response::SUBSCRIPTION_GROUP_NOT_EXIST,
            "{:?}",
            r.remark
        );
        let r = c
            .request(
                with_fields(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, &[])
                    .with_body(br#"{"groupName":"admin-group","consumeEnable":true}"#.to_vec()),
            )
            .await
            .unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
        assert!(
            r.remark
                .unwrap_or_default()
                .contains("maxSubscriptionGroups")
        );
        let r = c
            .request(with_fields(
                request::UPDATE_AND_CREATE_TOPIC,
                &[
                    ("topic", "AdminMinted".to_owned()),
                    ("defaultTopic", "TBW102".to_owned()),
                    ("readQueueNums", "1".to_owned()),
                    ("writeQueueNums", "1".to_owned()),
                    ("perm", "6".to_owned()),
                    ("topicFilterType", "SINGLE_TAG".to_owned()),
                    ("order", "false".to_owned()),
                ],
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
        assert!(refusals(b.broker.http_port, "maxTopics").await >= 60.0);
        assert!(refusals(b.broker.http_port, "maxSubscriptionGroups").await >= 1.0);
        let topics = std::fs::read_to_string(b.broker.dir().join("store/config/topics.json"))
            .expect("topics.json");
        assert!(
            topics.matches("\"topicName\"").count() <= 40 + 2 * 30,
            "{topics}"
        );
        victim_is_served(&mut b.broker).await;
    });
}

/// The shape of one heartbeat and what the broker keeps of it: subscriptions per group
/// (`maxSubscriptionsPerGroup`), their bytes in all (`maxClientSubscriptionBytes`), and
/// memberships a connection stops refreshing, which go after `channelExpiredTimeout`.
#[test]
fn heartbeat_contents_are_bounded_and_expire() {
    let mut b = TempBroker::start(
        None,
        &[
            ("maxSubscriptionsPerGroup", "8"),
            ("maxClientSubscriptionBytes", "65536"),
            ("channelExpiredTimeout", "1500"),
        ],
    );
    runtime().block_on(async {
        let tag_subs = |n: usize, width: usize| -> Vec<protocol::body::SubscriptionData> {
            (0..n)
                .map(|t| {
                    let mut s = sql_subscription(&format!("T{t}"), &"A||".repeat(width), 1);
                    s.expression_type = "TAG".to_owned();
                    s
                })
                .collect()
        };
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c
            .request(heartbeat("127.0.0.2@a", "wide", tag_subs(9, 1)))
            .await
            .unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
        assert!(
            r.remark
                .unwrap_or_default()
                .contains("maxSubscriptionsPerGroup")
        );
        // 8 subscriptions of about 3 KB per group: a handful of groups fill 64 KiB.
        let mut refused = None;
        for g in 0..20 {
            let r = c
                .request(heartbeat(
                    "127.0.0.2@a",
                    &format!("fat-{g}"),
                    tag_subs(8, 1000),
                ))
                .await
                .unwrap();
            if r.code != response::SUCCESS {
                refused = r.remark;
                break;
            }
        }
        let remark = refused.expect("64 KiB of subscriptions filled");
        assert!(remark.contains("maxClientSubscriptionBytes"), "{remark}");
        assert!(refusals(b.broker.http_port, "maxClientSubscriptionBytes").await >= 1.0);
        // This connection stops heart-beating: its memberships expire and the connection,
        // left with none, is closed (4.9's scanNotActiveChannel).
        let groups = metric(b.broker.http_port, "rocketmq_broker_client_groups").await;
        assert!(groups >= 1.0);
        eventually(Duration::from_secs(20), "memberships expired", || async {
            metric(b.broker.http_port, "rocketmq_broker_client_groups").await == 0.0
        })
        .await;
        assert!(
            c.wait_closed(Duration::from_secs(10)).await,
            "expired connection still open"
        );
        victim_is_served(&mut b.broker).await;
    });
}
