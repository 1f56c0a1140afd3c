//! The `broker` family (runtime info, configuration) and the `kv` family (nameserver
//! KV config).

use anyhow::{Context, Result, bail};
use remoting::client::{Client, Peer};
use serde_json::json;

use crate::args::{BrokerCmd, BrokerConfigCmd, KvCmd};
use crate::output::{Report, Table};
use crate::targets;

pub async fn run(client: &Client, cmd: BrokerCmd) -> Result<Report> {
    match cmd {
        BrokerCmd::Runtime { targets } => {
            let targets = targets::resolve(client, &targets).await?;
            let mut table = Table::new(&["broker", "key", "value"]);
            let mut out = serde_json::Map::new();
            for t in &targets {
                let info = client.runtime_info(&t.peer).await?;
                for (k, v) in &info {
                    table.row(vec![t.addr().to_owned(), k.clone(), v.clone()]);
                }
                out.insert(t.addr().to_owned(), json!(info));
            }
            Ok(Report::table(table, json!({ "brokers": out })))
        }
        BrokerCmd::Config(BrokerConfigCmd::Get { broker, key }) => {
            let peer = Peer::Broker(broker.clone());
            let config = client.broker_config(&peer).await?;
            match key {
                Some(k) => {
                    let Some(v) = config.get(&k) else {
                        bail!("broker {broker} has no configuration key {k}");
                    };
                    Ok(Report::text(
                        v.clone(),
                        json!({ "broker": broker, "key": k, "value": v }),
                    ))
                }
                None => {
                    let mut table = Table::new(&["key", "value"]);
                    for (k, v) in &config {
                        table.row(vec![k.clone(), v.clone()]);
                    }
                    Ok(Report::table(
                        table,
                        json!({ "broker": broker, "config": config }),
                    ))
                }
            }
        }
        BrokerCmd::Ops(c) => crate::ops::broker(client, c).await,
        BrokerCmd::Config(BrokerConfigCmd::Update { targets, entries }) => {
            let targets = targets::resolve(client, &targets).await?;
            let mut remarks = Vec::new();
            for t in &targets {
                let remark = client
                    .update_broker_config(&t.peer, &entries)
                    .await
                    .with_context(|| {
                        format!("updating the configuration of broker {}", t.addr())
                    })?;
                remarks.push((t.addr(), remark.unwrap_or_default()));
            }
            let addrs: Vec<&str> = targets.iter().map(|t| t.addr()).collect();
            let keys: Vec<String> = entries.iter().map(|(k, v)| format!("{k}={v}")).collect();
            // Each broker says whether it kept the change in its config file.
            let mut text = format!("updated {} on {}", keys.join(", "), addrs.join(", "));
            for (addr, remark) in remarks.iter().filter(|(_, r)| !r.is_empty()) {
                text.push_str(&format!("\n  {addr}: {remark}"));
            }
            Ok(Report::text(
                text,
                json!({
                    "brokers": addrs,
                    "updated": entries.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                    "remarks": remarks.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                }),
            ))
        }
    }
}

pub async fn kv(client: &Client, cmd: KvCmd) -> Result<Report> {
    match cmd {
        KvCmd::Put {
            namespace,
            key,
            value,
        } => {
            client.kv_put(&namespace, &key, &value).await?;
            Ok(Report::text(
                format!("set {namespace}/{key}"),
                json!({ "namespace": namespace, "key": key, "value": value }),
            ))
        }
        KvCmd::Get { namespace, key } => match client.kv_get(&namespace, &key).await? {
            Some(v) => Ok(Report::text(
                v.clone(),
                json!({ "namespace": namespace, "key": key, "value": v }),
            )),
            None => bail!(
                "no KV config {namespace}/{key} on nameserver {}",
                client.namesrv_addrs().join(";")
            ),
        },
        KvCmd::Delete { namespace, key } => {
            client.kv_delete(&namespace, &key).await?;
            Ok(Report::text(
                format!("deleted {namespace}/{key}"),
                json!({ "namespace": namespace, "key": key, "deleted": true }),
            ))
        }
        KvCmd::List { namespace } => {
            let table_body = client.kv_list(&namespace).await?;
            let mut table = Table::new(&["key", "value"]);
            for (k, v) in &table_body.table {
                table.row(vec![k.clone(), v.clone()]);
            }
            Ok(Report::table(
                table,
                json!({ "namespace": namespace, "table": table_body.table }),
            ))
        }
    }
}
