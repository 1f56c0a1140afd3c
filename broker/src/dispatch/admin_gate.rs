//! The admin-secret check: with the ACL off, the requests that decide who is master,
//! where the broker registers, or which topics, groups and offsets exist must carry an
//! `adminSecret` signature.
//!
//! 4.9 without `aclEnable` serves every admin request to whoever reaches the port, so
//! one NOTIFY_BROKER_ROLE_CHANGED turns a master into a slave and its writes stop. Here,
//! once `adminSecret` is set, the codes in [`PROTECTED`] need `AccessKey=rmq-admin` and
//! a signature made with one of its secrets (`security::admin_secret`). With the ACL on,
//! the ACL alone decides (these codes need an `admin: true` account there, see
//! `crate::dispatch::acl`). Without `adminSecret` the broker stays open, as a local
//! `scripts/run-local.sh` broker is.

use protocol::RemotingCommand;
use protocol::code::{request as rq, response};

use crate::services::Broker;
use crate::services::clients::Conn;

/// The config key refusals are counted under (`rocketmq_broker_limit_refusals_total`).
pub const KEY: &str = "adminSecret";

/// Codes that need the admin secret when the ACL is off and `adminSecret` is set:
/// - NOTIFY_BROKER_ROLE_CHANGED (1008): promotes or demotes this broker;
/// - UPDATE_BROKER_CONFIG (26): `brokerPermission` stops writes and `namesrvAddr`
///   re-points registration, so the routes clients get; the request is checked as a
///   whole, whatever keys it holds;
/// - UPDATE_AND_CREATE_TOPIC (17) and DELETE_TOPIC_IN_BROKER (215): a topic's permission
///   or queue count stops its writes, a deletion drops its data;
/// - UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) and DELETE_SUBSCRIPTIONGROUP (207): a
///   group's `consumeEnable` or retry policy, and its offsets with it;
/// - INVOKE_BROKER_TO_RESET_OFFSET (222): rewinds or skips another group's consumption.
///
/// Producers and consumers never send these (topics a producer may auto-create are made
/// by the send path, groups by the heartbeat), so clients keep working unsigned.
///
/// The HA reads (GET_BROKER_HA_STATUS 907, GET_BROKER_EPOCH_CACHE 1007) change nothing
/// and stay open, and the HA port has its own `haSecret` handshake.
pub const PROTECTED: &[i32] = &[
    rq::NOTIFY_BROKER_ROLE_CHANGED,
    rq::UPDATE_BROKER_CONFIG,
    rq::UPDATE_AND_CREATE_TOPIC,
    rq::DELETE_TOPIC_IN_BROKER,
    rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    rq::DELETE_SUBSCRIPTIONGROUP,
    rq::INVOKE_BROKER_TO_RESET_OFFSET,
];

/// `Err(answer)` (`None` for a oneway request) when `request` needs the admin secret and
/// does not carry a valid, fresh, not yet seen signature (`security::freshness`).
pub fn check(
    broker: &Broker,
    conn: &Conn,
    request: &RemotingCommand,
) -> Result<(), Option<Box<RemotingCommand>>> {
    if broker.acl.is_some() || broker.admin_secrets.is_empty() || !PROTECTED.contains(&request.code)
    {
        return Ok(());
    }
    let Err(refusal) = broker.admin_secrets.check(request) else {
        return Ok(());
    };
    broker.metrics.limits.refusals.count(refusal.limit_key());
    tracing::warn!(
        peer = %conn.peer,
        code = request.code,
        access_key = request.ext_fields.get(security::sign::ACCESS_KEY).unwrap_or(""),
        %refusal,
        "admin request refused"
    );
    Err((!request.is_oneway()).then(|| {
        Box::new(RemotingCommand::error_response(
            request,
            response::NO_PERMISSION,
            format!(
                "request code {} needs a fresh signature with the broker's {KEY}: {refusal}",
                request.code,
            ),
        ))
    }))
}
