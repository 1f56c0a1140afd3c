//! The day-2 commands except the DLQ re-send (`dlq.rs`): consumer reset and
//! status, producer connections, a broker's write permission, nameserver configuration.

use anyhow::{Context, Result, bail};
use protocol::code::response;
use remoting::client::ops::ResetTo;
use remoting::client::{Client, ClientError};
use serde_json::json;

use crate::consumer::brokers_for;
use crate::ops_args::{
    BrokerOpsCmd, ConsumerOpsCmd, NameserverCmd, NameserverConfigCmd, ProducerCmd,
};
use crate::output::{Report, Table};
use crate::targets::route_masters;

pub async fn consumer(client: &Client, cmd: ConsumerOpsCmd) -> Result<Report> {
    match cmd {
        ConsumerOpsCmd::Reset {
            group,
            topic,
            to,
            force,
        } => {
            let (target, force) = match (to.to_time, to.to_latest) {
                (Some(t), _) => (ResetTo::Time(t), force),
                (None, true) => (ResetTo::Latest, true),
                // --to-earliest: the first stored message of each queue.
                (None, false) => (ResetTo::Time(0), true),
            };
            let route = crate::targets::topic_route(client, &topic).await?;
            let masters = route_masters(&route);
            if masters.is_empty() {
                bail!("topic {topic} has no master broker in its route");
            }
            let mut table = Table::new(&["broker", "queue", "offset"]);
            let mut rows = Vec::new();
            for t in &masters {
                let offsets = client
                    .reset_offset(&t.peer, &group, &topic, target, force)
                    .await
                    .with_context(|| {
                        format!(
                            "resetting {group} on {topic} at broker {} ({})",
                            t.name,
                            t.addr()
                        )
                    })?;
                for (mq, offset) in offsets {
                    table.row(vec![
                        mq.broker_name.clone(),
                        mq.queue_id.to_string(),
                        offset.to_string(),
                    ]);
                    rows.push(json!({ "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset }));
                }
            }
            let timestamp = match target {
                ResetTo::Time(t) => t,
                ResetTo::Latest => -1,
            };
            Ok(Report::table(
                table,
                json!({ "group": group, "topic": topic, "timestamp": timestamp, "force": force, "offsets": rows }),
            ))
        }
        ConsumerOpsCmd::Status {
            group,
            topic,
            client: only,
        } => {
            let mut table = Table::new(&["client id", "broker", "queue", "offset"]);
            let mut out = serde_json::Map::new();
            let mut last_refusal = None;
            let mut answered = false;
            let mut unanswered = std::collections::BTreeMap::new();
            for t in brokers_for(client, Some(&topic)).await? {
                let status = match client
                    .consumer_status(&t.peer, &group, &topic, only.as_deref())
                    .await
                {
                    Ok(s) => s,
                    Err(e) if e.response_code() == Some(response::SYSTEM_ERROR) => {
                        last_refusal = Some(e);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                answered = true;
                unanswered = status.unanswered;
                for (client_id, offsets) in status.answered {
                    let entry = out.entry(client_id.clone()).or_insert_with(|| json!([]));
                    for (mq, offset) in offsets {
                        table.row(vec![
                            client_id.clone(),
                            mq.broker_name.clone(),
                            mq.queue_id.to_string(),
                            offset.to_string(),
                        ]);
                        if let Some(list) = entry.as_array_mut() {
                            list.push(json!({ "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset }));
                        }
                    }
                }
                // Every broker asks the same connected clients; one answer is the status.
                break;
            }
            if !answered {
                return match last_refusal {
                    Some(e) => Err(anyhow::Error::from(e)
                        .context(format!("consumer group {group} has no online client"))),
                    None => bail!(ClientError::Invalid("no broker to ask".into())),
                };
            }
            // A member that gave no offsets (its client does not implement the request,
            // or did not answer in time) is listed with the reason; the report is still
            // printed, and the exit code says it is partial.
            let mut report = Report::table(
                table,
                json!({ "group": group, "topic": topic, "clients": out, "unanswered": unanswered }),
            );
            for (client_id, why) in &unanswered {
                report = report.with_line(format!("no offsets from {client_id}: {why}"));
            }
            if !unanswered.is_empty() {
                report = report.with_exit_code(1);
            }
            Ok(report)
        }
    }
}

pub async fn producer(client: &Client, cmd: ProducerCmd) -> Result<Report> {
    let ProducerCmd::Connections { group, topic } = cmd;
    let mut table = Table::new(&["broker", "client id", "address", "language", "version"]);
    let mut conns = Vec::new();
    for t in brokers_for(client, topic.as_deref()).await? {
        match client.producer_connections(&t.peer, &group).await {
            Ok(pc) => {
                for c in pc.connection_set {
                    table.row(vec![
                        t.addr().to_owned(),
                        c.client_id.clone(),
                        c.client_addr.clone(),
                        c.language.clone(),
                        c.version.to_string(),
                    ]);
                    conns.push(json!({ "broker": t.addr(), "clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language, "version": c.version }));
                }
            }
            // 4.9 answers SYSTEM_ERROR for a group without connections on that broker.
            Err(e) if e.response_code() == Some(response::SYSTEM_ERROR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if conns.is_empty() {
        bail!("producer group {group} has no connection to any broker");
    }
    Ok(Report::table(
        table,
        json!({ "group": group, "connections": conns }),
    ))
}

pub async fn broker(client: &Client, cmd: BrokerOpsCmd) -> Result<Report> {
    let (name, wipe) = match &cmd {
        BrokerOpsCmd::WipeWritePerm { broker_name } => (broker_name.clone(), true),
        BrokerOpsCmd::AddWritePerm { broker_name } => (broker_name.clone(), false),
    };
    let changes = if wipe {
        client.wipe_write_perm(&name).await?
    } else {
        client.add_write_perm(&name).await?
    };
    let mut table = Table::new(&["nameserver", "topics changed"]);
    for c in &changes {
        table.row(vec![c.namesrv.clone(), c.topics.to_string()]);
    }
    Ok(Report::table(
        table,
        json!({ "brokerName": name, "writable": !wipe, "nameservers": changes }),
    ))
}

pub async fn nameserver(client: &Client, cmd: NameserverCmd) -> Result<Report> {
    match cmd {
        NameserverCmd::Config(NameserverConfigCmd::Get { key }) => {
            let configs = client.namesrv_config().await?;
            match key {
                Some(k) => {
                    let mut table = Table::new(&["nameserver", "value"]);
                    let mut values = serde_json::Map::new();
                    for (addr, config) in &configs {
                        let Some(v) = config.get(&k) else {
                            bail!("nameserver {addr} has no configuration key {k}");
                        };
                        table.row(vec![addr.clone(), v.clone()]);
                        values.insert(addr.clone(), json!(v));
                    }
                    Ok(Report::table(table, json!({ "key": k, "values": values })))
                }
                None => {
                    let mut table = Table::new(&["nameserver", "key", "value"]);
                    for (addr, config) in &configs {
                        for (k, v) in config {
                            table.row(vec![addr.clone(), k.clone(), v.clone()]);
                        }
                    }
                    Ok(Report::table(table, json!({ "nameservers": configs })))
                }
            }
        }
        NameserverCmd::Config(NameserverConfigCmd::Update { entries }) => {
            client.update_namesrv_config(&entries).await?;
            let keys: Vec<String> = entries.iter().map(|(k, v)| format!("{k}={v}")).collect();
            Ok(Report::text(
                format!(
                    "updated {} on {}",
                    keys.join(", "),
                    client.namesrv_addrs().join(", ")
                ),
                json!({ "nameservers": client.namesrv_addrs(), "updated": entries.iter().cloned().collect::<std::collections::BTreeMap<_, _>>() }),
            ))
        }
    }
}
