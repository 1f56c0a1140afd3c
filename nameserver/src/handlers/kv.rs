//! PUT/GET/DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE.

use protocol::RemotingCommand;
use protocol::body;
use protocol::code::response;
use protocol::header::{
    DeleteKVConfigRequestHeader, GetKVConfigRequestHeader, GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader, PutKVConfigRequestHeader,
};

use super::{HandlerError, success};
use crate::kv_config::KvError;
use crate::route_table::ConnId;
use crate::state::Shared;

type Reply = Result<RemotingCommand, HandlerError>;

pub fn put(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: PutKVConfigRequestHeader = request.header()?;
    match shared.kv.put(&h.namespace, &h.key, &h.value) {
        Ok(()) => {}
        Err(KvError::Limit(refusal)) => {
            shared.metrics.limit_refused(refusal.key);
            tracing::warn!(namespace = %h.namespace, limit = refusal.key, "kv config put refused: {}", refusal.detail);
            return Ok(RemotingCommand::error_response(
                request,
                response::SYSTEM_ERROR,
                refusal.remark(),
            ));
        }
        Err(e) => return Err(HandlerError::Failed(e.to_string())),
    }
    tracing::info!(namespace = %h.namespace, key = %h.key, "kv config put");
    Ok(success(request))
}

pub fn get(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: GetKVConfigRequestHeader = request.header()?;
    Ok(match shared.kv.get(&h.namespace, &h.key) {
        Some(value) => {
            success(request).with_header(&GetKVConfigResponseHeader { value: Some(value) })
        }
        None => RemotingCommand::error_response(
            request,
            response::QUERY_NOT_FOUND,
            format!("No config item, Namespace: {} Key: {}", h.namespace, h.key),
        ),
    })
}

pub fn delete(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: DeleteKVConfigRequestHeader = request.header()?;
    shared
        .kv
        .delete(&h.namespace, &h.key)
        .map_err(|e| HandlerError::Failed(e.to_string()))?;
    tracing::info!(namespace = %h.namespace, key = %h.key, "kv config deleted");
    Ok(success(request))
}

pub fn list(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: GetKVListByNamespaceRequestHeader = request.header()?;
    Ok(match shared.kv.list(&h.namespace) {
        Some(table) => success(request).with_body(body::encode(&table)),
        None => RemotingCommand::error_response(
            request,
            response::QUERY_NOT_FOUND,
            format!("No config item, Namespace: {}", h.namespace),
        ),
    })
}
