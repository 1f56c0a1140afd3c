//! Admin requests (`AdminBrokerProcessor`): topics, subscription groups,
//! runtime info, configuration, connection and offset statistics.
//!
//! A topic or group change answers only once `topics.json` / `subscriptionGroup.json`
//! holds it: the handler awaits a rewrite on the file's writer thread, shared with every
//! other change in flight (group commit), so the fsyncs never hold an async worker. When
//! that rewrite fails the change is not applied and the answer is SYSTEM_ERROR naming the
//! file and the error (4.9's `ConfigManager.persist` logs the failure and answers
//! SUCCESS with memory and disk apart).

use std::fmt::Write as _;
use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::body::topic_config::apply_attributes;
use protocol::body::{KvTable, MessageQueue, SubscriptionData, TopicConfig, TopicFilterType};
use protocol::code::response;
use protocol::header::{
    CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetTopicStatsInfoRequestHeader,
};
use serde::Serialize;
use store::config_files::{SubscriptionGroupConfig, WriteError};

use super::{HandlerResult, error, success};
use crate::names;
use crate::services::Broker;

/// The answer to a change whose rewrite failed: `what` was not done.
fn not_durable(request: &RemotingCommand, what: String, e: &WriteError) -> HandlerResult {
    tracing::error!(error = %e, "{what}");
    error(
        request,
        response::SYSTEM_ERROR,
        format!("{what}: {e} (the change was not applied)"),
    )
}

/// Topics that admin requests may not create or delete (`TopicValidator.isSystemTopic`).
fn is_system_topic(topic: &str, broker: &Broker) -> bool {
    names::is_not_allowed_send_topic(topic)
        || topic == names::AUTO_CREATE_TOPIC
        || topic == names::BENCHMARK_TOPIC
        || topic.starts_with("RMQ_SYS_")
        || topic == broker.config.broker.broker_cluster_name
        || topic == broker.config.broker.broker_name
}

/// Longest `attributes` header of UPDATE_AND_CREATE_TOPIC (a few short entries).
const MAX_ATTRIBUTES_HEADER: usize = 1024;

pub async fn create_topic(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: CreateTopicRequestHeader = request.header()?;
    if broker.is_slave() {
        return error(
            request,
            response::SYSTEM_ERROR,
            "Can't modify topic or subscription group from slave broker, please execute it from master broker.",
        );
    }
    if let Err(remark) = names::validate_topic(&h.topic) {
        return error(request, response::SYSTEM_ERROR, remark);
    }
    if is_system_topic(&h.topic, broker) {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("The topic[{}] is conflict with system topic.", h.topic),
        );
    }
    let Some(filter) = TopicFilterType::from_name(&h.topic_filter_type) else {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("unknown topicFilterType {}", h.topic_filter_type),
        );
    };
    let max = broker.config.broker.max_queue_nums;
    if !(1..=max).contains(&h.read_queue_nums) || !(1..=max).contains(&h.write_queue_nums) {
        // 4.9 takes any count; i32::MAX queues make stats requests loop 2^31 times and
        // clients allocate as many queues from the route.
        broker.metrics.limits.requests_refused.inc();
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("readQueueNums and writeQueueNums must be within 1..={max} (maxQueueNums)"),
        );
    }
    // 5.x attributes change the topic's current ones; without the header they stay
    // (`AttributeUtil.alterCurrentAttributes`).
    let current = broker
        .topics
        .get(&h.topic)
        .map(|t| t.attributes.clone())
        .unwrap_or_default();
    let attributes = match h.attributes.as_deref() {
        None => current,
        Some(a) if a.len() > MAX_ATTRIBUTES_HEADER => {
            broker.metrics.limits.requests_refused.inc();
            return error(
                request,
                response::SYSTEM_ERROR,
                format!("the attributes header is longer than {MAX_ATTRIBUTES_HEADER} bytes"),
            );
        }
        Some(a) => match apply_attributes(&current, a) {
            Ok(attrs) => attrs,
            Err(e) => return error(request, response::SYSTEM_ERROR, e.to_string()),
        },
    };
    let config = TopicConfig {
        topic_name: h.topic.clone(),
        read_queue_nums: h.read_queue_nums,
        write_queue_nums: h.write_queue_nums,
        perm: h.perm,
        topic_filter_type: filter,
        topic_sys_flag: h.topic_sys_flag.unwrap_or(0),
        order: h.order,
        attributes,
    };
    if broker.topics.is_full() && !broker.topics.contains(&h.topic) {
        broker.metrics.limits.refusals.count("maxTopics");
        return error(
            request,
            response::SYSTEM_ERROR,
            format!(
                "the broker holds maxTopics {} topics; topic[{}] was not created",
                broker.topics.max_topics(),
                h.topic
            ),
        );
    }
    if let Err(e) = broker.topics.upsert(config).await {
        return not_durable(
            request,
            format!("create or update topic[{}] failed", h.topic),
            &e,
        );
    }
    tracing::info!(topic = %h.topic, "topic created or updated by admin");
    Ok(success(request).into())
}

/// `AdminBrokerProcessor.deleteTopic`: the topic's config, its ConsumeQueues (files and
/// in-memory tables, so a re-created topic starts at offset 0) and its consumer offsets go.
/// The group's retry and DLQ topics are topics of their own and stay. RocketMQ 4.9 leaves
/// consumer offsets to a later scan; dropping them here keeps a re-created topic from
/// inheriting offsets of its old life. The ConsumeQueue files are removed on the blocking
/// pool.
pub async fn delete_topic(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: DeleteTopicRequestHeader = request.header()?;
    if broker.is_slave() {
        return error(
            request,
            response::SYSTEM_ERROR,
            "Can't modify topic or subscription group from slave broker, please execute it from master broker.",
        );
    }
    if let Err(remark) = names::validate_topic(&h.topic) {
        return error(request, response::SYSTEM_ERROR, remark);
    }
    if is_system_topic(&h.topic, broker) {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("The topic[{}] is conflict with system topic.", h.topic),
        );
    }
    // A task of its own, so the client hanging up mid-way cannot stop the deletion
    // between topics.json and the ConsumeQueues (a re-created topic would resume at the
    // old offsets).
    let deletion = tokio::spawn(delete_everywhere(Arc::clone(broker), h.topic.clone())).await;
    match deletion {
        Ok(Deletion::Done(queues)) => {
            tracing::info!(topic = %h.topic, queues, "topic deleted");
            Ok(success(request).into())
        }
        Ok(Deletion::NotDurable(e)) => {
            not_durable(request, format!("delete topic[{}] failed", h.topic), &e)
        }
        Ok(Deletion::Store(e)) => {
            tracing::error!(topic = %h.topic, error = %e, "deleting the topic's ConsumeQueues failed");
            error(
                request,
                response::SYSTEM_ERROR,
                format!("delete topic {} from the store failed: {e}", h.topic),
            )
        }
        Err(e) => error(
            request,
            response::SYSTEM_ERROR,
            format!("delete topic {} did not complete: {e}", h.topic),
        ),
    }
}

/// How a topic deletion ended.
enum Deletion {
    /// Gone from topics.json (on disk), the store (this many queues) and the offsets.
    Done(usize),
    /// topics.json could not be rewritten; nothing was deleted.
    NotDurable(WriteError),
    /// Gone from topics.json, but removing its ConsumeQueues failed.
    Store(String),
}

async fn delete_everywhere(broker: Arc<Broker>, topic: String) -> Deletion {
    if let Err(e) = broker.topics.delete(&topic).await {
        return Deletion::NotDurable(e);
    }
    broker.metrics.forget_topic(&topic);
    let (store, name) = (Arc::clone(&broker.store), topic.clone());
    // File removals and a deletedTopics.json rewrite: on the blocking pool.
    match tokio::task::spawn_blocking(move || store.delete_topic(&name)).await {
        Ok(Ok(queues)) => {
            broker.offsets.remove_topic(&topic);
            broker.pop.forget(None, Some(&topic));
            Deletion::Done(queues)
        }
        Ok(Err(e)) => Deletion::Store(e.to_string()),
        Err(e) => Deletion::Store(e.to_string()),
    }
}

pub fn all_topic_config(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    Ok(success(request)
        .with_body(protocol::body::encode(&broker.topics.wrapper()))
        .into())
}

pub async fn create_group(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    if broker.is_slave() {
        return error(
            request,
            response::SYSTEM_ERROR,
            "Can't modify topic or subscription group from slave broker, please execute it from master broker.",
        );
    }
    let config: SubscriptionGroupConfig = protocol::body::decode(&request.body)?;
    if config.group_name.trim().is_empty() {
        return error(request, response::SYSTEM_ERROR, "groupName is blank");
    }
    if let Err(remark) = names::validate_group(&config.group_name) {
        broker.metrics.limits.requests_refused.inc();
        return error(request, response::SYSTEM_ERROR, remark);
    }
    let max = broker.config.broker.max_queue_nums;
    if !(0..=max).contains(&config.retry_queue_nums) {
        broker.metrics.limits.requests_refused.inc();
        return error(
            request,
            response::SYSTEM_ERROR,
            format!("retryQueueNums must be within 0..={max} (maxQueueNums)"),
        );
    }
    let group = config.group_name.clone();
    if broker.groups.is_full() && broker.groups.get(&group).is_none() {
        broker
            .metrics
            .limits
            .refusals
            .count(crate::services::groups::MAX_GROUPS_KEY);
        return error(
            request,
            response::SYSTEM_ERROR,
            format!(
                "the broker holds maxSubscriptionGroups {} groups; group[{group}] was not created",
                broker.groups.max_groups()
            ),
        );
    }
    if let Err(e) = broker.groups.upsert(config).await {
        return not_durable(
            request,
            format!("create or update subscription group[{group}] failed"),
            &e,
        );
    }
    Ok(success(request).into())
}

pub fn all_groups(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    Ok(success(request)
        .with_body(protocol::body::encode(&broker.groups.snapshot()))
        .into())
}

pub async fn delete_group(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: DeleteSubscriptionGroupRequestHeader = request.header()?;
    if let Err(e) = broker.groups.delete(&h.group_name).await {
        return not_durable(
            request,
            format!("delete subscription group[{}] failed", h.group_name),
            &e,
        );
    }
    broker.metrics.forget_group(&h.group_name);
    if h.remove_offset {
        broker.offsets.remove_group(&h.group_name);
        broker.pop.forget(Some(&h.group_name), None);
    }
    Ok(success(request).into())
}

pub fn runtime_info(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let store = &broker.store;
    let m = &broker.metrics;
    let mut table = KvTable::default();
    let mut put = |k: &str, v: String| {
        table.table.insert(k.to_owned(), v);
    };
    put("brokerVersion", protocol::CURRENT_VERSION.to_string());
    put("brokerVersionDesc", "V4_9_8".to_owned());
    put("msgPutTotalTodayNow", m.put_messages_total().to_string());
    put("msgGetTotalTodayNow", m.get_messages_total().to_string());
    put(
        "dispatchBehindBytes",
        store.dispatch_behind_bytes().to_string(),
    );
    // Written but not yet on disk (RocketMQ 5.x `rocketmq_storage_flush_behind_bytes`).
    put("flushBehindBytes", store.flush_behind_bytes().to_string());
    put("commitLogMinOffset", store.min_phy_offset().to_string());
    put("commitLogMaxOffset", store.max_phy_offset().to_string());
    put("bootTimestamp", m.boot_timestamp().to_string());
    put("runtime", m.runtime_text());
    put("brokerActive", "true".to_owned());
    put("pullHoldCount", broker.pull_hold.parked().to_string());
    Ok(success(request)
        .with_body(protocol::body::encode(&table))
        .into())
}

pub fn broker_config(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let version = String::from_utf8(protocol::body::encode(&broker.topics.data_version()))
        .unwrap_or_default();
    Ok(success(request)
        .with_header(&GetBrokerConfigResponseHeader { version })
        .with_body(broker.live.overlay(&broker.config.render()).into_bytes())
        .into())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConsumerConnection {
    connection_set: Vec<super::producer::Connection>,
    consume_from_where: protocol::body::ConsumeFromWhere,
    consume_type: protocol::body::ConsumeType,
    message_model: protocol::body::MessageModel,
    subscription_table: std::collections::BTreeMap<String, SubscriptionData>,
}

pub fn consumer_connections(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetConsumerConnectionListRequestHeader = request.header()?;
    let Some((info, conns)) = broker.clients.consumer_connections(&h.consumer_group) else {
        return error(
            request,
            response::CONSUMER_NOT_ONLINE,
            format!("the consumer group[{}] not online", h.consumer_group),
        );
    };
    let body = ConsumerConnection {
        connection_set: super::producer::connection_set(conns),
        consume_from_where: info.consume_from_where,
        consume_type: info.consume_type,
        message_model: info.message_model,
        subscription_table: info.subscriptions,
    };
    Ok(success(request)
        .with_body(protocol::body::encode(&body))
        .into())
}

/// Writes fastjson's `Map<MessageQueue, V>`: object keys, unquoted.
fn object_keyed_map(out: &mut String, entries: impl IntoIterator<Item = (MessageQueue, Vec<u8>)>) {
    out.push('{');
    for (n, (mq, value)) in entries.into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&String::from_utf8_lossy(&protocol::body::encode(&mq)));
        out.push(':');
        out.push_str(&String::from_utf8_lossy(&value));
    }
    out.push('}');
}

fn queue(broker: &Broker, topic: &str, queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: topic.to_owned(),
        broker_name: broker.config.broker.broker_name.clone(),
        queue_id,
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TopicOffset {
    last_update_timestamp: i64,
    max_offset: i64,
    min_offset: i64,
}

pub fn topic_stats(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetTopicStatsInfoRequestHeader = request.header()?;
    let Some(topic) = broker.topics.get(&h.topic) else {
        return error(
            request,
            response::TOPIC_NOT_EXIST,
            format!("topic[{}] not exist", h.topic),
        );
    };
    let store = &broker.store;
    let entries = (0..topic.write_queue_nums).map(|q| {
        let max = store.max_offset_in_queue(&h.topic, q);
        let min = store.min_offset_in_queue(&h.topic, q);
        let last = if max.get() > 0 {
            store
                .message_store_time(&h.topic, q, protocol::message::QueueOffset(max.get() - 1))
                .unwrap_or(0)
        } else {
            0
        };
        let value = TopicOffset {
            last_update_timestamp: last,
            max_offset: max.get(),
            min_offset: min.get(),
        };
        (queue(broker, &h.topic, q), protocol::body::encode(&value))
    });
    let mut out = String::from("{\"offsetTable\":");
    object_keyed_map(&mut out, entries);
    out.push('}');
    Ok(success(request).with_body(out.into_bytes()).into())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OffsetWrapper {
    broker_offset: i64,
    consumer_offset: i64,
    last_timestamp: i64,
}

pub fn consume_stats(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetConsumeStatsRequestHeader = request.header()?;
    let topics: Vec<String> = match h.topic.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => vec![t.to_owned()],
        None => broker
            .offsets
            .topics_of_group(&h.consumer_group)
            .into_iter()
            .map(|(t, _)| t)
            .collect(),
    };
    let store = &broker.store;
    let mut entries = Vec::new();
    let mut consume_tps = 0.0;
    for topic in topics {
        consume_tps += broker.consume_rate.tps(&h.consumer_group, &topic);
        let Some(config) = broker.topics.get(&topic) else {
            continue;
        };
        for q in 0..config.read_queue_nums {
            let broker_offset = store.max_offset_in_queue(&topic, q).get();
            let consumer_offset = broker
                .offsets
                .query(&h.consumer_group, &topic, q)
                .map_or(0, |o| o.get().max(0));
            let last_timestamp = if consumer_offset > 0 {
                store
                    .message_store_time(
                        &topic,
                        q,
                        protocol::message::QueueOffset(consumer_offset - 1),
                    )
                    .unwrap_or(0)
            } else {
                0
            };
            let value = OffsetWrapper {
                broker_offset,
                consumer_offset,
                last_timestamp,
            };
            entries.push((queue(broker, &topic, q), protocol::body::encode(&value)));
        }
    }
    let mut out = String::new();
    let _ = write!(out, "{{\"consumeTps\":{consume_tps:?},\"offsetTable\":");
    object_keyed_map(&mut out, entries);
    out.push('}');
    Ok(success(request).with_body(out.into_bytes()).into())
}
