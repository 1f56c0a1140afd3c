//! The admin-secret check: with the ACL off and `adminSecret` set, every request that
//! changes the nameserver's state — REGISTER_BROKER and UNREGISTER_BROKER first of all —
//! must carry an `adminSecret` signature (`security::admin_secret`), made by a broker
//! with the same secret or by an administrator (`rmqctl --admin-secret`).
//!
//! 4.9's nameserver trusts every peer: one REGISTER_BROKER can put a fake master in a
//! real group's route. The codes checked are the ones the ACL checks ([`crate::acl`]:
//! everything but [`crate::acl::READS`]), so routes stay readable by unsigned clients.
//! With the ACL on, the ACL alone decides. Without `adminSecret`, open mode: nothing is
//! checked here, and the route table trusts a master epoch only while the broker that
//! registered it is live (`crate::route_table`).

use protocol::RemotingCommand;
use protocol::code::response;

use crate::state::Shared;

/// The config key refusals are counted under (`rmq_namesrv_limit_refusals_total`).
pub const KEY: &str = "adminSecret";

/// `Err(answer)` when `request` needs the admin secret and lacks a valid signature (the
/// caller drops the answer for a oneway request).
pub fn check(
    shared: &Shared,
    request: &RemotingCommand,
) -> Result<(), Option<Box<RemotingCommand>>> {
    if shared.acl.is_some() || crate::acl::READS.contains(&request.code) {
        return Ok(());
    }
    let refusal = {
        let config = shared.config.read();
        if config.admin_secrets.is_empty() {
            return Ok(());
        }
        match config.admin_secrets.check(request) {
            Ok(()) => return Ok(()),
            Err(refusal) => refusal,
        }
    };
    shared.metrics.limit_refused(refusal.limit_key());
    tracing::warn!(
        code = request.code,
        access_key = request
            .ext_fields
            .get(security::sign::ACCESS_KEY)
            .unwrap_or(""),
        %refusal,
        "request refused"
    );
    Err(Some(Box::new(RemotingCommand::error_response(
        request,
        response::NO_PERMISSION,
        format!(
            "request code {} needs a fresh signature with the nameserver's {KEY}: {refusal}",
            request.code,
        ),
    ))))
}
