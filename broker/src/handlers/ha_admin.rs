//! Replication admin requests: GET_BROKER_HA_STATUS (907), GET_BROKER_EPOCH_CACHE (1007),
//! NOTIFY_BROKER_ROLE_CHANGED (1008). The role change needs an admin ACL account or the
//! `adminSecret` signature (`crate::dispatch::admin_gate`), checked before dispatch.

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::body::ha::{EpochEntryBody, EpochEntryCache};
use protocol::code::response;
use protocol::header::NotifyBrokerRoleChangedRequestHeader;

use crate::handlers::{HandlerResult, error, success};
use crate::services::Broker;

fn not_running(request: &RemotingCommand) -> HandlerResult {
    error(
        request,
        response::SYSTEM_ERROR,
        "replication is not running (haSecret is empty)",
    )
}

pub fn ha_status(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let Some(ha) = broker.ha.get() else {
        return not_running(request);
    };
    Ok(success(request)
        .with_body(protocol::body::encode(&ha.runtime_info()))
        .into())
}

pub fn epoch_cache(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let Some(ha) = broker.ha.get() else {
        return not_running(request);
    };
    let max = ha.store.max_phy_offset().0;
    let entries = ha.store.epochs().entries();
    let epoch_list = entries
        .iter()
        .enumerate()
        .map(|(i, e)| EpochEntryBody {
            epoch: e.epoch,
            start_offset: e.start_offset.0,
            end_offset: entries.get(i + 1).map_or(max, |n| n.start_offset.0),
        })
        .collect();
    let body = EpochEntryCache {
        cluster_name: ha.settings.cluster.clone(),
        broker_name: ha.settings.group.clone(),
        broker_id: ha.registered_broker_id(),
        epoch_list,
        max_offset: max,
    };
    Ok(success(request)
        .with_body(protocol::body::encode(&body))
        .into())
}

pub async fn notify_role_changed(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: NotifyBrokerRoleChangedRequestHeader = request.header()?;
    let Some(ha) = broker.ha.get().cloned() else {
        return not_running(request);
    };
    let result = if ha.names_me(h.master_broker_id) {
        ha.become_master(h.master_epoch).await
    } else {
        ha.become_slave(h.master_epoch, h.master_address, h.master_ha_address)
    };
    match result {
        Ok(()) => Ok(success(request).into()),
        Err(e) => {
            tracing::warn!(error = %e, "role change refused");
            error(request, response::SYSTEM_ERROR, e.to_string())
        }
    }
}
