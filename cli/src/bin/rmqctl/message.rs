//! The `message` family: send, consume (pull without committing), query by key, view
//! by id.

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use protocol::message::QueueOffset;
use remoting::client::message::{Message, OutgoingMessage};
use remoting::client::pull::{ExpressionType, MessageQuery, PullRequest, PullStatus};
use remoting::client::send::SendTo;
use remoting::client::{Client, Peer};
use serde_json::{Value, json};

use crate::args::MessageCmd;
use crate::failure::Failure;
use crate::output::{Report, Table, timestamp};
use crate::targets::route_masters;

/// The largest body `message send` reads from a file or stdin (the broker's default
/// `maxMessageSize`); a longer input is refused before it is read whole.
const MAX_BODY: u64 = 4 * 1024 * 1024;

/// The body of `message send`: `--body`, or `--body-file` (`-` is stdin).
fn read_body(body: Option<String>, file: Option<&std::path::Path>) -> Result<Bytes> {
    use std::io::Read as _;
    let Some(path) = file else {
        return Ok(Bytes::from(body.unwrap_or_default().into_bytes()));
    };
    let mut out = Vec::new();
    let what = if path.as_os_str() == "-" {
        std::io::stdin()
            .lock()
            .take(MAX_BODY + 1)
            .read_to_end(&mut out)
            .context("reading the body from standard input")?;
        "standard input".to_owned()
    } else {
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_BODY + 1).read_to_end(&mut out))
            .with_context(|| format!("reading the body from {}", path.display()))?;
        path.display().to_string()
    };
    if out.len() as u64 > MAX_BODY {
        bail!("the body in {what} is larger than {MAX_BODY} bytes");
    }
    Ok(Bytes::from(out))
}

/// Messages per PULL_MESSAGE.
const PULL_BATCH: i32 = 32;
/// Body characters shown in table mode.
const BODY_PREVIEW: usize = 60;

pub async fn run(client: &Client, cmd: MessageCmd) -> Result<Report> {
    match cmd {
        MessageCmd::Ops(c) => crate::dlq::run(client, c).await,
        MessageCmd::Send {
            topic,
            body,
            body_file,
            tags,
            keys,
            queue,
            broker_name,
            delay_level,
            producer_group,
            no_auto_create,
        } => {
            let publish = match client.publish_route(&topic, !no_auto_create).await {
                Ok(p) => p,
                Err(e) => return Err(crate::targets::explain_missing_route(client, e.into()).await),
            };
            let route = publish.route;
            let broker = route
                .broker_datas
                .iter()
                .filter(|b| broker_name.as_ref().is_none_or(|n| *n == b.broker_name))
                .find_map(|b| {
                    b.master_addr()
                        .map(|a| (b.broker_name.clone(), a.to_owned()))
                })
                .with_context(|| match &broker_name {
                    Some(n) => format!("topic {topic} has no master on broker {n}"),
                    None => format!("topic {topic} has no master broker in its route"),
                })?;
            let writable = route
                .queue_datas
                .iter()
                .find(|q| q.broker_name == broker.0)
                .map_or(0, |q| q.write_queue_nums);
            let queue_id = queue.unwrap_or(0);
            if queue_id < 0 || queue_id >= writable {
                bail!(
                    "queue {queue_id} is not writable on broker {} (write queues: {writable})",
                    broker.0
                );
            }
            let body = read_body(body, body_file.as_deref())?;
            let mut msg = OutgoingMessage::new(topic.clone(), body);
            msg.tags = tags;
            msg.keys = keys;
            msg.delay_level = delay_level;
            let peer = Peer::Broker(broker.1.clone());
            let to = SendTo {
                broker: &peer,
                queue_id,
                producer_group: &producer_group,
            };
            let r = client.send(to, &msg, false).await.map_err(|e| {
                let refused = e.response_code() == Some(protocol::code::response::TOPIC_NOT_EXIST);
                let e = anyhow::Error::from(e);
                if publish.via_default && refused {
                    e.context(format!(
                        "topic {topic} does not exist and broker {} did not create it \
                         (autoCreateTopicEnable is off there): create it first (rmqctl topic create)",
                        broker.0
                    ))
                } else {
                    e
                }
            })?;
            let status = serde_json::to_value(r.status)?;
            Ok(Report::text(
                format!(
                    "{} msgId={} offsetMsgId={} broker={} queue={} queueOffset={}",
                    status.as_str().unwrap_or("?"),
                    r.msg_id,
                    r.offset_msg_id,
                    broker.0,
                    r.queue_id,
                    r.queue_offset
                ),
                json!({ "brokerName": broker.0, "brokerAddr": broker.1, "result": r }),
            ))
        }
        MessageCmd::Consume {
            topic,
            queue,
            offset,
            timestamp: ts,
            max,
            tags,
            sql,
            group,
        } => {
            let route = crate::targets::topic_route(client, &topic).await?;
            let mut found = Vec::new();
            'brokers: for t in route_masters(&route) {
                let read_queues = route
                    .queue_datas
                    .iter()
                    .find(|q| q.broker_name == t.name)
                    .map_or(0, |q| q.read_queue_nums);
                let queues: Vec<i32> = match queue {
                    Some(q) => vec![q],
                    None => (0..read_queues).collect(),
                };
                for q in queues {
                    let mut next = match (offset, ts) {
                        (Some(o), _) => QueueOffset(o),
                        (None, Some(ts)) => client.search_offset(&t.peer, &topic, q, ts).await?,
                        (None, None) => client.min_offset(&t.peer, &topic, q).await?,
                    };
                    while found.len() < max {
                        let want = i32::try_from(max - found.len())
                            .unwrap_or(PULL_BATCH)
                            .min(PULL_BATCH);
                        let req = PullRequest {
                            group: &group,
                            topic: &topic,
                            queue_id: q,
                            offset: next,
                            max_messages: want,
                            subscription: sql.as_deref().unwrap_or(&tags),
                            expression_type: if sql.is_some() {
                                ExpressionType::Sql92
                            } else {
                                ExpressionType::Tag
                            },
                            suspend_ms: None,
                            commit_offset: None,
                        };
                        let r = client.pull(&t.peer, &req).await?;
                        if r.status != PullStatus::Found && r.status != PullStatus::NoMatchedMsg {
                            break;
                        }
                        if r.next_begin_offset <= next {
                            break;
                        }
                        next = r.next_begin_offset;
                        // SEARCH_OFFSET_BY_TIMESTAMP follows 4.9: past the last message it
                        // answers that message's offset, so older ones can come back here.
                        let stored_since =
                            |m: &Message| ts.is_none_or(|ts| m.store_timestamp >= ts);
                        found.extend(
                            r.messages
                                .into_iter()
                                .filter(stored_since)
                                .map(|m| (t.name.clone(), m)),
                        );
                        found.truncate(max);
                    }
                    if found.len() >= max {
                        break 'brokers;
                    }
                }
            }
            Ok(messages_report(&found))
        }
        MessageCmd::Query {
            topic,
            key,
            max,
            begin,
            end,
        } => {
            let route = crate::targets::topic_route(client, &topic).await?;
            let mut found = Vec::new();
            for t in route_masters(&route) {
                for m in client
                    .query_messages(
                        &t.peer,
                        &MessageQuery {
                            max,
                            begin_ms: begin,
                            end_ms: end,
                            ..MessageQuery::by_key(&topic, &key)
                        },
                    )
                    .await?
                {
                    found.push((t.name.clone(), m));
                }
            }
            if found.is_empty() {
                bail!("no message of topic {topic} has key {key}");
            }
            Ok(messages_report(&found))
        }
        MessageCmd::View { id, topic } => {
            if let Some(topic) = &topic {
                let route = crate::targets::topic_route(client, topic).await?;
                for t in route_masters(&route) {
                    let msgs = client
                        .query_messages(&t.peer, &MessageQuery::by_uniq_key(topic, &id))
                        .await?;
                    if let Some(m) = msgs.into_iter().next() {
                        return Ok(message_detail(&t.name, &m));
                    }
                }
            }
            check_store_host(client, &id, topic.as_deref()).await?;
            match client.view_message(&id).await {
                Ok(m) => Ok(message_detail("-", &m)),
                Err(e) => match topic {
                    Some(t) => Err(anyhow::Error::from(e).context(format!(
                        "no message of topic {t} has client msgId {id}, and it does not resolve as an offset msgId"
                    ))),
                    None => Err(anyhow::Error::from(e).context(format!(
                        "viewing {id} as an offset msgId (pass --topic to look it up as a client msgId)"
                    ))),
                },
            }
        }
    }
}

/// Only an offset msgId whose store host is a broker of this cluster is dialled: any
/// other 32-hex id (a client msgId, UNIQ_KEY, from any client) decodes to some address
/// too, often a public one, and dialling it would look like an unreachable broker.
async fn check_store_host(client: &Client, id: &str, topic: Option<&str>) -> Result<()> {
    let Ok((host, _)) = protocol::message::parse_offset_msg_id(id) else {
        // Not an offset msgId at all: view_message says why.
        return Ok(());
    };
    let info = client.cluster_info().await?;
    let known: Vec<String> = remoting::client::namesrv::brokers(&info)
        .into_iter()
        .map(|b| b.addr)
        .collect();
    let ours = known.iter().any(|a| {
        a.parse::<std::net::SocketAddr>()
            .map_or(*a == host.to_string(), |a| a == host)
    });
    if ours {
        return Ok(());
    }
    let why = format!(
        "{id} is not an offset msgId of this cluster: it would name store host {host}, which is \
         not one of its brokers ({})",
        if known.is_empty() {
            "none registered".to_owned()
        } else {
            known.join(", ")
        }
    );
    Err(match topic {
        Some(t) => Failure::NotFound(format!(
            "no message of topic {t} has client msgId {id}, and {why}"
        )),
        None => Failure::Usage(format!(
            "{why}; it is probably a client msgId (UNIQ_KEY): pass --topic to look it up"
        )),
    }
    .into())
}

fn body_text(m: &Message) -> String {
    String::from_utf8_lossy(&m.body).into_owned()
}

fn message_json(broker: &str, m: &Message) -> Value {
    let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        map.insert("brokerName".into(), json!(broker));
        map.insert("body".into(), json!(body_text(m)));
        map.insert("bodyLength".into(), json!(m.body.len()));
        map.insert(
            "properties".into(),
            m.properties
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect(),
        );
    }
    v
}

fn messages_report(found: &[(String, Message)]) -> Report {
    let mut table = Table::new(&[
        "broker", "queue", "offset", "msgId", "tags", "keys", "stored", "body",
    ]);
    for (broker, m) in found {
        let mut body: String = body_text(m).chars().take(BODY_PREVIEW).collect();
        body = body.replace(['\n', '\r'], " ");
        table.row(vec![
            broker.clone(),
            m.queue_id.to_string(),
            m.queue_offset.to_string(),
            m.msg_id.clone(),
            m.tags().unwrap_or("-").to_owned(),
            m.keys().unwrap_or("-").to_owned(),
            timestamp(m.store_timestamp),
            body,
        ]);
    }
    let json: Vec<Value> = found.iter().map(|(b, m)| message_json(b, m)).collect();
    Report::table(table, json!({ "count": found.len(), "messages": json }))
        .with_line(format!("{} message(s)", found.len()))
}

fn message_detail(broker: &str, m: &Message) -> Report {
    let mut table = Table::new(&["field", "value"]);
    let mut put = |k: &str, v: String| table.row(vec![k.to_owned(), v]);
    put("topic", m.topic.clone());
    put("msgId", m.msg_id.clone());
    put("offsetMsgId", m.offset_msg_id.clone());
    put("queue", m.queue_id.to_string());
    put("queueOffset", m.queue_offset.to_string());
    put("commitLogOffset", m.physical_offset.to_string());
    put("tags", m.tags().unwrap_or("-").to_owned());
    put("keys", m.keys().unwrap_or("-").to_owned());
    put("bornHost", m.born_host.to_string());
    put("storeHost", m.store_host.to_string());
    put("bornTime", timestamp(m.born_timestamp));
    put("storeTime", timestamp(m.store_timestamp));
    put("reconsumeTimes", m.reconsume_times.to_string());
    for (k, v) in &m.properties {
        put(&format!("property {k}"), v.clone());
    }
    put("body", body_text(m));
    Report::table(table, message_json(broker, m))
}
