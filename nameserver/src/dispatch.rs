//! The one request-code table of the nameserver (`DefaultRequestProcessor.processRequest`)
//! and the envelope rules around it.

use std::sync::Arc;
use std::time::Instant;

use protocol::RemotingCommand;
use protocol::code::{request as rq, response};

use crate::handlers::{HandlerError, broker, config, kv, route};
use crate::route_table::ConnId;
use crate::state::Shared;

/// A request handler. It gets the request and the connection it came on and builds the
/// response; `Err` becomes a `SYSTEM_ERROR` answer.
pub type Handler = fn(&Shared, &RemotingCommand, ConnId) -> Result<RemotingCommand, HandlerError>;

/// Where a handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Memory-only work, run on the connection's task.
    Inline,
    /// Touches the disk (KV persistence), run on the blocking pool.
    Blocking,
    /// Inflates and parses a large body (REGISTER_BROKER): on the blocking pool, at most
    /// `maxConcurrentRegistrations` at once, so a burst of 16 MiB bodies can neither stall
    /// the reactor nor hold many inflated copies in memory.
    Heavy,
}

/// The dispatch table: request code → handler.
pub fn lookup(code: i32) -> Option<(Handler, Mode)> {
    use Mode::*;
    let entry: (Handler, Mode) = match code {
        rq::REGISTER_BROKER => (broker::register, Heavy),
        rq::UNREGISTER_BROKER => (broker::unregister, Inline),
        rq::QUERY_DATA_VERSION => (broker::query_data_version, Inline),
        rq::GET_ROUTEINFO_BY_TOPIC => (route::route_by_topic, Inline),
        rq::GET_BROKER_CLUSTER_INFO => (route::cluster_info, Inline),
        rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => (route::all_topics, Inline),
        rq::GET_TOPICS_BY_CLUSTER => (route::topics_by_cluster, Inline),
        rq::GET_SYSTEM_TOPIC_LIST_FROM_NS => (route::system_topics, Inline),
        rq::GET_UNIT_TOPIC_LIST => (route::unit_topics, Inline),
        rq::GET_HAS_UNIT_SUB_TOPIC_LIST => (route::has_unit_sub_topics, Inline),
        rq::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => (route::has_unit_sub_ununit_topics, Inline),
        rq::DELETE_TOPIC_IN_NAMESRV => (route::delete_topic, Inline),
        rq::WIPE_WRITE_PERM_OF_BROKER => (route::wipe_write_perm, Inline),
        rq::ADD_WRITE_PERM_OF_BROKER => (route::add_write_perm, Inline),
        rq::PUT_KV_CONFIG => (kv::put, Blocking),
        rq::GET_KV_CONFIG => (kv::get, Inline),
        rq::DELETE_KV_CONFIG => (kv::delete, Blocking),
        rq::GET_KVLIST_BY_NAMESPACE => (kv::list, Inline),
        rq::GET_NAMESRV_CONFIG => (config::get, Inline),
        rq::UPDATE_NAMESRV_CONFIG => (config::update, Inline),
        _ => return None,
    };
    Some(entry)
}

/// Handles one request; `None` for oneway requests, which get no answer.
pub async fn dispatch(
    shared: &Arc<Shared>,
    request: RemotingCommand,
    conn: ConnId,
) -> Option<RemotingCommand> {
    let started = Instant::now();
    let code = request.code;
    let oneway = request.is_oneway();
    // The one ACL check, in front of the table (a no-op unless aclEnable=true), and the
    // admin-secret check that stands in for it when the ACL is off.
    let checked = crate::acl::check(shared, &request)
        .and_then(|()| crate::admin_gate::check(shared, &request));
    if let Err(refusal) = checked {
        shared.metrics.observe_request(code, started.elapsed());
        return refusal.filter(|_| !oneway).map(|answer| *answer);
    }
    let response = match lookup(code) {
        // The Java nameserver sends nothing for unknown codes and lets the client time
        // out; answering like the broker's AdminBrokerProcessor is kinder.
        None => RemotingCommand::error_response(
            &request,
            response::REQUEST_CODE_NOT_SUPPORTED,
            format!(" request type {code} not supported"),
        ),
        Some((handler, Mode::Inline)) => run(handler, shared, &request, conn),
        Some((handler, Mode::Heavy)) => {
            // The semaphore is never closed; a closed one would only skip the bound.
            let _slot = shared.heavy_slots.acquire().await.ok();
            blocking(handler, shared, request, conn).await
        }
        Some((handler, Mode::Blocking)) => blocking(handler, shared, request, conn).await,
    };
    shared.metrics.observe_request(code, started.elapsed());
    (!oneway).then_some(response)
}

/// Runs `handler` on the blocking pool.
async fn blocking(
    handler: Handler,
    shared: &Arc<Shared>,
    request: RemotingCommand,
    conn: ConnId,
) -> RemotingCommand {
    let shared = Arc::clone(shared);
    let fallback =
        RemotingCommand::error_response(&request, response::SYSTEM_ERROR, "request handler failed");
    tokio::task::spawn_blocking(move || run(handler, &shared, &request, conn))
        .await
        .unwrap_or(fallback)
}

fn run(
    handler: Handler,
    shared: &Shared,
    request: &RemotingCommand,
    conn: ConnId,
) -> RemotingCommand {
    handler(shared, request, conn).unwrap_or_else(|e| e.response_to(request))
}
