//! `ClientManageProcessor` and the client parts of `ConsumerManageProcessor` /
//! `AdminBrokerProcessor`: heartbeats, unregistration, consumer lists, queue locks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use protocol::RemotingCommand;
use protocol::body::{
    ConsumerData, ConsumerListBody, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody,
    SubscriptionData, UnlockBatchRequestBody,
};
use protocol::code::response;
use protocol::header::{GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader};
use serde::Deserialize;

use super::{HandlerResult, Reply, error, success};
use crate::names::{self, perm};
use crate::services::Broker;
use crate::services::clients::Conn;
use crate::services::clients::{ClientInfo, Refused};
use crate::services::filter::FilterError;
use crate::services::filter::registry::is_tag_type;
use crate::services::membership;

/// `TopicSysFlag.FLAG_UNIT_SUB`.
const FLAG_UNIT_SUB: i32 = 0x2;

/// HEART_BEAT. Bounded before anything is touched: a client id of at most
/// `maxClientIdLength` bytes, at most `maxHeartbeatGroups` entries,
/// `maxSubscriptionsPerGroup` subscriptions each, valid group and topic names, and room
/// for the memberships (`maxGroupsPerConnection`, `maxClientGroups`), else the whole
/// heartbeat is refused; at most `maxAutoCreatePerRequest` new groups (each with its
/// `%RETRY%` topic) are created, the rest on later heartbeats. The creations reach disk
/// through one deferred persist per file instead of 4.9's full rewrite per group on the
/// request thread.
pub fn heartbeat(broker: &Arc<Broker>, conn: &Conn, request: &RemotingCommand) -> HandlerResult {
    let data: HeartbeatData = protocol::body::decode(&request.body)?;
    if let Err(refused) = check_heartbeat_bounds(broker, conn, &data) {
        refuse(broker, refused.limit);
        // An over-long selector is answered as the parser answers the other selector
        // budgets.
        let code = if refused.limit == "filterSqlMaxLength" {
            response::SUBSCRIPTION_PARSE_FAILED
        } else {
            response::SYSTEM_ERROR
        };
        return error(request, code, refused.remark);
    }
    let info = ClientInfo {
        client_id: data.client_id.clone(),
        language: request.language,
        version: request.version,
        last_update: Instant::now(),
        // Passed the ACL check in front of dispatch: a known account's name.
        access_key: broker
            .acl
            .is_some()
            .then(|| request.ext_fields.get(security::sign::ACCESS_KEY))
            .flatten()
            .map(str::to_owned),
    };
    let mut parse_failures = Vec::new();
    let mut refusals = Vec::new();
    let auto_create = broker
        .live
        .auto_create_subscription_group
        .load(Ordering::Relaxed);
    let mut may_create = broker.config.broker.max_auto_create_per_request as usize;
    for consumer in &data.consumer_data_set {
        let group = match broker.groups.get(&consumer.group_name) {
            Some(group) => Some(group),
            None if may_create == 0 => {
                broker.metrics.limits.auto_create_deferred.inc();
                None
            }
            None => {
                let created = broker
                    .groups
                    .find_or_create(&consumer.group_name, auto_create);
                may_create -= usize::from(created.is_some());
                created
            }
        };
        if let Some(group) = group {
            let sys_flag = if consumer.unit_mode { FLAG_UNIT_SUB } else { 0 };
            broker.topics.get_or_create_system(
                &names::retry_topic(&consumer.group_name),
                group.retry_queue_nums.max(1),
                perm::READ | perm::WRITE,
                sys_flag,
            );
        }
        // Checked before the heartbeat started; a concurrent heartbeat may have taken
        // the room since.
        let changed = match broker
            .clients
            .register_consumer(consumer, conn.id, info.clone())
        {
            Ok(changed) => changed,
            Err(refused) => {
                refuse(broker, refused.limit);
                refusals.push(refused.remark);
                continue;
            }
        };
        register_filters(broker, consumer, &mut parse_failures, &mut refusals);
        if changed {
            tracing::info!(group = %consumer.group_name, client = %data.client_id, "consumer joined");
            membership::notify_consumer_ids_changed(broker, &consumer.group_name);
        }
    }
    for producer in &data.producer_data_set {
        if let Err(refused) =
            broker
                .clients
                .register_producer(&producer.group_name, conn.id, info.clone())
        {
            refuse(broker, refused.limit);
            refusals.push(refused.remark);
        }
    }
    // 4.9 answers SUCCESS and lets the pulls fail with FILTER_DATA_NOT_EXIST; the client
    // is told here too (it logs a failed heartbeat), with the error's position. The
    // consumer stays registered, so its other subscriptions keep working.
    if !refusals.is_empty() {
        refusals.extend(parse_failures);
        return error(request, response::SYSTEM_ERROR, refusals.join("; "));
    }
    if !parse_failures.is_empty() {
        return error(
            request,
            response::SUBSCRIPTION_PARSE_FAILED,
            parse_failures.join("; "),
        );
    }
    Ok(success(request).into())
}

/// Counts a refusal by the limit whose key is `limit`.
fn refuse(broker: &Broker, limit: &'static str) {
    broker.metrics.limits.requests_refused.inc();
    broker.metrics.limits.refusals.count(limit);
}

/// `ConsumerFilterManager.register` for a member's SQL92 subscriptions (compiled here,
/// once per subscription version), then drops the group's entries for topics it no
/// longer subscribes to with SQL92.
fn register_filters(
    broker: &Broker,
    consumer: &ConsumerData,
    parse_failures: &mut Vec<String>,
    refusals: &mut Vec<String>,
) {
    let group = &consumer.group_name;
    for sub in &consumer.subscription_data_set {
        match broker.filters.register(group, sub) {
            Ok(()) => {}
            Err(FilterError::Limit { remark, .. }) => refusals.push(remark),
            Err(e) => {
                tracing::warn!(group = %group, topic = %sub.topic, error = %e, "subscription does not compile");
                parse_failures.push(format!(
                    "subscription of group {group} to topic {} ({}): {e}",
                    sub.topic,
                    crate::services::filter::excerpt(&sub.sub_string)
                ));
            }
        }
    }
    let subscribed = broker
        .clients
        .consumer_group(group)
        .map(|g| g.subscriptions)
        .unwrap_or_default();
    broker.filters.retain_group(group, |topic| {
        subscribed
            .get(topic)
            .is_some_and(|s| !is_tag_type(Some(&s.expression_type)))
    });
}

/// The heartbeat's size and names, and room for its memberships, checked before any
/// side effect.
fn check_heartbeat_bounds(
    broker: &Broker,
    conn: &Conn,
    data: &HeartbeatData,
) -> Result<(), Refused> {
    let b = &broker.config.broker;
    let refused = |limit: &'static str, remark: String| Refused { limit, remark };
    let max = b.max_heartbeat_groups as usize;
    let entries = data
        .consumer_data_set
        .len()
        .saturating_add(data.producer_data_set.len());
    if entries > max {
        return Err(refused(
            "maxHeartbeatGroups",
            format!(
                "heartbeat names {entries} consumer and producer groups, more than maxHeartbeatGroups {max}"
            ),
        ));
    }
    check_client_id(broker, &data.client_id)?;
    let groups = data
        .consumer_data_set
        .iter()
        .map(|c| c.group_name.as_str())
        .chain(data.producer_data_set.iter().map(|p| p.group_name.as_str()));
    for group in groups {
        names::validate_group(group).map_err(|remark| refused("groupName", remark))?;
    }
    let max_subs = b.max_subscriptions_per_group as usize;
    let max_len = b.filter_sql_max_length as usize;
    for consumer in &data.consumer_data_set {
        let subs = &consumer.subscription_data_set;
        if subs.len() > max_subs {
            return Err(refused(
                "maxSubscriptionsPerGroup",
                format!(
                    "group {} subscribes to {} topics, more than maxSubscriptionsPerGroup {max_subs}",
                    consumer.group_name,
                    subs.len()
                ),
            ));
        }
        for sub in subs {
            // Only the length: 4.9 lets a client subscribe to any name, and a name that
            // cannot be created does no harm beyond its bytes.
            if sub.topic.len() > names::MAX_TOPIC_LEN {
                return Err(refused(
                    "topicName",
                    format!(
                        "group {} subscribes to a topic name longer than {}",
                        consumer.group_name,
                        names::MAX_TOPIC_LEN
                    ),
                ));
            }
            if sub.tags_set.len() > max_subs || sub.code_set.len() > max_subs {
                return Err(refused(
                    "maxSubscriptionsPerGroup",
                    format!(
                        "the subscription of group {} to {} names more tags than maxSubscriptionsPerGroup {max_subs}",
                        consumer.group_name, sub.topic
                    ),
                ));
            }
            if sub.sub_string.len() > max_len {
                return Err(refused(
                    "filterSqlMaxLength",
                    format!(
                        "the subscription of group {} to {} is {} bytes long, more than filterSqlMaxLength {max_len}",
                        consumer.group_name,
                        sub.topic,
                        sub.sub_string.len()
                    ),
                ));
            }
        }
    }
    broker.clients.admits(
        conn.id,
        data.consumer_data_set.iter().map(|c| c.group_name.as_str()),
        data.producer_data_set.iter().map(|p| p.group_name.as_str()),
    )
}

/// `maxClientIdLength`: every membership and queue lock keeps its own copy of the id, so
/// one request naming many groups or queues would multiply an unbounded id.
fn check_client_id(broker: &Broker, client_id: &str) -> Result<(), Refused> {
    let max = broker.config.broker.max_client_id_length as usize;
    if client_id.len() > max {
        return Err(Refused {
            limit: "maxClientIdLength",
            remark: format!(
                "the client id is {} bytes long, more than maxClientIdLength {max}",
                client_id.len()
            ),
        });
    }
    Ok(())
}

pub fn unregister_client(
    broker: &Arc<Broker>,
    conn: &Conn,
    request: &RemotingCommand,
) -> HandlerResult {
    let h: UnregisterClientRequestHeader = request.header()?;
    if let Some(group) = h.producer_group.as_deref().filter(|g| !g.is_empty()) {
        broker.clients.unregister_producer(group, conn.id);
    }
    if let Some(group) = h.consumer_group.as_deref().filter(|g| !g.is_empty())
        && broker.clients.unregister_consumer(group, conn.id)
    {
        tracing::info!(group, client = %h.client_id, "consumer left");
        membership::consumer_unregistered(broker, group, &h.client_id);
    }
    Ok(success(request).into())
}

/// `CheckClientRequestBody`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CheckClientBody {
    #[serde(default)]
    subscription_data: Option<SubscriptionData>,
}

pub fn check_client_config(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let body: CheckClientBody = protocol::body::decode(&request.body)?;
    let Some(sub) = body.subscription_data else {
        return Ok(success(request).into());
    };
    // `ClientManageProcessor.checkClientConfig`: TAG passes; other types need
    // enablePropertyFilter, then must compile. Only parsing is checked.
    if is_tag_type(Some(&sub.expression_type)) {
        return Ok(success(request).into());
    }
    if !broker.config.broker.enable_property_filter {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!(
                "The broker does not support consumer to filter message by {}",
                sub.expression_type
            ),
        );
    }
    match broker
        .filters
        .compile(&sub.expression_type, &sub.sub_string)
    {
        Ok(_) => Ok(success(request).into()),
        Err(e) => error(request, response::SUBSCRIPTION_PARSE_FAILED, e.to_string()),
    }
}

pub fn consumer_list(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetConsumerListByGroupRequestHeader = request.header()?;
    let ids = broker.clients.consumer_ids(&h.consumer_group);
    if ids.is_empty() {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("no consumer for this group, {}", h.consumer_group),
        );
    }
    let body = ConsumerListBody {
        consumer_id_list: ids,
    };
    Ok(success(request)
        .with_body(protocol::body::encode(&body))
        .into())
}

/// Whether `client_id` belongs to another live connection of `group` (logged: a client
/// speaking for another's locks is a bug or an attack).
fn foreign_client_id(broker: &Broker, conn: &Conn, group: &str, client_id: &str) -> bool {
    let foreign = broker
        .clients
        .client_id_held_elsewhere(group, client_id, conn.id);
    if foreign {
        tracing::warn!(peer = %conn.peer, group, client_id, "queue lock request for another connection's client id ignored");
    }
    foreign
}

/// LOCK_BATCH_MQ. Only queues that exist on this broker can be locked, and only for a
/// subscription group it knows: the lock table is keyed by what the client names, so
/// anything else would let it grow without bound. Such queues are simply not in the
/// answer's locked set, as queues another client holds are not. A client id over
/// `maxClientIdLength` locks nothing (each lock keeps a copy of it), nor does a client
/// id another live connection of the group heart-beat with (4.9 lets any connection
/// lock or release queues under any client id).
pub fn lock_batch(broker: &Arc<Broker>, conn: &Conn, request: &RemotingCommand) -> HandlerResult {
    let body: LockBatchRequestBody = protocol::body::decode(&request.body)?;
    if let Err(refused) = check_client_id(broker, &body.client_id) {
        refuse(broker, refused.limit);
        return error(request, response::SYSTEM_ERROR, refused.remark);
    }
    let foreign = foreign_client_id(broker, conn, &body.consumer_group, &body.client_id);
    let lockable = if !foreign && broker.groups.get(&body.consumer_group).is_some() {
        let own = &broker.config.broker.broker_name;
        body.mq_set
            .iter()
            .filter(|mq| mq.broker_name == *own && broker.topics.has_queue(&mq.topic, mq.queue_id))
            .cloned()
            .collect()
    } else {
        Default::default()
    };
    let locked = broker.locks.try_lock_batch(
        &body.consumer_group,
        &lockable,
        &body.client_id,
        Instant::now(),
    );
    let out = LockBatchResponseBody {
        lock_ok_mq_set: locked,
    };
    Ok(success(request)
        .with_body(protocol::body::encode(&out))
        .into())
}

/// UNLOCK_BATCH_MQ: releases only locks of a client id this connection may speak for
/// (see [`lock_batch`]); another connection's are left alone, answered as 4.9 does.
pub fn unlock_batch(broker: &Arc<Broker>, conn: &Conn, request: &RemotingCommand) -> HandlerResult {
    let body: UnlockBatchRequestBody = protocol::body::decode(&request.body)?;
    if !foreign_client_id(broker, conn, &body.consumer_group, &body.client_id) {
        broker
            .locks
            .unlock_batch(&body.consumer_group, &body.mq_set, &body.client_id);
    }
    if request.is_oneway() {
        return Ok(Reply::None);
    }
    Ok(success(request).into())
}
