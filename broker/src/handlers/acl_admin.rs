//! ACL management, request codes 50–54 (4.9 `AdminBrokerProcessor`).
//! Only admin accounts get here (`crate::dispatch::acl`). Differences from 4.9:
//! edits take effect at once; 53 may only name the broker's own ACL file (4.9's path
//! check could be bypassed); 54 answers the accounts without their secret keys (4.9.0–
//! 4.9.7 sent them to any caller, issue #5970). With ACL disabled, every code answers
//! its failure code with a remark saying so (4.9 hit a null pointer, or for 52 sent
//! nothing). The edits rewrite the ACL file (validated, fsynced, renamed) on the
//! blocking pool, never on an async worker; the answer comes once the file is written,
//! and a failed write leaves the ACL in force unchanged.

use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::response;
use protocol::header::{
    CreateAccessConfigRequestHeader, DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader, UpdateGlobalWhiteAddrsConfigRequestHeader,
};
use security::acl::{AccountEdit, AclError, AclStore};

use super::{HandlerResult, error, success};
use crate::services::Broker;

const ACL_DISABLED: &str = "ACL is not enabled on this broker (aclEnable=false)";

fn store(broker: &Broker) -> Option<&Arc<AclStore>> {
    broker.acl.as_ref()
}

/// Runs an edit of the ACL file on the blocking pool.
async fn edit_file(
    acl: &Arc<AclStore>,
    edit: impl FnOnce(&AclStore) -> Result<(), AclError> + Send + 'static,
) -> Result<(), String> {
    let acl = Arc::clone(acl);
    match tokio::task::spawn_blocking(move || edit(&acl)).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the ACL edit did not complete: {e}")),
    }
}

/// UPDATE_AND_CREATE_ACL_CONFIG (50).
pub async fn update_account(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let failed = response::UPDATE_AND_CREATE_ACL_CONFIG_FAILED;
    let Some(acl) = store(broker) else {
        return error(request, failed, ACL_DISABLED);
    };
    let h: CreateAccessConfigRequestHeader = request.header()?;
    let edit = AccountEdit {
        access_key: h.access_key.clone(),
        secret_key: h.secret_key,
        white_remote_address: h.white_remote_address,
        admin: h.admin,
        default_topic_perm: h.default_topic_perm,
        default_group_perm: h.default_group_perm,
        topic_perms: h.topic_perms,
        group_perms: h.group_perms,
    };
    match edit_file(acl, move |acl| acl.upsert_account(&edit)).await {
        Ok(()) => {
            tracing::info!(access_key = %h.access_key, admin = h.admin, "ACL account created or updated");
            Ok(success(request).into())
        }
        Err(e) => error(request, failed, e),
    }
}

/// DELETE_ACL_CONFIG (51).
pub async fn delete_account(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let failed = response::DELETE_ACL_CONFIG_FAILED;
    let Some(acl) = store(broker) else {
        return error(request, failed, ACL_DISABLED);
    };
    let h: DeleteAccessConfigRequestHeader = request.header()?;
    let access_key = h.access_key.clone();
    match edit_file(acl, move |acl| acl.delete_account(&access_key)).await {
        Ok(()) => {
            tracing::info!(access_key = %h.access_key, "ACL account deleted");
            Ok(success(request).into())
        }
        Err(e) => error(request, failed, e),
    }
}

/// GET_BROKER_CLUSTER_ACL_INFO (52): the file's data version.
pub fn acl_info(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let Some(acl) = store(broker) else {
        return error(request, response::SYSTEM_ERROR, ACL_DISABLED);
    };
    let v = acl.version();
    let version = protocol::body::DataVersion {
        timestamp: v.timestamp,
        counter: v.counter,
    };
    let version = String::from_utf8(protocol::body::encode(&version)).unwrap_or_default();
    let mut all = serde_json::Map::new();
    all.insert(
        acl.path().display().to_string(),
        serde_json::from_str(&version).unwrap_or_default(),
    );
    let all = serde_json::Value::Object(all);
    let b = &broker.config.broker;
    Ok(success(request)
        .with_header(&GetBrokerAclConfigResponseHeader {
            version: Some(version),
            all_acl_file_version: Some(all.to_string()),
            broker_name: Some(b.broker_name.clone()),
            broker_addr: Some(b.broker_addr()),
            cluster_name: Some(b.broker_cluster_name.clone()),
        })
        .into())
}

/// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).
pub async fn update_global_whitelist(
    broker: &Arc<Broker>,
    request: &RemotingCommand,
) -> HandlerResult {
    let failed = response::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED;
    let Some(acl) = store(broker) else {
        return error(request, failed, ACL_DISABLED);
    };
    let h: UpdateGlobalWhiteAddrsConfigRequestHeader = request.header()?;
    // A request never chooses which file the broker writes.
    if let Some(p) = h
        .acl_file_full_path
        .as_deref()
        .filter(|p| !p.trim().is_empty())
        && std::path::Path::new(p.trim()) != acl.path()
    {
        return error(
            request,
            failed,
            "aclFileFullPath may only name this broker's aclFile",
        );
    }
    let patterns: Vec<String> = h
        .global_white_addrs
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let replacement = patterns.clone();
    match edit_file(acl, move |acl| acl.set_global_whitelist(&replacement)).await {
        Ok(()) => {
            tracing::info!(?patterns, "ACL global whitelist replaced");
            Ok(success(request).into())
        }
        Err(e) => error(request, failed, e),
    }
}

/// GET_BROKER_CLUSTER_ACL_CONFIG (54): `{globalWhiteAddrs, plainAccessConfigs}` without
/// secret keys.
pub fn acl_config(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let Some(acl) = store(broker) else {
        return error(request, response::SYSTEM_ERROR, ACL_DISABLED);
    };
    let file = acl.redacted();
    let body = serde_json::json!({
        "globalWhiteAddrs": file.global_white_remote_addresses,
        "plainAccessConfigs": file.accounts.iter().map(|a| serde_json::json!({
            "accessKey": a.access_key,
            "whiteRemoteAddress": a.white_remote_address,
            "admin": a.admin,
            "defaultTopicPerm": a.default_topic_perm,
            "defaultGroupPerm": a.default_group_perm,
            "topicPerms": a.topic_perms,
            "groupPerms": a.group_perms,
        })).collect::<Vec<_>>(),
    });
    Ok(success(request)
        .with_body(body.to_string().into_bytes())
        .into())
}
