//! SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (`SendMessageProcessor`,
//! `AbstractSendMessageProcessor.msgCheck`).

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::body::{TopicConfig, TopicFilterType};
use protocol::code::{request as rq, response};
use protocol::header::{
    SEND_RESPONSE_MSG_REGION, SEND_RESPONSE_TRACE_ON, SendMessageRequestHeader,
    SendMessageResponseHeader,
};
use protocol::message::compress::{self, DecompressError};
use protocol::message::properties::{self, CLUSTER, WAIT};
use protocol::message::{MessageSysFlag, PhysicalOffset, Properties};
use store::commitlog::{BatchItem, BatchMessage, BrokerMessage};
use store::{PutMessageResult, PutMessageStatus};

use super::{HandlerResult, error};
use crate::names::{self, perm};
use crate::services::Broker;
use crate::services::clients::Conn;
use crate::services::put_path::Put;
use crate::services::stamps;
use crate::services::topics::AutoCreateError;

/// Request versions from V3_4_9 on carry `maxReconsumeTimes` (`MQVersion`).
pub(crate) const VERSION_WITH_MAX_RECONSUME: i32 = 121;
const ILLEGAL_REMARK: &str = "the message is illegal, maybe msg body or properties length not matched. msg body length limit 128k, msg properties length limit 32k.";

pub async fn send_message(
    broker: &Arc<Broker>,
    conn: &Conn,
    request: &RemotingCommand,
) -> HandlerResult {
    let h = SendMessageRequestHeader::read_for_code(request.code, &request.ext_fields)?;
    let batch = request.code == rq::SEND_BATCH_MESSAGE || h.batch;
    let b = &broker.config.broker;

    if broker.is_slave() || broker.ha.get().is_some_and(|ha| ha.is_fenced()) {
        return error(
            request,
            response::SERVICE_NOT_AVAILABLE,
            "service not available now, the broker is a slave",
        );
    }
    let checked = match check(broker, request, &h) {
        Ok(c) => c,
        Err(reply) => return Ok((*reply).into()),
    };
    let (mut topic, topic_config) = (h.topic.clone(), checked);
    let mut queue_id = h.queue_id;
    if queue_id < 0 {
        queue_id = random_index(topic_config.write_queue_nums.max(1));
    }

    let properties = h.properties.clone().unwrap_or_default();
    let reconsume_times = h.reconsume_times.unwrap_or(0);
    if let Some(group) = h.topic.strip_prefix(names::RETRY_GROUP_TOPIC_PREFIX) {
        // `handleRetryAndDLQ`: too many retries go to the group's dead letter queue.
        // `findSubscriptionGroupConfig` creates the group when auto-creation is on.
        let auto_create = broker
            .live
            .auto_create_subscription_group
            .load(std::sync::atomic::Ordering::Relaxed);
        let Some(group_config) = broker.groups.find_or_create(group, auto_create) else {
            return error(
                request,
                response::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group not exist, {group}"),
            );
        };
        let max = match h.max_reconsume_times {
            Some(m) if request.version >= VERSION_WITH_MAX_RECONSUME => m,
            _ => group_config.retry_max_times,
        };
        if reconsume_times >= max {
            let dlq = names::dlq_topic(group);
            broker.topics.get_or_create_system(
                &dlq,
                names::DLQ_QUEUE_NUMS,
                perm::READ | perm::WRITE,
                0,
            );
            topic = dlq.into();
            queue_id = 0;
            tracing::warn!(
                group,
                reconsume_times,
                "message sent to the retry topic moved to the dead letter queue"
            );
            broker.metrics.record_dlq(group);
        } else {
            broker.metrics.record_retry(group);
        }
    }

    let half = !batch && crate::services::transaction::half::is_half(&properties);
    if half && b.reject_transaction_message {
        return error(
            request,
            response::NO_PERMISSION,
            format!(
                "the broker[{}] sending transaction message is forbidden",
                b.broker_ip1
            ),
        );
    }

    let max_body = broker.config.store.max_message_size as usize;
    if request.body.len() > max_body || properties.len() > i16::MAX as usize {
        broker.metrics.rejected_illegal();
        return error(request, response::MESSAGE_ILLEGAL, ILLEGAL_REMARK);
    }

    // The C++ client compresses a whole batch body over its `compressMsgBodyOverHowmuch`
    // and flags the request COMPRESSED; Java producers never compress a batch. The body is
    // inflated (at most `maxMessageSize` bytes) and its messages are stored plain with
    // the flag cleared, as 4.9 stores the entries of an uncompressed batch, so every
    // consumer reads them as sent.
    let mut sys_flag = h.sys_flag;
    let mut batch_body = request.body.clone();
    if batch && sys_flag.is_compressed() {
        match inflate_batch(sys_flag, &request.body, max_body) {
            Ok(plain) => {
                batch_body = plain.into();
                sys_flag =
                    sys_flag.without(MessageSysFlag::COMPRESSED | MessageSysFlag::COMPRESSION_MASK);
            }
            Err((too_large, remark)) => {
                broker.metrics.rejected_illegal();
                if too_large {
                    broker.metrics.limits.refusals.count("maxMessageSize");
                }
                return error(request, response::MESSAGE_ILLEGAL, remark);
            }
        }
    }

    // A batch (SEND_BATCH_MESSAGE, or batch="true"/"1" as the C++ client sends it) must
    // decode as one; otherwise nothing is stored.
    if batch && let Err(e) = protocol::message::batch::validate(&batch_body) {
        broker.metrics.rejected_illegal();
        return error(
            request,
            response::MESSAGE_ILLEGAL,
            format!("the body of a batch send is not a valid message batch: {e}"),
        );
    }

    if batch && let Err(remark) = check_batch_flags(h.sys_flag, &properties) {
        broker.metrics.rejected_illegal();
        return error(request, response::MESSAGE_ILLEGAL, remark);
    }

    if topic_config.topic_filter_type == TopicFilterType::MultiTag {
        sys_flag = sys_flag.with(MessageSysFlag::MULTI_TAGS);
    }
    // `WAIT` decides whether the answer waits for the store's durability; default true.
    let wait_store_ok =
        properties::find(&properties, WAIT).is_none_or(|v| v.eq_ignore_ascii_case("true"));
    let store_host = broker.store_host();
    let body_len = request.body.len() as u64;
    let result = if batch {
        let mut batch_props = Properties::parse(&properties);
        batch_props.remove(CLUSTER);
        for name in stamps::BROKER_OWNED {
            batch_props.remove(name);
        }
        batch_props.insert(CLUSTER, b.broker_cluster_name.as_str());
        match BatchItem::decode_batch(&batch_body, &batch_props.to_string()) {
            Some(mut items) => {
                for item in &mut items {
                    drop_broker_owned(&mut item.properties);
                }
                broker
                    .put(Put::Batch(BatchMessage {
                        topic: topic.to_string(),
                        queue_id,
                        sys_flag,
                        born_timestamp: h.born_timestamp,
                        born_host: conn.peer,
                        store_host,
                        reconsume_times,
                        wait_store_msg_ok: wait_store_ok,
                        items,
                    }))
                    .await
            }
            None => PutMessageResult::failed(PutMessageStatus::MessageIllegal),
        }
    } else {
        let mut put = BrokerMessage {
            topic: topic.to_string(),
            queue_id,
            flag: h.flag,
            body: request.body.clone(),
            properties: store_properties(&properties, &b.broker_cluster_name),
            sys_flag,
            born_timestamp: h.born_timestamp,
            born_host: conn.peer,
            store_host,
            reconsume_times,
            prepared_transaction_offset: PhysicalOffset(0),
            wait_store_msg_ok: wait_store_ok,
        };
        if half {
            crate::services::transaction::half::to_half(&mut put);
        }
        let result = broker.put(Put::Message(put)).await;
        if half && result.status == PutMessageStatus::PutOk {
            broker.metrics.transactions.half_sent();
        }
        result
    };
    Ok(answer(broker, request, &topic, queue_id, body_len, result).into())
}

/// The plain body of a compressed batch, or `(whether a limit refused it, remark)`.
fn inflate_batch(
    sys_flag: MessageSysFlag,
    body: &[u8],
    max_body: usize,
) -> Result<Vec<u8>, (bool, String)> {
    match compress::plain_body(sys_flag, body, max_body) {
        Ok(plain) => Ok(plain.into_owned()),
        Err(DecompressError::TooLarge(cap)) => Err((
            true,
            format!(
                "the compressed batch inflates to more than maxMessageSize ({cap} bytes); \
                 send smaller batches or raise maxMessageSize"
            ),
        )),
        Err(e) => Err((
            false,
            format!("the compressed batch body cannot be inflated: {e}"),
        )),
    }
}

/// `CommitLog.asyncPutMessages`' refusals of a batch: no transaction flag (nothing would
/// ever check or decide its records) and no batch-level delay (its records would be
/// stored as due at once).
fn check_batch_flags(sys_flag: MessageSysFlag, properties: &str) -> Result<(), &'static str> {
    if sys_flag.transaction_type() != protocol::message::TransactionType::Not {
        return Err("a batch of messages cannot be transactional");
    }
    match properties::find(properties, properties::DELAY).map(|d| d.trim().parse::<i32>()) {
        None | Some(Ok(..=0)) => Ok(()),
        Some(_) => Err("a batch of messages cannot be delayed (DELAY is set on the batch)"),
    }
}

/// `msgCheck`: the topic's config, or the error answer.
fn check(
    broker: &Broker,
    request: &RemotingCommand,
    h: &SendMessageRequestHeader,
) -> Result<TopicConfig, Box<RemotingCommand>> {
    let b = &broker.config.broker;
    let fail =
        |code, remark: String| Box::new(RemotingCommand::error_response(request, code, remark));
    if !perm::is_writeable(broker.live.broker_permission()) {
        return Err(fail(
            response::NO_PERMISSION,
            format!("the broker[{}] sending message is forbidden", b.broker_ip1),
        ));
    }
    if let Err(remark) = names::validate_topic(&h.topic) {
        return Err(fail(response::SYSTEM_ERROR, remark));
    }
    if names::is_not_allowed_send_topic(&h.topic) {
        return Err(fail(
            response::NO_PERMISSION,
            format!("Sending message to topic[{}] is forbidden.", h.topic),
        ));
    }
    let config = if let Some(group) = h.topic.strip_prefix(names::RETRY_GROUP_TOPIC_PREFIX) {
        // A retry topic belongs to its group: it is created only for a group that exists
        // (or may be auto-created), so sends cannot mint topics for made-up groups.
        let auto_create = broker
            .live
            .auto_create_subscription_group
            .load(std::sync::atomic::Ordering::Relaxed);
        if broker.groups.find_or_create(group, auto_create).is_none() {
            return Err(fail(
                response::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group not exist, {group}"),
            ));
        }
        // `createTopicInSendMessageBackMethod`: retry topics get one queue.
        Ok((
            broker
                .topics
                .get_or_create_system(&h.topic, 1, perm::READ | perm::WRITE, 0),
            false,
        ))
    } else {
        broker
            .topics
            .get_or_auto_create(&h.topic, &h.default_topic, h.default_topic_queue_nums, 0)
    };
    let config = match config {
        Ok((config, created)) => {
            if created {
                tracing::info!(topic = %h.topic, producer_group = %h.producer_group, "topic auto-created by send");
            }
            config
        }
        Err(e @ AutoCreateError::Full { .. }) => {
            broker.metrics.limits.refusals.count("maxTopics");
            return Err(fail(response::SYSTEM_ERROR, e.to_string()));
        }
        Err(e) => return Err(fail(response::TOPIC_NOT_EXIST, e.to_string())),
    };
    if !perm::is_writeable(config.perm) {
        return Err(fail(
            response::NO_PERMISSION,
            format!("the topic[{}] sending message is forbidden", h.topic),
        ));
    }
    let id_limit = config.write_queue_nums.max(config.read_queue_nums);
    if h.queue_id >= id_limit {
        return Err(fail(
            response::SYSTEM_ERROR,
            format!(
                "request queueId[{}] is illegal, {:?} Producer: {}",
                h.queue_id, config, h.producer_group
            ),
        ));
    }
    Ok(config)
}

/// `handlePutMessageResult`.
fn answer(
    broker: &Broker,
    request: &RemotingCommand,
    topic: &str,
    queue_id: i32,
    body_len: u64,
    result: PutMessageResult,
) -> RemotingCommand {
    let code = match result.status {
        PutMessageStatus::PutOk => response::SUCCESS,
        PutMessageStatus::FlushDiskTimeout => response::FLUSH_DISK_TIMEOUT,
        PutMessageStatus::FlushSlaveTimeout => response::FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus::SlaveNotAvailable => response::SLAVE_NOT_AVAILABLE,
        PutMessageStatus::CreateMapedFileFailed => {
            return RemotingCommand::error_response(
                request,
                response::SYSTEM_ERROR,
                "create mapped file failed, server is busy or broken.",
            );
        }
        PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded => {
            broker.metrics.rejected_illegal();
            return RemotingCommand::error_response(
                request,
                response::MESSAGE_ILLEGAL,
                ILLEGAL_REMARK,
            );
        }
        PutMessageStatus::ServiceNotAvailable => {
            return RemotingCommand::error_response(
                request,
                response::SERVICE_NOT_AVAILABLE,
                "service not available now. It may be caused by one of the following reasons: the broker's disk is full, messages are put to the slave, message store has been shut down, etc.",
            );
        }
        PutMessageStatus::OsPageCacheBusy => {
            return RemotingCommand::error_response(
                request,
                response::SYSTEM_BUSY,
                "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
            );
        }
        PutMessageStatus::UnknownError => {
            return RemotingCommand::error_response(
                request,
                response::SYSTEM_ERROR,
                "UNKNOWN_ERROR",
            );
        }
    };
    let Some(appended) = result.append else {
        return RemotingCommand::error_response(
            request,
            response::SYSTEM_ERROR,
            "store reported success without a position",
        );
    };
    broker
        .metrics
        .record_put(topic, u64::from(appended.msg_num), body_len);
    let header = SendMessageResponseHeader {
        msg_id: appended.msg_ids(),
        queue_id,
        queue_offset: appended.logics_offset,
        transaction_id: None,
    };
    let mut out = RemotingCommand::response_to(request, code).with_header(&header);
    let b = &broker.config.broker;
    out.ext_fields
        .insert(SEND_RESPONSE_MSG_REGION, b.region_id.clone());
    out.ext_fields.insert(
        SEND_RESPONSE_TRACE_ON,
        if b.trace_on { "true" } else { "false" },
    );
    if code != response::SUCCESS {
        out.remark = Some(format!("{:?}", result.status));
    }
    out
}

/// The properties a single message is stored with: `WAIT` removed (4.9.1+), `CLUSTER`
/// set to the broker's cluster and moved last (`SendMessageProcessor`), and every
/// property only the broker may write ([`stamps::BROKER_OWNED`]) dropped. Written in one
/// pass over borrowed entries; the result equals parsing into [`Properties`], editing
/// and encoding (a repeated name keeps its first position and its last value).
fn store_properties(text: &str, cluster: &str) -> String {
    /// Beyond this many entries the quadratic duplicate check below gives way to the map.
    const SCAN_MAX: usize = 32;
    let mut entries: Vec<(&str, &str)> = Vec::with_capacity(8);
    let kept = |n: &str| n != WAIT && n != CLUSTER && !stamps::is_broker_owned(n);
    for entry in properties::iter(text).filter(|(n, _)| kept(n)) {
        if entries.len() == SCAN_MAX {
            let mut props = Properties::parse(text);
            props.remove(WAIT);
            props.remove(CLUSTER);
            for name in stamps::BROKER_OWNED {
                props.remove(name);
            }
            props.insert(CLUSTER, cluster);
            return props.to_string();
        }
        entries.push(entry);
    }
    let mut out = String::with_capacity(text.len() + CLUSTER.len() + cluster.len() + 2);
    for (i, (name, _)) in entries.iter().enumerate() {
        if entries[..i].iter().any(|(n, _)| n == name) {
            continue;
        }
        let value = entries[i..]
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| *v);
        out.push_str(name);
        out.push(properties::NAME_VALUE_SEPARATOR);
        out.push_str(value);
        out.push(properties::PROPERTY_SEPARATOR);
    }
    out.push_str(CLUSTER);
    out.push(properties::NAME_VALUE_SEPARATOR);
    out.push_str(cluster);
    out
}

/// Drops what only the broker writes ([`stamps::BROKER_OWNED`]) from one record of a
/// batch: the inner messages carry properties of their own, which the batch-level
/// stripping above never sees. Untouched (no allocation) when none is present.
fn drop_broker_owned(props: &mut String) {
    if !properties::iter(props).any(|(n, _)| stamps::is_broker_owned(n)) {
        return;
    }
    let mut out = String::with_capacity(props.len());
    for (name, value) in properties::iter(props).filter(|(n, _)| !stamps::is_broker_owned(n)) {
        if !out.is_empty() {
            out.push(properties::PROPERTY_SEPARATOR);
        }
        out.push_str(name);
        out.push(properties::NAME_VALUE_SEPARATOR);
        out.push_str(value);
    }
    *props = out;
}

/// A uniformly spread index in `0..n` (RocketMQ picks a random queue).
pub(crate) fn random_index(n: i32) -> i32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(crate::now_ms() as u64);
    (h.finish() % n.max(1) as u64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_records_lose_broker_owned_properties() {
        let mut joined = String::new();
        properties::join_batch_properties(
            "DELAY_PARKED_OFFSET\u{1}123\u{2}KEYS\u{1}k\u{2}REAL_TOPIC\u{1}T",
            "CLUSTER\u{1}C1",
            &mut joined,
        );
        drop_broker_owned(&mut joined);
        assert_eq!(joined, "KEYS\u{1}k\u{2}CLUSTER\u{1}C1");
        let mut clean = "KEYS\u{1}k\u{2}CLUSTER\u{1}C1".to_owned();
        drop_broker_owned(&mut clean);
        assert_eq!(clean, "KEYS\u{1}k\u{2}CLUSTER\u{1}C1");
    }

    #[test]
    fn store_properties_drop_wait_and_set_cluster_last() {
        let sent = "TAGS\u{1}TagA\u{2}WAIT\u{1}false\u{2}CLUSTER\u{1}x\u{2}KEYS\u{1}k1 k2\u{2}";
        assert_eq!(
            store_properties(sent, "C1"),
            "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}CLUSTER\u{1}C1"
        );
        assert_eq!(store_properties("", "C1"), "CLUSTER\u{1}C1");
    }

    /// What `store_properties` must equal: parse, edit, encode.
    fn store_properties_by_map(text: &str, cluster: &str) -> String {
        let mut props = Properties::parse(text);
        props.remove(WAIT);
        props.remove(CLUSTER);
        for name in stamps::BROKER_OWNED {
            props.remove(name);
        }
        props.insert(CLUSTER, cluster);
        props.to_string()
    }

    #[test]
    fn store_properties_drop_what_only_the_broker_writes() {
        let sent = "UNIQ_KEY\u{1}U\u{2}TRAN_ORIGIN_OFFSET\u{1}0\u{2}REAL_TOPIC\u{1}Secret\u{2}\
                    DELAY_PARKED_OFFSET\u{1}7\u{2}TRANSACTION_CHECK_TIMES\u{1}99\u{2}\
                    TRAN_PREPARED_QUEUE_OFFSET\u{1}3\u{2}REAL_QID\u{1}1\u{2}TAGS\u{1}t";
        assert_eq!(
            store_properties(sent, "C1"),
            "UNIQ_KEY\u{1}U\u{2}TAGS\u{1}t\u{2}CLUSTER\u{1}C1"
        );
        assert_eq!(
            store_properties(sent, "C1"),
            store_properties_by_map(sent, "C1")
        );
    }

    #[test]
    fn store_properties_repeated_names_keep_first_place_last_value() {
        let sent =
            "A\u{1}1\u{2}B\u{1}2\u{2}A\u{1}3\u{2}\u{2}C\u{2}\u{1}x\u{2}D\u{1}\u{2}WAIT\u{1}true";
        assert_eq!(
            store_properties(sent, "C1"),
            "A\u{1}3\u{2}B\u{1}2\u{2}CLUSTER\u{1}C1"
        );
        assert_eq!(
            store_properties(sent, "C1"),
            store_properties_by_map(sent, "C1")
        );
    }

    #[test]
    fn store_properties_many_entries_fall_back_to_the_map() {
        let sent: String = (0..100)
            .map(|i| format!("K{}\u{1}v{i}\u{2}", i % 40))
            .collect();
        assert_eq!(
            store_properties(&sent, "C"),
            store_properties_by_map(&sent, "C")
        );
    }

    proptest::proptest! {
        #[test]
        fn store_properties_equals_the_map_round_trip(
            parts in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["", "TAGS", "KEYS", "WAIT", "CLUSTER", "A", "UNIQ_KEY", "REAL_TOPIC", "TRAN_ORIGIN_OFFSET"]),
                    "[a-c\u{1}\u{2}]{0,4}",
                ),
                0..12,
            ),
            sep in proptest::sample::select(vec!["\u{1}", "", "\u{2}"]),
        ) {
            let text: String = parts
                .iter()
                .map(|(n, v)| format!("{n}{sep}{v}\u{2}"))
                .collect();
            proptest::prop_assert_eq!(
                store_properties(&text, "DefaultCluster"),
                store_properties_by_map(&text, "DefaultCluster")
            );
        }
    }
}
