//! Check-backs follow the live ACL: an account whose PUB on the half's topic is revoked
//! by editing `plain_acl.yml` (hot reload) stops receiving the pending half's body,
//! though its connection stays registered under the producer group.

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, send_v2};
use e2e::wait::{eventually, runtime};
use protocol::code::response;
use security::sign::{Credentials, sign_request};

use crate::identity::raw_tx;

const GRANTED: &str = "accounts:\n  - accessKey: owner01\n    secretKey: ownerSecret1\n    \
    defaultTopicPerm: DENY\n    defaultGroupPerm: PUB|SUB\n    topicPerms: [TxSecret=PUB|SUB, Probe=PUB]\n\
    \x20\x20- accessKey: victim01\n    secretKey: victimSecret1\n    \
    defaultTopicPerm: PUB\n    defaultGroupPerm: PUB|SUB\n";
const REVOKED: &str = "accounts:\n  - accessKey: owner01\n    secretKey: ownerSecret1\n    \
    defaultTopicPerm: DENY\n    defaultGroupPerm: PUB|SUB\n    topicPerms: [TxSecret=SUB, Probe=DENY]\n\
    \x20\x20- accessKey: victim01\n    secretKey: victimSecret1\n    \
    defaultTopicPerm: PUB\n    defaultGroupPerm: PUB|SUB\n";

#[test]
fn a_revoked_account_stops_receiving_check_backs() {
    let dir = tempfile::tempdir().unwrap();
    let acl_path = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_path, GRANTED).unwrap();
    let acl = acl_path.display().to_string();
    let mut b = TempBroker::start(
        None,
        &[
            ("aclEnable", "true"),
            ("aclFile", &acl),
            ("transactionCheckInterval", "500"),
            ("transactionTimeOut", "500"),
        ],
    );
    runtime().block_on(async {
        let mut owner = raw_tx::RawTx::connect(
            b.broker.port,
            [127, 0, 0, 1].into(),
            "PG_REVOKED",
            Some(("owner01", "ownerSecret1")),
        )
        .await
        .unwrap();
        owner
            .send_half("TxSecret", "the-secret-body", "K-REVOKED")
            .await
            .expect("owner's half");
        let asked = owner.check_back(Duration::from_secs(20)).await.unwrap();
        assert_eq!(
            asked.map(|c| c.body).as_deref(),
            Some("the-secret-body"),
            "the owner was not asked while granted; log:\n{}",
            b.broker.log()
        );
        std::fs::write(&acl_path, REVOKED).unwrap();
        // The reload has happened once the account may no longer publish the probe topic.
        let port = b.broker.port;
        eventually(Duration::from_secs(30), "the ACL reloaded", || async move {
            let Ok(c) = Client::connect(port).await else {
                return false;
            };
            let mut probe = send_v2("Probe", 0, b"probe", "");
            sign_request(&mut probe, &Credentials::new("owner01", "ownerSecret1"));
            c.request(probe)
                .await
                .is_ok_and(|r| r.code == response::NO_PERMISSION)
        })
        .await;
        // At most one check-back was on its way when the file changed.
        for _ in 0..3 {
            if owner
                .check_back(Duration::from_millis(200))
                .await
                .unwrap()
                .is_none()
            {
                break;
            }
        }
        let leaked = owner.check_back(Duration::from_secs(3)).await.unwrap();
        assert!(
            leaked.is_none(),
            "a check-back carried the pending half to an account no longer allowed its topic"
        );
        assert!(
            b.broker.running(),
            "the broker died; log:\n{}",
            b.broker.log()
        );
        // Another account is still served.
        let victim = Client::connect(port).await.expect("victim connects");
        let mut send = send_v2("VictimTopic", 0, b"victim", "");
        sign_request(&mut send, &Credentials::new("victim01", "victimSecret1"));
        let r = victim.request(send).await.expect("victim send answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    });
}
