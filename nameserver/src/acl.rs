//! The nameserver's ACL (beyond 4.9, whose nameserver has none: issues #1279, #1842,
//! #7542). With `aclEnable=true` every request that changes state — broker
//! (un)registration, topic deletion, write-permission changes, KV writes, config
//! updates, and any code not known to be a read — must be signed by an `admin: true`
//! account of `aclFile`. Reads stay open so unsigned 4.9 clients keep resolving routes.
//! Whitelists do not apply here: a signature is the only proof (a nameserver is where a
//! fake master would be registered).

use protocol::RemotingCommand;
use protocol::code::{request as rq, response};
use security::acl::Requirement;

use crate::state::Shared;

/// Codes anyone may call unsigned.
pub const READS: &[i32] = &[
    rq::QUERY_DATA_VERSION,
    rq::GET_ROUTEINFO_BY_TOPIC,
    rq::GET_BROKER_CLUSTER_INFO,
    rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    rq::GET_TOPICS_BY_CLUSTER,
    rq::GET_SYSTEM_TOPIC_LIST_FROM_NS,
    rq::GET_UNIT_TOPIC_LIST,
    rq::GET_HAS_UNIT_SUB_TOPIC_LIST,
    rq::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    rq::GET_KV_CONFIG,
    rq::GET_KVLIST_BY_NAMESPACE,
    rq::GET_NAMESRV_CONFIG,
];

/// `Err(answer)` when the ACL refuses `request` (the caller drops the answer for a
/// oneway request).
pub fn check(
    shared: &Shared,
    request: &RemotingCommand,
) -> Result<(), Option<Box<RemotingCommand>>> {
    let Some(acl) = shared.acl.as_ref() else {
        return Ok(());
    };
    if READS.contains(&request.code) {
        return Ok(());
    }
    match acl.table().check(None, request, &Requirement::Admin) {
        Ok(_) => Ok(()),
        Err(denial) => {
            shared.metrics.acl_refused(denial.reason());
            tracing::info!(
                code = request.code,
                access_key = request
                    .ext_fields
                    .get(security::sign::ACCESS_KEY)
                    .unwrap_or(""),
                reason = denial.reason(),
                "request refused by ACL"
            );
            Err(Some(Box::new(RemotingCommand::error_response(
                request,
                response::NO_PERMISSION,
                denial.remark(),
            ))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NamesrvConfig;
    use crate::kv_config::KvConfig;
    use security::sign::{Credentials, sign_request};

    fn shared(dir: &std::path::Path) -> Shared {
        let path = dir.join("plain_acl.yml");
        std::fs::write(
            &path,
            "accounts:\n  - {accessKey: brokerAccount, secretKey: brokerSecret1, admin: true}\n  - {accessKey: appAccount, secretKey: appSecret12, defaultTopicPerm: PUB}\n",
        )
        .unwrap();
        let acl = security::acl::AclStore::open(&path).unwrap();
        let kv = KvConfig::load(&dir.join("kv.json"), Default::default()).unwrap();
        Shared::new(NamesrvConfig::default(), kv).with_acl(Some(std::sync::Arc::new(acl)))
    }

    #[test]
    fn state_changes_need_an_admin_signature_reads_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path());
        let mut register = RemotingCommand::bare_request(rq::REGISTER_BROKER);
        register.ext_fields.insert("brokerName", "broker-a");
        let refused = check(&s, &register).unwrap_err().unwrap();
        assert_eq!(refused.code, response::NO_PERMISSION);
        let mut app = register.clone();
        sign_request(&mut app, &Credentials::new("appAccount", "appSecret12"));
        let refused = check(&s, &app).unwrap_err().unwrap();
        assert!(refused.remark.unwrap().contains("needs an admin account"));
        let mut signed = register.clone();
        sign_request(
            &mut signed,
            &Credentials::new("brokerAccount", "brokerSecret1"),
        );
        assert!(check(&s, &signed).is_ok());
        signed.ext_fields.insert("brokerName", "broker-b");
        assert!(check(&s, &signed).is_err(), "tampered header");
        for code in [
            rq::UNREGISTER_BROKER,
            rq::DELETE_TOPIC_IN_NAMESRV,
            rq::WIPE_WRITE_PERM_OF_BROKER,
            rq::ADD_WRITE_PERM_OF_BROKER,
            rq::PUT_KV_CONFIG,
            rq::DELETE_KV_CONFIG,
            rq::UPDATE_NAMESRV_CONFIG,
        ] {
            assert!(
                check(&s, &RemotingCommand::bare_request(code)).is_err(),
                "{code}"
            );
        }
        assert!(
            check(
                &s,
                &RemotingCommand::bare_request(rq::GET_ROUTEINFO_BY_TOPIC)
            )
            .is_ok()
        );
    }
}
