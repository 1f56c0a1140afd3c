//! `SlaveSynchronize`: a slave copies its master's metadata over the normal remoting port
//! every `slaveSyncInterval` ms — topic configs (GET_ALL_TOPIC_CONFIG), subscription
//! groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), consumer offsets (GET_ALL_CONSUMER_OFFSET)
//! and delay offsets (GET_ALL_DELAY_OFFSET, written to `delayOffset.json`). Entries are
//! added or updated; consumer offsets only move forward on the slave.

use std::sync::Arc;
use std::time::Duration;

use protocol::RemotingCommand;
use protocol::body::TopicConfigSerializeWrapper;
use protocol::code::{request, response};
use store::config_files::{
    ConfigDocument, ConfigFile, ConsumerOffsetTable, SubscriptionGroupTable,
};
use tokio_util::sync::CancellationToken;

use super::Ha;
use crate::remoting_client::RemotingClient;
use crate::services::Broker;

pub async fn run(broker: Arc<Broker>, ha: Arc<Ha>, shutdown: CancellationToken) {
    let mut client: Option<RemotingClient> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(ha.settings.metadata_sync_period) => {}
        }
        let Some(master) = ha.target().master_addr.filter(|_| ha.is_slave()) else {
            continue;
        };
        if client.as_ref().is_none_or(|c| c.addr() != master) {
            client = Some(
                RemotingClient::new(remoting::client::Peer::Broker(master.clone()))
                    .with_credentials(broker.credentials.clone())
                    .with_tls(broker.tls_client.clone()),
            );
        }
        if let Some(c) = &client
            && let Err(e) = sync_once(&broker, c).await
        {
            tracing::warn!(master, error = %e, "syncing metadata from the master failed");
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Remoting(#[from] crate::remoting_client::ClientError),
    #[error("request {code} answered {answer}")]
    Refused { code: i32, answer: i32 },
    #[error("{0}")]
    Decode(String),
}

async fn fetch(c: &RemotingClient, code: i32) -> Result<Option<bytes::Bytes>, SyncError> {
    let r = c
        .invoke(RemotingCommand::request(code, &()), Duration::from_secs(3))
        .await?;
    match r.code {
        response::SUCCESS => Ok(Some(r.body)),
        response::REQUEST_CODE_NOT_SUPPORTED => Ok(None),
        answer => Err(SyncError::Refused { code, answer }),
    }
}

/// One round of `SlaveSynchronize.syncAll`.
pub async fn sync_once(broker: &Broker, c: &RemotingClient) -> Result<(), SyncError> {
    if let Some(body) = fetch(c, request::GET_ALL_TOPIC_CONFIG).await? {
        let wrapper: TopicConfigSerializeWrapper =
            protocol::body::decode(&body).map_err(|e| SyncError::Decode(e.to_string()))?;
        // Every changed topic is staged before any is awaited: one rewrite carries them.
        let writes: Vec<_> = wrapper
            .topic_config_table
            .into_iter()
            .filter(|(name, config)| broker.topics.get(name).as_ref() != Some(config))
            .map(|(name, config)| (name, broker.topics.upsert(config)))
            .collect();
        for (name, written) in writes {
            if let Err(e) = written.await {
                tracing::warn!(topic = name, error = %e, "storing a synced topic failed");
            }
        }
    }
    if let Some(body) = fetch(c, request::GET_ALL_SUBSCRIPTIONGROUP_CONFIG).await? {
        let text = String::from_utf8_lossy(&body);
        let table = SubscriptionGroupTable::decode(&text).map_err(SyncError::Decode)?;
        let writes: Vec<_> = table
            .subscription_group_table
            .into_iter()
            .filter(|(name, config)| broker.groups.get(name).as_ref() != Some(config))
            .map(|(name, config)| (name, broker.groups.upsert(config)))
            .collect();
        for (name, written) in writes {
            if let Err(e) = written.await {
                tracing::warn!(group = name, error = %e, "storing a synced group failed");
            }
        }
    }
    if let Some(body) = fetch(c, request::GET_ALL_CONSUMER_OFFSET).await? {
        let text = String::from_utf8_lossy(&body);
        let table = ConsumerOffsetTable::decode(&text).map_err(SyncError::Decode)?;
        for (key, queues) in &table.offset_table {
            let Some((topic, group)) = key.split() else {
                continue;
            };
            for (queue_id, offset) in queues {
                let newer = broker
                    .offsets
                    .query(group, topic, *queue_id)
                    .is_none_or(|mine| mine < *offset);
                if newer {
                    broker.offsets.commit(group, topic, *queue_id, *offset);
                }
            }
        }
    }
    if let Some(body) = fetch(c, request::GET_ALL_DELAY_OFFSET).await? {
        let root = &broker.config.store.store_path_root_dir;
        let file = ConfigFile::new(store::config_files::delay_offset_path(root));
        // Three fsyncs: on the blocking pool, not on an async worker.
        match tokio::task::spawn_blocking(move || file.persist_bytes(&body)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "storing synced delay offsets failed"),
            Err(e) => tracing::warn!(error = %e, "storing synced delay offsets did not complete"),
        }
    }
    Ok(())
}
