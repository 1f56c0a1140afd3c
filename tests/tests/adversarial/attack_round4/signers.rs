//! Registrations from a broker holding several signers (the nameservers' admin secret and
//! its own ACL account): every kind of nameserver routes it.

use e2e::Client;
use e2e::broker_harness::TempBroker;
use e2e::wait::runtime;
use protocol::RemotingCommand;
use protocol::code::request;

use crate::common::victim_is_served;

/// A broker given its own ACL account (`accessKey`/`secretKey`, the operator's
/// `spec.security.brokerCredentials`) and the nameservers' admin secret
/// (`namesrvAdminSecret`) is routed both by a nameserver that checks that secret with its
/// ACL off and by one whose ACL holds the account: each registration is tried with each
/// signer in turn and the accepted one is kept per nameserver
/// (`broker/src/services/namesrv_link.rs`). It used to sign with the account only, so a
/// nameserver enforcing its admin secret refused it and it dropped out of the routes.
#[test]
fn a_broker_with_its_own_account_and_the_namesrv_secret_is_routed() {
    const NS_SECRET: &str = "round4-namesrv-secret-0123456789";
    let rt = runtime();
    let mut ns = e2e::NameServer::start(
        e2e::nameserver::Options::default().config("adminSecret", NS_SECRET),
    );
    let mut b = TempBroker::start(
        Some(ns.port),
        &[
            ("namesrvAdminSecret", NS_SECRET),
            ("accessKey", "broker-account"),
            ("secretKey", "broker-account-secret-0123"),
        ],
    );
    let addr = format!("127.0.0.1:{}", b.broker.port);
    rt.block_on(async {
        let routed = || async {
            let Ok(c) = Client::connect(ns.port).await else {
                return false;
            };
            let Ok(r) = c
                .request(RemotingCommand::bare_request(
                    request::GET_BROKER_CLUSTER_INFO,
                ))
                .await
            else {
                return false;
            };
            String::from_utf8_lossy(&r.body).contains(&addr)
        };
        e2e::wait::eventually(
            std::time::Duration::from_secs(20),
            "the broker registered with the nameserver",
            routed,
        )
        .await;
        assert!(ns.running(), "the nameserver died; log:\n{}", ns.log());
        victim_is_served(&mut b.broker).await;
    });
}

/// The same broker against a nameserver with its ACL on, whose file holds the broker's
/// account: the admin-secret signature is refused there, the account's is accepted.
#[test]
fn a_broker_with_both_signers_is_routed_by_an_acl_nameserver() {
    const NS_SECRET: &str = "round4-namesrv-secret-0123456789";
    let dir = tempfile::tempdir().expect("temp dir");
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl,
        "accounts:\n  - accessKey: broker-account\n    secretKey: broker-account-secret-0123\n    admin: true\n",
    )
    .expect("acl file");
    let rt = runtime();
    let mut ns = e2e::NameServer::start(
        e2e::nameserver::Options::default()
            .config("aclEnable", "true")
            .config("aclFile", acl.display().to_string()),
    );
    let mut b = TempBroker::start(
        Some(ns.port),
        &[
            ("namesrvAdminSecret", NS_SECRET),
            ("accessKey", "broker-account"),
            ("secretKey", "broker-account-secret-0123"),
        ],
    );
    let addr = format!("127.0.0.1:{}", b.broker.port);
    rt.block_on(async {
        let c = Client::connect(ns.port).await.expect("connects");
        let mut info = RemotingCommand::bare_request(request::GET_BROKER_CLUSTER_INFO);
        security::sign::sign_request(
            &mut info,
            &security::sign::Credentials::new("broker-account", "broker-account-secret-0123"),
        );
        e2e::wait::eventually(
            std::time::Duration::from_secs(20),
            "the broker registered with the ACL nameserver",
            || {
                let (c, info, addr) = (&c, info.clone(), &addr);
                async move {
                    c.request(info)
                        .await
                        .is_ok_and(|r| String::from_utf8_lossy(&r.body).contains(addr.as_str()))
                }
            },
        )
        .await;
        assert!(ns.running(), "the nameserver died; log:\n{}", ns.log());
        assert!(
            b.broker.running(),
            "the broker died; log:\n{}",
            b.broker.log()
        );
    });
}
