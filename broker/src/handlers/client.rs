//! `ClientManageProcessor` and the client parts of `ConsumerManageProcessor` /
//! `AdminBrokerProcessor`: heartbeats, unregistration, consumer lists, queue locks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use protocol::RemotingCommand;
use protocol::body::{
    ConsumerListBody, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody, SubscriptionData,
    UnlockBatchRequestBody,
};
use protocol::code::{request as rq, response};
use protocol::header::{
    GetConsumerListByGroupRequestHeader, NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
};
use serde::Deserialize;

use super::{HandlerResult, Reply, error, success};
use crate::clients::ClientInfo;
use crate::connection::Conn;
use crate::filter::registry::is_tag_type;
use crate::names::{self, perm};
use crate::state::Broker;

/// `TopicSysFlag.FLAG_UNIT_SUB`.
const FLAG_UNIT_SUB: i32 = 0x2;

/// HEART_BEAT. Bounded before anything is touched: at most `maxHeartbeatGroups` entries
/// and only valid group names, else the whole heartbeat is refused; at most
/// `maxAutoCreatePerRequest` new groups (each with its `%RETRY%` topic) are created, the
/// rest on later heartbeats. The creations reach disk through one deferred persist per
/// file instead of 4.9's full rewrite per group on the request thread.
pub fn heartbeat(broker: &Arc<Broker>, conn: &Conn, request: &RemotingCommand) -> HandlerResult {
    let data: HeartbeatData = protocol::body::decode(&request.body)?;
    if let Err(remark) = check_heartbeat_bounds(broker, &data) {
        broker.metrics.limits.requests_refused.inc();
        return error(request, response::SYSTEM_ERROR, remark);
    }
    let info = ClientInfo {
        client_id: data.client_id.clone(),
        language: request.language,
        version: request.version,
        last_update: Instant::now(),
    };
    let mut parse_failures = Vec::new();
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
        // `ConsumerFilterManager.register`: SQL92 subscriptions are compiled here, once
        // per subscription version.
        for sub in &consumer.subscription_data_set {
            if let Err(e) = broker.filters.register(&consumer.group_name, sub) {
                tracing::warn!(group = %consumer.group_name, topic = %sub.topic, error = %e, "subscription does not compile");
                parse_failures.push(format!(
                    "subscription of group {} to topic {} ({}): {e}",
                    consumer.group_name,
                    sub.topic,
                    crate::filter::excerpt(&sub.sub_string)
                ));
            }
        }
        let changed = broker
            .clients
            .register_consumer(consumer, conn.id, info.clone());
        if changed {
            tracing::info!(group = %consumer.group_name, client = %data.client_id, "consumer joined");
            notify_consumer_ids_changed(broker, &consumer.group_name);
        }
    }
    for producer in &data.producer_data_set {
        broker
            .clients
            .register_producer(&producer.group_name, conn.id, info.clone());
    }
    // 4.9 answers SUCCESS and lets the pulls fail with FILTER_DATA_NOT_EXIST; the client
    // is told here too (it logs a failed heartbeat), with the error's position. The
    // consumer stays registered, so its other subscriptions keep working.
    if !parse_failures.is_empty() {
        return error(
            request,
            response::SUBSCRIPTION_PARSE_FAILED,
            parse_failures.join("; "),
        );
    }
    Ok(success(request).into())
}

/// `maxHeartbeatGroups` and the group-name rules, checked before any side effect.
fn check_heartbeat_bounds(broker: &Broker, data: &HeartbeatData) -> Result<(), String> {
    let max = broker.config.broker.max_heartbeat_groups as usize;
    let entries = data
        .consumer_data_set
        .len()
        .saturating_add(data.producer_data_set.len());
    if entries > max {
        return Err(format!(
            "heartbeat names {entries} consumer and producer groups, more than maxHeartbeatGroups {max}"
        ));
    }
    let groups = data
        .consumer_data_set
        .iter()
        .map(|c| c.group_name.as_str())
        .chain(data.producer_data_set.iter().map(|p| p.group_name.as_str()));
    for group in groups {
        names::validate_group(group)?;
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
        crate::connection::release_locks(broker, vec![(group.to_owned(), h.client_id.clone())]);
        notify_consumer_ids_changed(broker, group);
    }
    Ok(success(request).into())
}

/// Tells every member of `group` to rebalance (`Broker2Client.notifyConsumerIdsChanged`),
/// unless the group disabled it or the broker did.
pub fn notify_consumer_ids_changed(broker: &Broker, group: &str) {
    if !broker
        .live
        .notify_consumer_ids_changed_enable
        .load(Ordering::Relaxed)
    {
        return;
    }
    if broker
        .groups
        .get(group)
        .is_some_and(|g| !g.notify_consumer_ids_changed_enable)
    {
        return;
    }
    let header = NotifyConsumerIdsChangedRequestHeader {
        consumer_group: group.to_owned(),
    };
    for channel in broker.clients.consumer_channels(group) {
        let mut cmd = RemotingCommand::request(rq::NOTIFY_CONSUMER_IDS_CHANGED, &header);
        cmd.mark_oneway();
        if channel.outbound.try_send(cmd).is_err() {
            tracing::debug!(peer = %channel.peer, group, "notify dropped: connection busy or closed");
        }
    }
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

pub fn lock_batch(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let body: LockBatchRequestBody = protocol::body::decode(&request.body)?;
    let locked = broker.locks.try_lock_batch(
        &body.consumer_group,
        &body.mq_set,
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

pub fn unlock_batch(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let body: UnlockBatchRequestBody = protocol::body::decode(&request.body)?;
    broker
        .locks
        .unlock_batch(&body.consumer_group, &body.mq_set, &body.client_id);
    if request.is_oneway() {
        return Ok(Reply::None);
    }
    Ok(success(request).into())
}
