//! `cluster list` and the `topic` family.

use anyhow::{Result, bail};
use protocol::body::topic_config::{MESSAGE_TYPE_ATTRIBUTE, apply_attributes};
use protocol::body::{TopicConfig, TopicFilterType};
use remoting::client::Client;
use remoting::client::namesrv::brokers;
use serde_json::json;

use crate::args::{ClusterCmd, TopicCmd, TopicSettings};
use crate::output::{Report, Table, timestamp};
use crate::targets::{self, route_masters};

pub async fn cluster(client: &Client, cmd: ClusterCmd) -> Result<Report> {
    let ClusterCmd::List = cmd;
    let info = client.cluster_info().await?;
    let mut table = Table::new(&[
        "cluster",
        "broker",
        "id",
        "address",
        "version",
        "put today",
        "get today",
    ]);
    let mut rows = Vec::new();
    for b in brokers(&info) {
        // A broker that does not answer is still listed, marked unreachable.
        let runtime = client.runtime_info(&b.peer()).await;
        let get = |k: &str| {
            runtime
                .as_ref()
                .ok()
                .and_then(|r| r.get(k).cloned())
                .unwrap_or_else(|| "-".to_owned())
        };
        let version = match &runtime {
            Ok(_) => get("brokerVersionDesc"),
            Err(e) => format!("unreachable ({e})"),
        };
        table.row(vec![
            b.cluster.clone(),
            b.broker_name.clone(),
            b.broker_id.to_string(),
            b.addr.clone(),
            version.clone(),
            get("msgPutTotalTodayNow"),
            get("msgGetTotalTodayNow"),
        ]);
        // Counters as JSON numbers; null when the broker did not answer.
        let count = |k: &str| get(k).parse::<i64>().ok();
        rows.push(json!({
            "cluster": b.cluster, "brokerName": b.broker_name, "brokerId": b.broker_id,
            "addr": b.addr, "version": version, "reachable": runtime.is_ok(),
            "msgPutTotalTodayNow": count("msgPutTotalTodayNow"),
            "msgGetTotalTodayNow": count("msgGetTotalTodayNow"),
        }));
    }
    Ok(Report::table(table, json!({ "brokers": rows })))
}

fn apply(config: &mut TopicConfig, s: &TopicSettings) -> Result<()> {
    if let Some(r) = s.read_queues {
        config.read_queue_nums = r;
    }
    if let Some(w) = s.write_queues {
        config.write_queue_nums = w;
    }
    if let Some(p) = s.perm {
        config.perm = p;
    }
    if let Some(o) = s.order {
        config.order = o;
    }
    if let Some(t) = &s.message_type {
        config.attributes = apply_attributes(
            &config.attributes,
            &format!("+{MESSAGE_TYPE_ATTRIBUTE}={t}"),
        )?;
    }
    if config.read_queue_nums <= 0 || config.write_queue_nums <= 0 {
        bail!("queue counts must be positive");
    }
    if !(0..=7).contains(&config.perm) {
        bail!("perm must be between 0 and 7 (2 write, 4 read, 6 read+write)");
    }
    Ok(())
}

pub async fn run(client: &Client, cmd: TopicCmd) -> Result<Report> {
    match cmd {
        TopicCmd::Create {
            topic,
            targets,
            settings,
        } => {
            let targets = targets::resolve(client, &targets).await?;
            let mut config = TopicConfig::new(topic.clone());
            config.topic_filter_type = TopicFilterType::SingleTag;
            // mqadmin updateTopic's defaults.
            config.read_queue_nums = 8;
            config.write_queue_nums = 8;
            config.perm = 6;
            apply(&mut config, &settings)?;
            let what = format!("creating topic {topic}");
            let write = async |t: &targets::Target, c: &TopicConfig| {
                client.create_topic(&t.peer, c).await.map_err(Into::into)
            };
            targets::write_each(&targets, &what, &config, write).await?;
            Ok(written("created", &topic, &targets, &config))
        }
        TopicCmd::Update {
            topic,
            targets,
            settings,
        } => {
            let targets = targets::resolve(client, &targets).await?;
            let fetch = async |t: &targets::Target| -> Result<_> {
                let existing = client.topic_configs(&t.peer).await?;
                Ok(existing.topic_config_table.get(&topic).cloned())
            };
            let write = async |t: &targets::Target, c: &TopicConfig| {
                client.create_topic(&t.peer, c).await.map_err(Into::into)
            };
            let apply = |c: &mut TopicConfig| apply(c, &settings);
            let config =
                targets::update_each(&targets, "topic", &topic, fetch, apply, write).await?;
            Ok(written("updated", &topic, &targets, &config))
        }
        TopicCmd::Delete { topic, cluster } => {
            let route = crate::targets::topic_route(client, &topic).await?;
            let mut masters = route_masters(&route);
            if let Some(c) = &cluster {
                let in_cluster: Vec<String> = client
                    .master_brokers(Some(c))
                    .await?
                    .into_iter()
                    .map(|b| b.addr)
                    .collect();
                masters.retain(|t| in_cluster.iter().any(|a| a == t.addr()));
            }
            for t in &masters {
                client.delete_topic_in_broker(&t.peer, &topic).await?;
            }
            client
                .delete_topic_in_namesrv(&topic, cluster.as_deref())
                .await?;
            let names: Vec<&str> = masters.iter().map(|t| t.name.as_str()).collect();
            Ok(Report::text(
                format!(
                    "deleted topic {topic} from {} broker(s) and the nameserver(s)",
                    names.len()
                ),
                json!({ "topic": topic, "deleted": true, "brokers": names }),
            ))
        }
        TopicCmd::List { cluster } => {
            let list = client.topic_list(cluster.as_deref()).await?;
            let mut table = Table::new(&["topic"]);
            for t in &list.topic_list {
                table.row(vec![t.clone()]);
            }
            Ok(Report::table(table, json!({ "topics": list.topic_list })))
        }
        TopicCmd::Route { topic } => {
            let route = crate::targets::topic_route(client, &topic).await?;
            let mut table = Table::new(&[
                "broker",
                "id",
                "address",
                "read queues",
                "write queues",
                "perm",
            ]);
            for b in &route.broker_datas {
                let q = route
                    .queue_datas
                    .iter()
                    .find(|q| q.broker_name == b.broker_name);
                for (id, addr) in &b.broker_addrs {
                    table.row(vec![
                        b.broker_name.clone(),
                        id.to_string(),
                        addr.clone(),
                        q.map_or("-".into(), |q| q.read_queue_nums.to_string()),
                        q.map_or("-".into(), |q| q.write_queue_nums.to_string()),
                        q.map_or("-".into(), |q| q.perm.to_string()),
                    ]);
                }
            }
            let json = serde_json::to_value(&route)?;
            Ok(Report::table(table, json))
        }
        TopicCmd::Status { topic } => {
            let route = crate::targets::topic_route(client, &topic).await?;
            let mut table = Table::new(&[
                "broker",
                "queue",
                "min offset",
                "max offset",
                "last updated",
            ]);
            let mut rows = Vec::new();
            for t in route_masters(&route) {
                for (mq, o) in client.topic_stats(&t.peer, &topic).await? {
                    table.row(vec![
                        mq.broker_name.clone(),
                        mq.queue_id.to_string(),
                        o.min_offset.to_string(),
                        o.max_offset.to_string(),
                        timestamp(o.last_update_timestamp),
                    ]);
                    rows.push(json!({
                        "brokerName": mq.broker_name, "queueId": mq.queue_id,
                        "minOffset": o.min_offset, "maxOffset": o.max_offset,
                        "lastUpdateTimestamp": o.last_update_timestamp,
                    }));
                }
            }
            Ok(Report::table(
                table,
                json!({ "topic": topic, "queues": rows }),
            ))
        }
    }
}

fn written(verb: &str, topic: &str, targets: &[targets::Target], config: &TopicConfig) -> Report {
    let addrs: Vec<&str> = targets.iter().map(|t| t.addr()).collect();
    Report::text(
        format!(
            "{verb} topic {topic} on {} (read {} / write {} queues, perm {}, order {}, message type {})",
            addrs.join(", "),
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            config.order,
            config.message_type().unwrap_or("any")
        ),
        json!({ "topic": topic, "result": verb, "brokers": addrs, "config": config }),
    )
}
