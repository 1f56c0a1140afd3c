//! The `consumer` family: progress (lag per queue) and connections.

use anyhow::{Result, bail};
use protocol::code::response;
use remoting::client::{Client, ClientError};
use serde_json::json;

use crate::args::ConsumerCmd;
use crate::failure::Failure;
use crate::output::{Report, Table, timestamp};
use crate::targets::{self, Target, route_masters};

pub async fn run(client: &Client, cmd: ConsumerCmd) -> Result<Report> {
    match cmd {
        ConsumerCmd::Progress { group, topic } => progress(client, &group, topic.as_deref()).await,
        ConsumerCmd::Connections { group } => connections(client, &group).await,
        ConsumerCmd::Ops(c) => crate::ops::consumer(client, c).await,
    }
}

pub(crate) async fn brokers_for(client: &Client, topic: Option<&str>) -> Result<Vec<Target>> {
    match topic {
        Some(t) => Ok(route_masters(
            &crate::targets::topic_route(client, t).await?,
        )),
        None => {
            targets::resolve(
                client,
                &crate::args::Targets {
                    broker: None,
                    cluster: None,
                },
            )
            .await
        }
    }
}

async fn progress(client: &Client, group: &str, topic: Option<&str>) -> Result<Report> {
    let mut table = Table::new(&[
        "topic",
        "broker",
        "queue",
        "broker offset",
        "consumer offset",
        "lag",
        "last consumed",
    ]);
    let mut rows = Vec::new();
    let (mut total_lag, mut tps) = (0i64, 0.0);
    let brokers = brokers_for(client, topic).await?;
    // A broker answers GET_CONSUME_STATS for any group name (4.9 counts an unknown
    // group's offsets as 0), so existence is checked: the group has a subscription group
    // config on one of the brokers, or (without -t) committed offsets there.
    let mut known = false;
    for t in &brokers {
        known |= client
            .groups(&t.peer)
            .await?
            .subscription_group_table
            .contains_key(group);
    }
    for t in brokers {
        let stats = client.consume_stats(&t.peer, group, topic).await?;
        known |= if topic.is_none() {
            !stats.offsets.is_empty()
        } else {
            stats.offsets.iter().any(|(_, o)| o.consumer_offset > 0)
        };
        tps += stats.consume_tps;
        for (mq, o) in stats.offsets {
            let lag = (o.broker_offset - o.consumer_offset).max(0);
            total_lag += lag;
            table.row(vec![
                mq.topic.clone(),
                mq.broker_name.clone(),
                mq.queue_id.to_string(),
                o.broker_offset.to_string(),
                o.consumer_offset.to_string(),
                lag.to_string(),
                timestamp(o.last_timestamp),
            ]);
            rows.push(json!({
                "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                "brokerOffset": o.broker_offset, "consumerOffset": o.consumer_offset,
                "lag": lag, "lastTimestamp": o.last_timestamp,
            }));
        }
    }
    if !known {
        bail!(Failure::NotFound(format!(
            "consumer group {group} not found: no broker{} has its subscription group config \
             or committed offsets (rmqctl group list shows the groups)",
            topic.map(|t| format!(" of topic {t}")).unwrap_or_default()
        )));
    }
    let mut report = Report::table(
        table,
        json!({ "group": group, "queues": rows, "totalLag": total_lag, "consumeTps": tps }),
    );
    report = report.with_line(format!("total lag {total_lag}, consume TPS {tps:.1}"));
    Ok(report)
}

async fn connections(client: &Client, group: &str) -> Result<Report> {
    let mut last_refusal = None;
    for t in brokers_for(client, None).await? {
        match client.consumer_connections(&t.peer, group).await {
            Ok(cc) => {
                let mut table = Table::new(&["client id", "address", "language", "version"]);
                for c in &cc.connection_set {
                    table.row(vec![
                        c.client_id.clone(),
                        c.client_addr.clone(),
                        c.language.clone(),
                        c.version.to_string(),
                    ]);
                }
                let mut subs = Table::new(&["topic", "expression"]);
                for (topic, s) in &cc.subscription_table {
                    subs.row(vec![topic.clone(), s.sub_string.clone()]);
                }
                let json = json!({
                    "group": group, "broker": t.addr(),
                    "connections": cc.connection_set,
                    "subscriptions": cc.subscription_table,
                    "consumeType": cc.consume_type, "messageModel": cc.message_model,
                    "consumeFromWhere": cc.consume_from_where,
                });
                let mut report = Report::table(table, json);
                report.tables.push(subs);
                return Ok(report);
            }
            Err(e) if e.response_code() == Some(response::CONSUMER_NOT_ONLINE) => {
                last_refusal = Some(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    match last_refusal {
        Some(e) => {
            Err(anyhow::Error::from(e)
                .context(format!("consumer group {group} has no online client")))
        }
        None => bail!(ClientError::Invalid("no broker to ask".into())),
    }
}
