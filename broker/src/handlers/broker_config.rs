//! UPDATE_BROKER_CONFIG (`AdminBrokerProcessor.updateBrokerConfig`): the body is
//! `key=value` lines (`MixAll.properties2String`); only
//! [`crate::services::live_config::UPDATABLE`] keys are accepted (see that module for
//! why). An accepted change is kept in the broker's config file when that file is
//! writable and answered once it is on disk; otherwise it applies until the broker stops
//! and the remark says so ([`crate::services::conf_file`]).

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::response;

use super::{HandlerResult, error, success};
use crate::config::keys;
use crate::services::Broker;
use crate::services::live_config::{LiveConfig, UpdateError};

pub async fn update(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let text = String::from_utf8_lossy(&request.body);
    let pairs = crate::config::properties::parse(&text);
    if pairs.is_empty() {
        return error(request, response::SYSTEM_ERROR, "string2Properties error");
    }
    let update = match LiveConfig::validate(&pairs) {
        Ok(update) => update,
        Err(e) => {
            let e = name_unknown_key(broker, e);
            tracing::warn!(error = %e, "broker config update refused");
            return error(request, response::NO_PERMISSION, e.to_string());
        }
    };
    let permission = update.sets("brokerPermission");
    match broker.conf_file.apply(&broker.live, update).await {
        Ok(outcome) => {
            tracing::info!(?pairs, kept = outcome.kept, "broker config updated");
            if permission {
                // Re-register so routes carry the new perm (as 4.9 does).
                broker.topics.touch();
            }
            Ok(success(request).with_remark(outcome.remark).into())
        }
        Err(e) => {
            tracing::error!(error = %e, "broker config update not written; nothing changed");
            error(
                request,
                response::SYSTEM_ERROR,
                format!("broker config not updated (nothing changed): {e}"),
            )
        }
    }
}

/// A refused key that no broker.conf honours is reported as unknown (with the known key
/// it most likely misspells), not as one that cannot change at runtime.
fn name_unknown_key(broker: &Broker, e: UpdateError) -> UpdateError {
    let UpdateError::NotUpdatable(key) = e else {
        return e;
    };
    let known = keys::known_keys(&broker.config);
    if known.contains(&key) {
        return UpdateError::NotUpdatable(key);
    }
    let suggestion = keys::nearest(&key, &known).map(str::to_owned);
    UpdateError::Unknown { key, suggestion }
}
