//! `message resend-dlq`: re-sends a consumer group's dead letters (`%DLQ%<group>`) to
//! the topic they came from.
//!
//! Guarantee (documented in docs/runbooks/consumer-lag-dlq.md): each copy keeps the
//! dead letter's body, KEYS, TAGS, user properties and its original `UNIQ_KEY` (client
//! msgId), and carries [`SOURCE_PROPERTY`] = the dead letter's offset msgId. Before
//! sending, the target topic is searched for that `UNIQ_KEY` (QUERY_MESSAGE on the
//! index); a copy with the same source is already there, so the message is skipped.
//! Re-running the command after a crash or a timeout therefore re-sends only what is
//! missing. Two runs at the same time may both send a message (at least once). The
//! dead letters stay in the DLQ (RocketMQ cannot delete single messages); they age out
//! with the CommitLog's retention.

use anyhow::{Context, Result, bail};
use protocol::message::properties;
use remoting::client::message::{Message, OutgoingMessage};
use remoting::client::pull::{MessageQuery, PullRequest, PullStatus};
use remoting::client::send::SendTo;
use remoting::client::{Client, Peer};
use serde_json::json;

use crate::ops_args::MessageOpsCmd;
use crate::output::{Report, Table};
use crate::targets::route_masters;

/// Property naming the dead letter a re-sent copy came from (its offset msgId).
pub const SOURCE_PROPERTY: &str = "RMQ_DLQ_SOURCE";
/// Group the DLQ is read as (pulls here never commit offsets).
const READ_GROUP: &str = "rmqctl_dlq_reader";
const PULL_BATCH: i32 = 32;
/// The resolution of store times read back from an IndexFile.
const INDEX_TIME_GRANULARITY_MS: i64 = 1000;

/// Properties the broker or the retry path set; a re-send starts without them.
const DROPPED: &[&str] = &[
    properties::DELAY,
    properties::REAL_TOPIC,
    properties::REAL_QID,
    properties::TRAN_MSG,
    properties::PGROUP,
    properties::MIN_OFFSET,
    properties::MAX_OFFSET,
    properties::RETRY_TOPIC,
    properties::RECONSUME_TIME,
    properties::MAX_RECONSUME_TIMES,
    properties::CONSUME_START_TIME,
    properties::TRAN_PREPARED_QUEUE_OFFSET,
    properties::TRANSACTION_CHECK_TIMES,
    properties::CHECK_IMMUNITY_TIME_IN_SECONDS,
    properties::CLUSTER,
    properties::KEYS,
    properties::TAGS,
];

pub async fn run(client: &Client, cmd: MessageOpsCmd) -> Result<Report> {
    let MessageOpsCmd::ResendDlq {
        group,
        max,
        to_topic,
        producer_group,
    } = cmd;
    let dlq = format!("%DLQ%{group}");
    let route = client
        .topic_route(&dlq)
        .await
        .with_context(|| format!("group {group} has no dead-letter topic {dlq}"))?;
    let mut table = Table::new(&["dlq msgId", "target topic", "result"]);
    let (mut resent, mut skipped) = (Vec::new(), Vec::new());
    'brokers: for t in route_masters(&route) {
        let queues = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == t.name)
            .map_or(0, |q| q.read_queue_nums);
        for q in 0..queues {
            let mut next = client.min_offset(&t.peer, &dlq, q).await?;
            loop {
                let req = PullRequest {
                    group: READ_GROUP,
                    topic: &dlq,
                    queue_id: q,
                    offset: next,
                    max_messages: PULL_BATCH,
                    subscription: "*",
                    expression_type: Default::default(),
                    suspend_ms: None,
                    commit_offset: None,
                };
                let pulled = client.pull(&t.peer, &req).await?;
                if pulled.status != PullStatus::Found || pulled.messages.is_empty() {
                    break;
                }
                for m in &pulled.messages {
                    if resent.len() >= max {
                        break 'brokers;
                    }
                    let target = match to_topic.as_deref().or(m.property(properties::RETRY_TOPIC)) {
                        Some(topic) => topic.to_owned(),
                        None => bail!(
                            "dead letter {} has no RETRY_TOPIC property; give --to-topic",
                            m.offset_msg_id
                        ),
                    };
                    if already_resent(client, &target, m).await? {
                        table.row(vec![
                            m.msg_id.clone(),
                            target.clone(),
                            "skipped (already re-sent)".into(),
                        ]);
                        skipped.push(json!({ "msgId": m.msg_id, "dlqOffsetMsgId": m.offset_msg_id, "topic": target }));
                        continue;
                    }
                    let r = resend(client, &target, m, &producer_group).await?;
                    table.row(vec![
                        m.msg_id.clone(),
                        target.clone(),
                        format!("re-sent to queue {}", r.1),
                    ]);
                    resent.push(json!({ "msgId": m.msg_id, "dlqOffsetMsgId": m.offset_msg_id, "topic": target, "broker": r.0, "queueId": r.1, "offsetMsgId": r.2 }));
                }
                if pulled.next_begin_offset <= next {
                    break;
                }
                next = pulled.next_begin_offset;
            }
        }
    }
    let summary = format!(
        "{} re-sent, {} skipped (already re-sent)",
        resent.len(),
        skipped.len()
    );
    Ok(Report::table(
        table,
        json!({ "group": group, "dlqTopic": dlq, "resent": resent, "skipped": skipped }),
    )
    .with_line(summary))
}

/// True when `target` already holds a copy of dead letter `m` (same UNIQ_KEY and source).
async fn already_resent(client: &Client, target: &str, m: &Message) -> Result<bool> {
    let route = match client.topic_route(target).await {
        Ok(r) => r,
        // A topic that does not exist yet (auto-creation) holds no copy.
        Err(e) if e.response_code().is_some() => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let mut query = MessageQuery::by_uniq_key(target, &m.msg_id);
    // Copies are stored after the dead letter, so the window starts there. IndexFile
    // entries keep whole seconds from the file's begin (`IndexFile.putKey` stores
    // `timeDiff / 1000`), so a copy stored in the same second reads back as up to 999 ms
    // earlier: open the window by one second. The original send, if it falls inside,
    // has no source property and does not count.
    query.begin_ms = m.store_timestamp.saturating_sub(INDEX_TIME_GRANULARITY_MS);
    query.max = 64;
    for t in route_masters(&route) {
        let found = client.query_messages(&t.peer, &query).await?;
        if found
            .iter()
            .any(|c| c.property(SOURCE_PROPERTY) == Some(m.offset_msg_id.as_str()))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Sends the copy to a writable queue of `target` chosen by the UNIQ_KEY (so a message
/// always goes to the same queue). Returns broker name, queue id and offset msgId.
async fn resend(
    client: &Client,
    target: &str,
    m: &Message,
    producer_group: &str,
) -> Result<(String, i32, String)> {
    let route = client.topic_route(target).await?;
    let mut slots: Vec<(String, String, i32)> = Vec::new();
    for b in &route.broker_datas {
        let Some(addr) = b.master_addr() else {
            continue;
        };
        let writable = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == b.broker_name)
            .map_or(0, |q| q.write_queue_nums);
        for q in 0..writable {
            slots.push((b.broker_name.clone(), addr.to_owned(), q));
        }
    }
    if slots.is_empty() {
        bail!("topic {target} has no writable queue");
    }
    let pick = m
        .msg_id
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let (name, addr, queue_id) = slots[(pick % slots.len() as u64) as usize].clone();
    let mut out = OutgoingMessage::new(target.to_owned(), m.body.clone());
    out.tags = m.tags().map(str::to_owned);
    out.keys = m
        .keys()
        .map(|k| {
            k.split(properties::KEY_SEPARATOR)
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    out.user_properties = m
        .properties
        .iter()
        .filter(|(k, _)| !DROPPED.contains(&k.as_str()))
        .cloned()
        .collect();
    out.user_properties
        .push((SOURCE_PROPERTY.to_owned(), m.offset_msg_id.clone()));
    // A dead letter without a client msgId is looked up by its offset msgId next time.
    if m.property(properties::UNIQ_KEY).is_none() {
        out.user_properties
            .push((properties::UNIQ_KEY.to_owned(), m.msg_id.clone()));
    }
    let peer = Peer::Broker(addr);
    let r = client
        .send(
            SendTo {
                broker: &peer,
                queue_id,
                producer_group,
            },
            &out,
            false,
        )
        .await
        .with_context(|| format!("re-sending dead letter {} to {target}", m.offset_msg_id))?;
    Ok((name, r.queue_id, r.offset_msg_id))
}
