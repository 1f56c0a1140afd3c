//! ACL 1.0 end to end: a nameserver and a broker with `aclEnable=true` sharing one
//! `plain_acl.yml`; requests signed with the broker-side verifier's counterpart
//! (`security::sign`, itself checked against an independent Python signer in
//! `security/tests/python_vectors.rs`) and by `rmqctl`.
#![allow(clippy::unwrap_used)]

#[path = "support/raw_tx.rs"]
mod raw_tx;

use std::path::Path;
use std::time::Duration;

use e2e::broker::FakeBroker;
use e2e::broker_harness::{TempBroker, pull, send_v2, with_fields};
use e2e::nameserver::Options;
use e2e::wait::{eventually, runtime};
use e2e::{Client, NameServer, cli, http};
use protocol::RemotingCommand;
use protocol::code::{request, response};
use security::sign::{Credentials, sign_request};

const ADMIN: (&str, &str) = ("adminUser1", "adminSecret1");
const PRODUCER: (&str, &str) = ("producer01", "producerSecret");
const BROKER: (&str, &str) = ("brokerAcct1", "brokerSecret1");
const SECRETS: [&str; 3] = [ADMIN.1, PRODUCER.1, BROKER.1];

/// The ACL file; `extra_producer_topics` and `white` vary for the hot-reload steps.
fn acl_file(extra_producer_topics: &str, white: &str) -> String {
    format!(
        r#"globalWhiteRemoteAddresses: [{white}]
accounts:
  - accessKey: {}
    secretKey: {}
    admin: true
  - accessKey: {}
    secretKey: {}
    admin: true
  - accessKey: {}
    secretKey: {}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Allowed=PUB|SUB
      - Denied=DENY
{extra_producer_topics}
"#,
        ADMIN.0, ADMIN.1, BROKER.0, BROKER.1, PRODUCER.0, PRODUCER.1
    )
}

fn signed(mut cmd: RemotingCommand, who: (&str, &str)) -> RemotingCommand {
    sign_request(&mut cmd, &Credentials::new(who.0, who.1));
    cmd
}

fn create_topic(topic: &str) -> RemotingCommand {
    with_fields(
        request::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", topic.to_owned()),
            ("defaultTopic", "TBW102".to_owned()),
            ("readQueueNums", "2".to_owned()),
            ("writeQueueNums", "2".to_owned()),
            ("perm", "6".to_owned()),
            ("topicFilterType", "SINGLE_TAG".to_owned()),
            ("topicSysFlag", "0".to_owned()),
            ("order", "false".to_owned()),
        ],
    )
}

fn remark(r: &RemotingCommand) -> &str {
    r.remark.as_deref().unwrap_or("")
}

fn write_acl(path: &Path, text: &str) {
    // Written beside and renamed, as a Secret update or an editor's save would be.
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).expect("write ACL");
    std::fs::rename(&tmp, path).expect("rename ACL");
}

async fn send_code(c: &Client, cmd: RemotingCommand) -> (i32, String) {
    let r = c.request(cmd).await.expect("send");
    (r.code, remark(&r).to_owned())
}

#[test]
fn acl_on_broker_and_nameserver() {
    let dir = tempfile::tempdir().expect("temp dir");
    let acl_path = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_path, acl_file("", "")).expect("write ACL");
    let acl = acl_path.display().to_string();
    let ns = NameServer::start(
        Options::default()
            .config("aclEnable", "true")
            .config("aclFile", &acl)
            .config("aclFileCheckIntervalMs", 200),
    );
    let b = TempBroker::start(
        Some(ns.port),
        &[
            ("aclEnable", "true"),
            ("aclFile", &acl),
            ("aclFileCheckIntervalMs", "200"),
            ("accessKey", BROKER.0),
            ("secretKey", BROKER.1),
            ("autoCreateTopicEnable", "false"),
        ],
    );
    let broker_addr = b.broker.addr();
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let nsc = Client::connect(ns.port).await.expect("connect ns");

        // The broker signs its registration with its account: it shows up.
        eventually(
            Duration::from_secs(10),
            "signed broker registration",
            || async {
                let r = nsc
                    .request(RemotingCommand::bare_request(
                        request::GET_BROKER_CLUSTER_INFO,
                    ))
                    .await
                    .expect("cluster info");
                String::from_utf8_lossy(&r.body).contains(&broker_addr)
            },
        )
        .await;
        // A fake master registering unsigned, or signed by a non-admin, is refused.
        let fake = FakeBroker::new("TestCluster", "broker-e2e", "127.0.0.1:1", 0).topic("X", 1);
        let r = nsc.request(fake.register(false)).await.unwrap();
        assert_eq!(r.code, response::NO_PERMISSION, "{}", remark(&r));
        let r = nsc
            .request(signed(fake.register(false), PRODUCER))
            .await
            .unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        assert!(
            remark(&r).contains("needs an admin account"),
            "{}",
            remark(&r)
        );
        let r = nsc
            .request(signed(fake.unregister(), ("producer01", "wrongSecret")))
            .await
            .unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        // Reads stay open to unsigned clients.
        let r = nsc
            .request(RemotingCommand::bare_request(
                request::GET_BROKER_CLUSTER_INFO,
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);

        // Topic creation: unsigned and non-admin refused, admin accepted.
        let r = c.request(create_topic("Allowed")).await.unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        assert!(
            remark(&r).contains("authenticated account"),
            "{}",
            remark(&r)
        );
        let r = c
            .request(signed(create_topic("Allowed"), PRODUCER))
            .await
            .unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        assert!(
            remark(&r).contains("UPDATE_AND_CREATE_TOPIC") && remark(&r).contains("admin"),
            "{}",
            remark(&r)
        );
        for t in ["Allowed", "Denied", "Later"] {
            let r = c.request(signed(create_topic(t), ADMIN)).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "{t}: {}", remark(&r));
        }

        // A non-admin cannot change roles.
        let role = with_fields(
            request::NOTIFY_BROKER_ROLE_CHANGED,
            &[
                ("masterAddress", String::new()),
                ("masterEpoch", "9".to_owned()),
                ("syncStateSetEpoch", "9".to_owned()),
                ("masterBrokerId", "-1".to_owned()),
            ],
        );
        let r = c.request(signed(role, PRODUCER)).await.unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        assert!(
            remark(&r).contains("NOTIFY_BROKER_ROLE_CHANGED"),
            "{}",
            remark(&r)
        );

        // The producer account: its topic works end to end, DENY refuses sends.
        let (code, _) = send_code(&c, signed(send_v2("Allowed", 0, b"m0", ""), PRODUCER)).await;
        assert_eq!(code, response::SUCCESS);
        let (code, why) = send_code(&c, signed(send_v2("Denied", 0, b"m1", ""), PRODUCER)).await;
        assert_eq!(code, response::NO_PERMISSION);
        assert_eq!(why, "ACL: no PUB permission on topic Denied");
        let (code, why) = send_code(&c, signed(send_v2("Later", 0, b"m1", ""), PRODUCER)).await;
        assert_eq!(code, response::NO_PERMISSION, "default DENY: {why}");
        // Dispatch is asynchronous: the pull may come before the message is in the queue,
        // but it is never refused.
        eventually(
            Duration::from_secs(10),
            "the message dispatched",
            || async {
                let r = c
                    .request(signed(pull("G1", "Allowed", 0, 0, 32, None, "*"), PRODUCER))
                    .await
                    .unwrap();
                if r.code != response::SUCCESS {
                    assert_eq!(r.code, response::PULL_NOT_FOUND, "{}", remark(&r));
                }
                r.code == response::SUCCESS
            },
        )
        .await;
        // Unsigned, wrong key, tampered after signing: refused with one remark.
        let (code, unsigned) = send_code(&c, send_v2("Allowed", 0, b"m2", "")).await;
        assert_eq!(code, response::NO_PERMISSION);
        let (code, wrong) = send_code(
            &c,
            signed(
                send_v2("Allowed", 0, b"m2", ""),
                ("producer01", "notTheSecret"),
            ),
        )
        .await;
        assert_eq!(code, response::NO_PERMISSION);
        let mut tampered = signed(send_v2("Allowed", 0, b"m2", ""), PRODUCER);
        tampered.body = bytes::Bytes::from_static(b"m3");
        let (code, body_changed) = send_code(&c, tampered).await;
        assert_eq!(code, response::NO_PERMISSION);
        assert_eq!(unsigned, wrong);
        assert_eq!(wrong, body_changed);
        for s in SECRETS {
            assert!(!wrong.contains(s));
        }

        // Secrets never leave through GET_BROKER_CONFIG.
        let r = c
            .request(signed(
                RemotingCommand::bare_request(request::GET_BROKER_CONFIG),
                PRODUCER,
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let config = String::from_utf8_lossy(&r.body);
        assert!(config.contains("secretKey=******"), "{config}");
        for s in SECRETS {
            assert!(!config.contains(s), "config leaks a secret");
        }

        // ACL admin codes 50-54 work for admins (and are refused to others).
        let create_account = with_fields(
            request::UPDATE_AND_CREATE_ACL_CONFIG,
            &[
                ("accessKey", "newcomer1".to_owned()),
                ("secretKey", "newcomerSecret".to_owned()),
                ("topicPerms", "Later=PUB".to_owned()),
                ("admin", "false".to_owned()),
            ],
        );
        let r = c
            .request(signed(create_account.clone(), PRODUCER))
            .await
            .unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        let r = c.request(signed(create_account, ADMIN)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{}", remark(&r));
        let (code, why) = send_code(
            &c,
            signed(
                send_v2("Later", 0, b"m4", ""),
                ("newcomer1", "newcomerSecret"),
            ),
        )
        .await;
        assert_eq!(code, response::SUCCESS, "{why}");
        let r = c
            .request(signed(
                RemotingCommand::bare_request(request::GET_BROKER_CLUSTER_ACL_INFO),
                ADMIN,
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert!(
            r.ext_fields
                .get("version")
                .is_some_and(|v| v.contains("\"counter\":1"))
        );
        let r = c
            .request(signed(
                RemotingCommand::bare_request(request::GET_BROKER_CLUSTER_ACL_CONFIG),
                ADMIN,
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let body = String::from_utf8_lossy(&r.body);
        assert!(body.contains("newcomer1"));
        for s in SECRETS.iter().chain(&["newcomerSecret"]) {
            assert!(!body.contains(s), "54 leaks a secret: {body}");
        }
        let r = c
            .request(signed(
                with_fields(
                    request::DELETE_ACL_CONFIG,
                    &[("accessKey", "newcomer1".to_owned())],
                ),
                ADMIN,
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{}", remark(&r));
        let (code, _) = send_code(
            &c,
            signed(
                send_v2("Later", 0, b"m5", ""),
                ("newcomer1", "newcomerSecret"),
            ),
        )
        .await;
        assert_eq!(code, response::NO_PERMISSION);
        let r = c
            .request(signed(
                with_fields(
                    request::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                    &[
                        ("globalWhiteAddrs", "10.9.9.9".to_owned()),
                        ("aclFileFullPath", "/etc/passwd".to_owned()),
                    ],
                ),
                ADMIN,
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED);

        // rmqctl signs with --access-key/--secret-key or a credentials file.
        let ns_addr = format!("127.0.0.1:{}", ns.port);
        let out = cli::run(
            "rmqctl",
            &[
                "-n",
                &ns_addr,
                "topic",
                "create",
                "-t",
                "ByCli",
                "-b",
                &broker_addr,
            ],
        );
        assert_eq!(out.code, 1, "unsigned rmqctl must be refused: {out:?}");
        let out = cli::run(
            "rmqctl",
            &[
                "-n",
                &ns_addr,
                "--access-key",
                ADMIN.0,
                "--secret-key",
                ADMIN.1,
                "topic",
                "create",
                "-t",
                "ByCli",
                "-b",
                &broker_addr,
            ],
        );
        assert_eq!(out.code, 0, "{out:?}");
        assert!(!out.stdout.contains(ADMIN.1) && !out.stderr.contains(ADMIN.1));
        let creds = dir.path().join("tools.yml");
        std::fs::write(
            &creds,
            format!("accessKey: {}\nsecretKey: {}\n", PRODUCER.0, PRODUCER.1),
        )
        .unwrap();
        let out = cli::run(
            "rmqctl",
            &[
                "-n",
                &ns_addr,
                "--credentials-file",
                &creds.display().to_string(),
                "topic",
                "delete",
                "-t",
                "ByCli",
                "-c",
                "TestCluster",
            ],
        );
        assert_eq!(out.code, 1, "a non-admin cannot delete topics: {out:?}");
        assert!(out.stderr.contains("needs an admin account"), "{out:?}");
        assert!(!out.stderr.contains(PRODUCER.1));

        // Hot reload, no restart: the producer gets Denied, then a broken file keeps it.
        write_acl(&acl_path, &acl_file("      - Denied=PUB", ""));
        eventually(Duration::from_secs(10), "reloaded ACL", || async {
            send_code(&c, signed(send_v2("Denied", 0, b"m6", ""), PRODUCER))
                .await
                .0
                == response::SUCCESS
        })
        .await;
        let kept_before = b.broker.log().matches("keeping the last good ACL").count();
        write_acl(&acl_path, "accounts: [ {accessKey: broken");
        // The watcher has read the broken file once it says it keeps the last good ACL.
        eventually(
            Duration::from_secs(10),
            "the broken file refused",
            || async { b.broker.log().matches("keeping the last good ACL").count() > kept_before },
        )
        .await;
        let (code, why) = send_code(&c, signed(send_v2("Denied", 0, b"m7", ""), PRODUCER)).await;
        assert_eq!(code, response::SUCCESS, "last good ACL kept: {why}");
        assert!(b.broker.log().contains("keeping the last good ACL"));

        // A globally whitelisted address needs no signature.
        write_acl(&acl_path, &acl_file("", "127.0.0.1"));
        eventually(Duration::from_secs(10), "whitelist reload", || async {
            send_code(&c, send_v2("Later", 0, b"m8", "")).await.0 == response::SUCCESS
        })
        .await;

        // Refusals are counted by reason.
        let (_, metrics) = http::get(b.broker.http_port, "/metrics")
            .await
            .expect("metrics");
        for reason in [
            "missing_access_key",
            "bad_signature",
            "not_admin",
            "topic_permission",
        ] {
            assert!(
                metrics.contains(&format!(
                    "rocketmq_acl_refused_total{{reason=\"{reason}\"}}"
                )),
                "{reason} not counted"
            );
        }
    });
    for s in SECRETS {
        assert!(!b.broker.log().contains(s), "broker log leaks a secret");
        assert!(!ns.log().contains(s), "nameserver log leaks a secret");
    }
}

const OWNER: (&str, &str) = ("ownerAcct1", "ownerSecret1");
const OTHER: (&str, &str) = ("otherAcct1", "otherSecret1");

/// Two accounts, each with its own topic; groups default to SUB for both.
fn two_accounts_acl() -> String {
    format!(
        r#"accounts:
  - accessKey: {}
    secretKey: {}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Owned=PUB|SUB
  - accessKey: {}
    secretKey: {}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Theirs=PUB|SUB
"#,
        OWNER.0, OWNER.1, OTHER.0, OTHER.1
    )
}

/// Every request that returns or copies a stored body is checked against the topic the
/// stored record belongs to: another account can neither read a pending half message
/// of a topic it is denied (VIEW_MESSAGE_BY_ID), nor copy a denied topic's message into
/// its own dead letter queue (CONSUMER_SEND_MSG_BACK), nor cancel the transaction by
/// rolling back a half of its own with the same key.
#[test]
fn read_paths_follow_the_stored_records_topic_and_transactions_cannot_be_cancelled() {
    let dir = tempfile::tempdir().expect("temp dir");
    let acl_path = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_path, two_accounts_acl()).expect("write ACL");
    let acl = acl_path.display().to_string();
    let b = TempBroker::start(
        None,
        &[
            ("aclEnable", "true"),
            ("aclFile", &acl),
            ("transactionCheckInterval", "1000"),
            ("transactionTimeOut", "60000"),
        ],
    );
    let port = b.broker.port;
    runtime().block_on(async {
        let localhost = std::net::IpAddr::from([127, 0, 0, 1]);
        let mut owner = raw_tx::RawTx::connect(port, localhost, "PG_OWNER", Some(OWNER))
            .await
            .expect("owner connects");
        let mut other = raw_tx::RawTx::connect(port, localhost, "PG_OTHER", Some(OTHER))
            .await
            .expect("other connects");
        let half = owner
            .send_half("Owned", "owned-secret", "VICTIMKEY")
            .await
            .expect("owner's half");
        let view = |offset: i64| {
            with_fields(
                request::VIEW_MESSAGE_BY_ID,
                &[("offset", offset.to_string())],
            )
        };
        // The pending half belongs to Owned: the other account may not read it.
        let r = other
            .request(view(half.commit_log_offset))
            .await
            .expect("view");
        assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
        assert!(remark(&r).contains("Owned"), "{:?}", r.remark);
        let r = owner
            .request(view(half.commit_log_offset))
            .await
            .expect("view");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);

        // Its own half with the victim's key, rolled back: allowed, and harmless.
        let decoy = other
            .send_half("Theirs", "decoy", "VICTIMKEY")
            .await
            .expect("other's half");
        let r = other
            .end(decoy, raw_tx::ROLLBACK, false)
            .await
            .expect("end");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        // Nor can it decide the owner's half.
        let r = other.end(half, raw_tx::ROLLBACK, false).await.expect("end");
        assert_ne!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = owner.end(half, raw_tx::COMMIT, false).await.expect("end");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let committed = eventually_committed(&mut owner).await;

        // The committed message: no view, and no copy into the other group's DLQ.
        let r = other.request(view(committed)).await.expect("view");
        assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
        let back = with_fields(
            request::CONSUMER_SEND_MSG_BACK,
            &[
                ("offset", committed.to_string()),
                ("group", "CG_OTHER".to_owned()),
                ("delayLevel", "-1".to_owned()),
                ("originMsgId", "x".to_owned()),
                ("originTopic", "Theirs".to_owned()),
            ],
        );
        let r = other.request(back).await.expect("send back");
        assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
        // A pull of the half topic needs an admin account.
        let r = other
            .request(pull(
                "CG_OTHER",
                "RMQ_SYS_TRANS_HALF_TOPIC",
                0,
                0,
                32,
                None,
                "*",
            ))
            .await
            .expect("pull");
        assert_eq!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
        let query = |topic: &str| {
            with_fields(
                request::QUERY_MESSAGE,
                &[
                    ("topic", topic.to_owned()),
                    ("key", "VICTIMKEY".to_owned()),
                    ("maxNum", "32".to_owned()),
                    ("beginTimestamp", "0".to_owned()),
                    ("endTimestamp", i64::MAX.to_string()),
                ],
            )
        };
        for topic in ["Owned", "RMQ_SYS_TRANS_HALF_TOPIC"] {
            let r = other.request(query(topic)).await.expect("query");
            assert_eq!(r.code, response::NO_PERMISSION, "{topic}: {:?}", r.remark);
        }
        // Its own topic's query answers only its own topic's records.
        let r = other.request(query("Theirs")).await.expect("query");
        assert_ne!(r.code, response::NO_PERMISSION, "{:?}", r.remark);
        for rec in e2e::broker_harness::decode_records(&r.body) {
            assert_eq!(rec.topic, "Theirs");
        }
    });
}

/// Pulls `Owned` queue 0 as the owner until the committed message is there; its
/// CommitLog offset.
async fn eventually_committed(owner: &mut raw_tx::RawTx) -> i64 {
    for _ in 0..200 {
        let r = owner
            .request(pull("CG_OWNER", "Owned", 0, 0, 32, Some(1000), "*"))
            .await
            .expect("pull");
        if r.code == response::SUCCESS
            && let Some(rec) = e2e::broker_harness::decode_records(&r.body)
                .into_iter()
                .find(|rec| rec.body == b"owned-secret")
        {
            return rec.physical_offset;
        }
        // Long polling: the broker holds an empty pull until a message arrives or its
        // suspend time ends, so this loop waits on the condition, not on a clock.
    }
    panic!("the committed message never became pullable");
}
