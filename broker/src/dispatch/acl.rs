//! What each request code needs from the broker's ACL (4.9 `PlainAccessValidator.parse`
//! plus `Permission.ADMIN_CODE`), and the one check in front
//! of the dispatch table.
//!
//! Three classes, deny by default:
//! - client data path: the topic / group permissions listed in [`requirement`];
//! - reads and client bookkeeping ([`AUTHENTICATED_ONLY`]): any known account;
//! - everything else, i.e. every request that changes broker state without being a
//!   client data-path call (topic/group create and delete, config, offset resets,
//!   role changes, ACL management 50–54, file cleanup...): an `admin: true` account.
//!   4.9 only protected five codes this way.
//!
//! Every request that returns or copies a stored body checks SUB on the topic the body
//! belongs to, decided from the stored record (`crate::services::record_owner`):
//! VIEW_MESSAGE_BY_ID and CONSUMER_SEND_MSG_BACK read the record at the request's
//! offset; PULL_MESSAGE and QUERY_MESSAGE name a topic whose records they return (the
//! query handler returns only records of that topic), and the broker's own topics
//! (half, op, schedule...) need an admin account.
//!
//! Deviations from 4.9 on purpose: batch and reply sends, END_TRANSACTION, offset
//! queries, locks, offset lookups and VIEW_MESSAGE_BY_ID are checked (4.9 let them
//! through or checked only the group); `%DLQ%<group>`
//! is the group's resource like `%RETRY%<group>`; a refusal is NO_PERMISSION (16)
//! rather than SYSTEM_ERROR with a Java stack frame.

use protocol::RemotingCommand;
use protocol::body::{HeartbeatData, LockBatchRequestBody};
use protocol::code::{request as rq, response};
use protocol::message::PhysicalOffset;
use security::acl::{Denial, Perm, Requirement, Resource};

use crate::services::Broker;
use crate::services::clients::Conn;
use crate::services::record_owner::{self, Owner};

/// Codes any authenticated account may call: reads, and client bookkeeping that changes
/// nothing another client relies on.
pub const AUTHENTICATED_ONLY: &[i32] = &[
    rq::QUERY_BROKER_OFFSET,
    rq::GET_ALL_TOPIC_CONFIG,
    rq::GET_TOPIC_CONFIG_LIST,
    rq::GET_TOPIC_NAME_LIST,
    rq::GET_BROKER_CONFIG,
    rq::GET_BROKER_RUNTIME_INFO,
    rq::GET_ALL_CONSUMER_OFFSET,
    rq::GET_ALL_DELAY_OFFSET,
    rq::CHECK_CLIENT_CONFIG,
    rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    rq::GET_TOPIC_STATS_INFO,
    rq::GET_CONSUMER_CONNECTION_LIST,
    rq::GET_PRODUCER_CONNECTION_LIST,
    rq::GET_CONSUME_STATS,
    rq::WHO_CONSUME_THE_MESSAGE,
    rq::QUERY_TOPIC_CONSUME_BY_WHO,
    rq::QUERY_CONSUME_TIME_SPAN,
    rq::GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    rq::QUERY_CORRECTION_OFFSET,
    rq::VIEW_BROKER_STATS_DATA,
    rq::GET_BROKER_CONSUME_STATS,
    rq::QUERY_CONSUME_QUEUE,
    rq::GET_ALL_PRODUCER_INFO,
    rq::GET_BROKER_HA_STATUS,
    rq::GET_BROKER_EPOCH_CACHE,
];

/// Checks `request` against the ACL when it is enabled; the refusal to send otherwise
/// (`None` for a oneway request, which gets no answer either way).
pub fn check(
    broker: &Broker,
    conn: &Conn,
    request: &RemotingCommand,
) -> Result<(), Option<Box<RemotingCommand>>> {
    let Some(acl) = broker.acl.as_ref() else {
        return Ok(());
    };
    let table = acl.table();
    let owned = OwnedNames::decode(broker, request);
    let need = requirement(request, &owned);
    match table.check(Some(conn.peer.ip()), request, &need) {
        Ok(_) => Ok(()),
        Err(denial) => {
            broker.metrics.acl_refused(denial.reason());
            log_refusal(conn, request, &denial);
            Err((!request.is_oneway()).then(|| {
                Box::new(RemotingCommand::error_response(
                    request,
                    response::NO_PERMISSION,
                    denial.remark(),
                ))
            }))
        }
    }
}

fn log_refusal(conn: &Conn, request: &RemotingCommand, denial: &Denial) {
    // The access key is a name, not a secret; the signature and secret never appear.
    tracing::info!(
        peer = %conn.peer,
        code = request.code,
        access_key = request.ext_fields.get(security::sign::ACCESS_KEY).unwrap_or(""),
        reason = denial.reason(),
        "request refused by ACL"
    );
}

/// Names that live in a body or the store rather than in extFields.
#[derive(Default)]
pub struct OwnedNames {
    heartbeat: Option<HeartbeatData>,
    lock: Option<LockBatchRequestBody>,
    /// END_TRANSACTION: the half message's real topic.
    half_topic: Option<String>,
    /// VIEW_MESSAGE_BY_ID, CONSUMER_SEND_MSG_BACK: the owner of the record at the
    /// request's CommitLog offset (`None`: no record there, the handler answers that).
    stored: Option<Owner>,
}

impl OwnedNames {
    fn decode(broker: &Broker, request: &RemotingCommand) -> Self {
        let mut names = Self::default();
        match request.code {
            rq::HEART_BEAT => names.heartbeat = protocol::body::decode(&request.body).ok(),
            rq::LOCK_BATCH_MQ | rq::UNLOCK_BATCH_MQ => {
                names.lock = protocol::body::decode(&request.body).ok()
            }
            rq::END_TRANSACTION => {
                names.half_topic =
                    crate::services::transaction::bridge::half_real_topic(broker, request)
            }
            rq::VIEW_MESSAGE_BY_ID | rq::CONSUMER_SEND_MSG_BACK => {
                names.stored = request
                    .ext_fields
                    .get("offset")
                    .and_then(|o| o.trim().parse().ok())
                    .and_then(|o| record_owner::at(broker, PhysicalOffset(o)))
            }
            _ => {}
        }
        names
    }
}

/// What `request` needs (see the module comment for the classes).
pub fn requirement<'a>(request: &'a RemotingCommand, owned: &'a OwnedNames) -> Requirement<'a> {
    let f = &request.ext_fields;
    let field = |k: &str| f.get(k).unwrap_or("");
    let topic_sub = |k: &str| (Resource::topic(field(k)), Perm::SUB);
    let group_sub = |k: &str| (Resource::group(field(k)), Perm::SUB);
    let needs = |v: Vec<(Resource<'a>, Perm)>| Requirement::Resources(v);
    match request.code {
        rq::SEND_MESSAGE
        | rq::SEND_MESSAGE_V2
        | rq::SEND_BATCH_MESSAGE
        | rq::SEND_REPLY_MESSAGE
        | rq::SEND_REPLY_MESSAGE_V2 => {
            let topic = f.get("topic").or_else(|| f.get("b")).unwrap_or("");
            needs(vec![send_need(topic)])
        }
        // The retry topic of a send-back is `%RETRY%<group>`: the same group resource;
        // the copied message's own topic needs SUB too, as the copy is readable there.
        rq::CONSUMER_SEND_MSG_BACK => match &owned.stored {
            Some(Owner::Topic(t)) => {
                needs(vec![group_sub("group"), (Resource::topic(t), Perm::SUB)])
            }
            Some(Owner::System) => Requirement::Admin,
            None => needs(vec![group_sub("group")]),
        },
        // A stored body: SUB on the topic the record belongs to.
        rq::VIEW_MESSAGE_BY_ID => match &owned.stored {
            Some(Owner::Topic(t)) => needs(vec![(Resource::topic(t), Perm::SUB)]),
            Some(Owner::System) => Requirement::Admin,
            None => Requirement::Authenticated,
        },
        // The broker's own topics are read by admins only (their records reached by
        // offset belong to their real topic, above).
        rq::PULL_MESSAGE | rq::QUERY_MESSAGE if record_owner::is_system_topic(field("topic")) => {
            Requirement::Admin
        }
        rq::PULL_MESSAGE => needs(vec![topic_sub("topic"), group_sub("consumerGroup")]),
        rq::QUERY_MESSAGE
        | rq::GET_MAX_OFFSET
        | rq::GET_MIN_OFFSET
        | rq::SEARCH_OFFSET_BY_TIMESTAMP
        | rq::GET_EARLIEST_MSG_STORETIME => needs(vec![topic_sub("topic")]),
        rq::UPDATE_CONSUMER_OFFSET | rq::QUERY_CONSUMER_OFFSET => {
            needs(vec![group_sub("consumerGroup"), topic_sub("topic")])
        }
        rq::GET_CONSUMER_LIST_BY_GROUP => needs(vec![group_sub("consumerGroup")]),
        rq::UNREGISTER_CLIENT => match f.get("consumerGroup") {
            Some(g) => needs(vec![(Resource::group(g), Perm::SUB)]),
            None => Requirement::Authenticated,
        },
        rq::HEART_BEAT => {
            let mut v = Vec::new();
            for c in owned.heartbeat.iter().flat_map(|h| &h.consumer_data_set) {
                v.push((Resource::group(&c.group_name), Perm::SUB));
                for s in &c.subscription_data_set {
                    v.push((Resource::topic(&s.topic), Perm::SUB));
                }
            }
            needs(v)
        }
        rq::LOCK_BATCH_MQ | rq::UNLOCK_BATCH_MQ => match &owned.lock {
            Some(body) => {
                let mut v = vec![(Resource::group(&body.consumer_group), Perm::SUB)];
                v.extend(
                    body.mq_set
                        .iter()
                        .map(|mq| (Resource::topic(&mq.topic), Perm::SUB)),
                );
                needs(v)
            }
            // Undecodable: the handler refuses it; only authentication is left to check.
            None => Requirement::Authenticated,
        },
        rq::END_TRANSACTION => match &owned.half_topic {
            Some(topic) => needs(vec![(Resource::topic(topic), Perm::PUB)]),
            // No such half message: the handler answers the error.
            None => Requirement::Authenticated,
        },
        code if AUTHENTICATED_ONLY.contains(&code) => Requirement::Authenticated,
        _ => Requirement::Admin,
    }
}

/// A send needs PUB on its topic; a send to `%RETRY%<group>` (or `%DLQ%<group>`) is a
/// consumer handing a message back and needs SUB on the group (4.9.4+, issue #4426).
fn send_need(topic: &str) -> (Resource<'_>, Perm) {
    match Resource::topic(topic) {
        group @ Resource::Group(_) => (group, Perm::SUB),
        t => (t, Perm::PUB),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
        let mut cmd = RemotingCommand::bare_request(code);
        for (k, v) in fields {
            cmd.ext_fields.insert(*k, *v);
        }
        cmd
    }

    fn need(code: i32, fields: &[(&str, &str)]) -> String {
        let cmd = req(code, fields);
        format!("{:?}", requirement(&cmd, &OwnedNames::default()))
    }

    #[test]
    fn data_path_codes_map_to_resources() {
        assert_eq!(
            need(rq::SEND_MESSAGE_V2, &[("b", "T"), ("a", "P")]),
            "Resources([(Topic(\"T\"), Perm(4))])"
        );
        assert_eq!(
            need(rq::SEND_MESSAGE, &[("topic", "%RETRY%G")]),
            "Resources([(Group(\"G\"), Perm(8))])"
        );
        assert_eq!(
            need(rq::PULL_MESSAGE, &[("topic", "T"), ("consumerGroup", "G")]),
            "Resources([(Topic(\"T\"), Perm(8)), (Group(\"G\"), Perm(8))])"
        );
        assert_eq!(
            need(
                rq::CONSUMER_SEND_MSG_BACK,
                &[("group", "G"), ("originTopic", "T")]
            ),
            "Resources([(Group(\"G\"), Perm(8))])"
        );
        assert_eq!(
            need(
                rq::PULL_MESSAGE,
                &[
                    ("topic", "RMQ_SYS_TRANS_HALF_TOPIC"),
                    ("consumerGroup", "G")
                ]
            ),
            "Admin"
        );
        assert_eq!(
            need(rq::QUERY_MESSAGE, &[("topic", "SCHEDULE_TOPIC_XXXX")]),
            "Admin"
        );
        assert_eq!(
            need(rq::QUERY_MESSAGE, &[("topic", "T")]),
            "Resources([(Topic(\"T\"), Perm(8))])"
        );
        let view = req(rq::VIEW_MESSAGE_BY_ID, &[("offset", "0")]);
        let stored = |owner: Owner| OwnedNames {
            stored: Some(owner),
            ..OwnedNames::default()
        };
        assert_eq!(
            format!(
                "{:?}",
                requirement(&view, &stored(Owner::Topic("T".into())))
            ),
            "Resources([(Topic(\"T\"), Perm(8))])"
        );
        assert_eq!(
            format!("{:?}", requirement(&view, &stored(Owner::System))),
            "Admin"
        );
        let back = req(
            rq::CONSUMER_SEND_MSG_BACK,
            &[("group", "G"), ("offset", "0")],
        );
        assert_eq!(
            format!(
                "{:?}",
                requirement(&back, &stored(Owner::Topic("T".into())))
            ),
            "Resources([(Group(\"G\"), Perm(8)), (Topic(\"T\"), Perm(8))])"
        );
        assert_eq!(
            need(
                rq::UPDATE_CONSUMER_OFFSET,
                &[("consumerGroup", "G"), ("topic", "%DLQ%G")]
            ),
            "Resources([(Group(\"G\"), Perm(8)), (Group(\"G\"), Perm(8))])"
        );
    }

    #[test]
    fn heartbeat_and_locks_read_their_bodies() {
        let hb = r#"{"clientID":"c","producerDataSet":[{"groupName":"P"}],"consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"T","subString":"*"},{"topic":"%RETRY%G","subString":"*"}],"unitMode":false}]}"#;
        let cmd = req(rq::HEART_BEAT, &[]).with_body(hb.as_bytes().to_vec());
        let owned = OwnedNames {
            heartbeat: protocol::body::decode(&cmd.body).ok(),
            ..OwnedNames::default()
        };
        assert_eq!(
            format!("{:?}", requirement(&cmd, &owned)),
            "Resources([(Group(\"G\"), Perm(8)), (Topic(\"T\"), Perm(8)), (Group(\"G\"), Perm(8))])"
        );
    }

    #[test]
    fn state_changing_codes_need_admin() {
        for code in [
            rq::UPDATE_AND_CREATE_TOPIC,
            rq::DELETE_TOPIC_IN_BROKER,
            rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            rq::DELETE_SUBSCRIPTIONGROUP,
            rq::UPDATE_BROKER_CONFIG,
            rq::INVOKE_BROKER_TO_RESET_OFFSET,
            rq::RESET_CONSUMER_OFFSET_IN_BROKER,
            rq::NOTIFY_BROKER_ROLE_CHANGED,
            rq::UPDATE_AND_CREATE_ACL_CONFIG,
            rq::DELETE_ACL_CONFIG,
            rq::GET_BROKER_CLUSTER_ACL_INFO,
            rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            rq::GET_BROKER_CLUSTER_ACL_CONFIG,
            rq::TRIGGER_DELETE_FILES,
            rq::CLEAN_UNUSED_TOPIC,
            rq::DELETE_EXPIRED_COMMITLOG,
            rq::CLONE_GROUP_OFFSET,
            9999,
        ] {
            assert_eq!(need(code, &[]), "Admin", "code {code}");
        }
        assert_eq!(need(rq::GET_BROKER_CONFIG, &[]), "Authenticated");
    }
}
