//! The `group` family: subscription group configs on brokers.

use anyhow::{Context, Result, bail};
use remoting::client::Client;
use remoting::client::bodies::SubscriptionGroupConfig;
use serde_json::json;

use crate::args::{GroupCmd, GroupSettings};
use crate::output::{Report, Table};
use crate::targets;

fn apply(config: &mut SubscriptionGroupConfig, s: &GroupSettings) -> Result<()> {
    if let Some(v) = s.consume_enable {
        config.consume_enable = v;
    }
    if let Some(v) = s.broadcast {
        config.consume_broadcast_enable = v;
    }
    if let Some(v) = s.from_min {
        config.consume_from_min_enable = v;
    }
    if let Some(v) = s.retry_queues {
        config.retry_queue_nums = v;
    }
    if let Some(v) = s.retry_max_times {
        config.retry_max_times = v;
    }
    if let Some(v) = s.fifo {
        config.consume_message_orderly = v;
    }
    if config.retry_queue_nums < 0 || config.retry_max_times < 0 {
        bail!("retry counts must not be negative");
    }
    Ok(())
}

pub async fn run(client: &Client, cmd: GroupCmd) -> Result<Report> {
    match cmd {
        GroupCmd::Create {
            group,
            targets,
            settings,
        } => {
            let targets = targets::resolve(client, &targets).await?;
            let mut config = SubscriptionGroupConfig {
                group_name: group.clone(),
                ..SubscriptionGroupConfig::default()
            };
            apply(&mut config, &settings)?;
            let what = format!("creating group {group}");
            let write = async |t: &targets::Target, c: &SubscriptionGroupConfig| {
                client.create_group(&t.peer, c).await.map_err(Into::into)
            };
            targets::write_each(&targets, &what, &config, write).await?;
            Ok(written("created", &targets, &config))
        }
        GroupCmd::Update {
            group,
            targets,
            settings,
        } => {
            let targets = targets::resolve(client, &targets).await?;
            let fetch = async |t: &targets::Target| -> Result<_> {
                let table = client.groups(&t.peer).await?;
                Ok(table.subscription_group_table.get(&group).cloned())
            };
            let write = async |t: &targets::Target, c: &SubscriptionGroupConfig| {
                client.create_group(&t.peer, c).await.map_err(Into::into)
            };
            let apply = |c: &mut SubscriptionGroupConfig| apply(c, &settings);
            let config =
                targets::update_each(&targets, "group", &group, fetch, apply, write).await?;
            Ok(written("updated", &targets, &config))
        }
        GroupCmd::Delete {
            group,
            targets,
            remove_offset,
        } => {
            let targets = targets::resolve(client, &targets).await?;
            for t in &targets {
                client
                    .delete_group(&t.peer, &group, remove_offset)
                    .await
                    .with_context(|| {
                        format!("deleting group {group} on broker {} ({})", t.name, t.addr())
                    })?;
            }
            let addrs: Vec<&str> = targets.iter().map(|t| t.addr()).collect();
            Ok(Report::text(
                format!("deleted group {group} on {}", addrs.join(", ")),
                json!({ "group": group, "result": "deleted", "brokers": addrs, "removeOffset": remove_offset }),
            ))
        }
        GroupCmd::List { targets } => {
            let targets = targets::resolve(client, &targets).await?;
            let mut table = Table::new(&[
                "broker",
                "group",
                "consume",
                "broadcast",
                "from min",
                "retry queues",
                "retry max",
            ]);
            let mut rows = Vec::new();
            for t in &targets {
                for (name, g) in client.groups(&t.peer).await?.subscription_group_table {
                    table.row(vec![
                        t.addr().to_owned(),
                        name,
                        g.consume_enable.to_string(),
                        g.consume_broadcast_enable.to_string(),
                        g.consume_from_min_enable.to_string(),
                        g.retry_queue_nums.to_string(),
                        g.retry_max_times.to_string(),
                    ]);
                    rows.push(json!({ "broker": t.addr(), "config": g }));
                }
            }
            Ok(Report::table(table, json!({ "groups": rows })))
        }
    }
}

fn written(verb: &str, targets: &[targets::Target], config: &SubscriptionGroupConfig) -> Report {
    let addrs: Vec<&str> = targets.iter().map(|t| t.addr()).collect();
    Report::text(
        format!(
            "{verb} group {} on {} (retry max {}, retry queues {}, consume {}, fifo {})",
            config.group_name,
            addrs.join(", "),
            config.retry_max_times,
            config.retry_queue_nums,
            config.consume_enable,
            config.consume_message_orderly
        ),
        json!({ "group": config.group_name, "result": verb, "brokers": addrs, "config": config }),
    )
}
