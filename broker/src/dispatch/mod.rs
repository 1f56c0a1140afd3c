//! The broker's one request-code table (`BrokerController.registerProcessor` plus
//! `AdminBrokerProcessor.processRequest`) and the envelope rules around it:
//! oneway requests get no answer, a handler error becomes SYSTEM_ERROR with the error as
//! remark, unknown codes get REQUEST_CODE_NOT_SUPPORTED.

pub mod acl;
pub mod admin_gate;

use std::sync::Arc;
use std::time::Instant;

use protocol::RemotingCommand;
use protocol::code::{request as rq, response};

use crate::handlers::outbound::Outbound;
use crate::handlers::{
    HandlerError, Reply, acl_admin, admin, broker_config, client, consumer_status, delay_offset,
    lookup, offset, offset_reset, producer, pull, send, send_back,
};
use crate::services::Broker;
use crate::services::clients::Conn;

/// The producer's send requests (what `rocketmq_broker_send_failed` counts).
pub fn is_send(code: i32) -> bool {
    matches!(
        code,
        rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE
    )
}

/// Runs one request; `None` when nothing is to be written (oneway).
pub async fn dispatch(
    broker: &Arc<Broker>,
    conn: &Conn,
    request: RemotingCommand,
) -> Option<Outbound> {
    let started = Instant::now();
    let code = request.code;
    // The one ACL check, in front of the table (a no-op unless aclEnable=true), and the
    // admin-secret check that stands in for it on role changes when the ACL is off.
    let checked = crate::dispatch::acl::check(broker, conn, &request)
        .and_then(|()| crate::dispatch::admin_gate::check(broker, conn, &request));
    if let Err(refusal) = checked {
        broker.metrics.observe_request(code, started.elapsed());
        if is_send(code) {
            broker
                .metrics
                .send_answered(refusal.as_ref().map_or(response::NO_PERMISSION, |a| a.code));
        }
        return refusal.map(|answer| (*answer).into());
    }
    let result: Result<Reply, HandlerError> = match code {
        rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => {
            send::send_message(broker, conn, &request).await
        }
        rq::CONSUMER_SEND_MSG_BACK => send_back::consumer_send_msg_back(broker, &request).await,
        rq::PULL_MESSAGE => pull::pull_message(broker, conn, &request).await,
        rq::QUERY_MESSAGE => lookup::query_message(broker, &request).await,
        rq::VIEW_MESSAGE_BY_ID => lookup::view_message(broker, &request).await,
        rq::HEART_BEAT => client::heartbeat(broker, conn, &request),
        rq::UNREGISTER_CLIENT => client::unregister_client(broker, conn, &request),
        rq::CHECK_CLIENT_CONFIG => client::check_client_config(broker, &request),
        rq::GET_CONSUMER_LIST_BY_GROUP => client::consumer_list(broker, &request),
        rq::LOCK_BATCH_MQ => client::lock_batch(broker, conn, &request),
        rq::UNLOCK_BATCH_MQ => client::unlock_batch(broker, conn, &request),
        rq::QUERY_CONSUMER_OFFSET => offset::query_consumer_offset(broker, &request),
        rq::UPDATE_CONSUMER_OFFSET => offset::update_consumer_offset(broker, &request),
        rq::GET_MAX_OFFSET => offset::max_offset(broker, &request),
        rq::GET_MIN_OFFSET => offset::min_offset(broker, &request),
        rq::SEARCH_OFFSET_BY_TIMESTAMP => offset::search_by_timestamp(broker, &request),
        rq::GET_EARLIEST_MSG_STORETIME => offset::earliest_store_time(broker, &request),
        rq::GET_ALL_DELAY_OFFSET => delay_offset::all_delay_offsets(broker, &request),
        rq::GET_ALL_CONSUMER_OFFSET => offset::all_consumer_offsets(broker, &request),
        rq::UPDATE_AND_CREATE_TOPIC => admin::create_topic(broker, &request).await,
        rq::DELETE_TOPIC_IN_BROKER => admin::delete_topic(broker, &request).await,
        rq::GET_ALL_TOPIC_CONFIG => admin::all_topic_config(broker, &request),
        rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => admin::create_group(broker, &request).await,
        rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => admin::all_groups(broker, &request),
        rq::DELETE_SUBSCRIPTIONGROUP => admin::delete_group(broker, &request).await,
        rq::GET_BROKER_RUNTIME_INFO => admin::runtime_info(broker, &request),
        rq::GET_BROKER_CONFIG => admin::broker_config(broker, &request),
        rq::UPDATE_BROKER_CONFIG => broker_config::update(broker, &request).await,
        rq::GET_CONSUMER_CONNECTION_LIST => admin::consumer_connections(broker, &request),
        rq::GET_PRODUCER_CONNECTION_LIST => producer::producer_connections(broker, &request),
        rq::INVOKE_BROKER_TO_RESET_OFFSET => offset_reset::reset_offset(broker, &request).await,
        rq::INVOKE_BROKER_TO_GET_CONSUMER_STATUS => {
            consumer_status::consumer_status(broker, &request).await
        }
        rq::GET_TOPIC_STATS_INFO => admin::topic_stats(broker, &request),
        rq::GET_CONSUME_STATS => admin::consume_stats(broker, &request),
        rq::END_TRANSACTION => {
            crate::handlers::end_transaction::end_transaction(broker, &request).await
        }
        rq::UPDATE_AND_CREATE_ACL_CONFIG => acl_admin::update_account(broker, &request).await,
        rq::DELETE_ACL_CONFIG => acl_admin::delete_account(broker, &request).await,
        rq::GET_BROKER_CLUSTER_ACL_INFO => acl_admin::acl_info(broker, &request),
        rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => {
            acl_admin::update_global_whitelist(broker, &request).await
        }
        rq::GET_BROKER_CLUSTER_ACL_CONFIG => acl_admin::acl_config(broker, &request),
        rq::GET_BROKER_HA_STATUS => crate::handlers::ha_admin::ha_status(broker, &request),
        rq::GET_BROKER_EPOCH_CACHE => crate::handlers::ha_admin::epoch_cache(broker, &request),
        rq::NOTIFY_BROKER_ROLE_CHANGED => {
            crate::handlers::ha_admin::notify_role_changed(broker, &request).await
        }
        _ => Ok(Reply::Response(
            RemotingCommand::error_response(
                &request,
                response::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {code} not supported"),
            )
            .into(),
        )),
    };
    broker.metrics.observe_request(code, started.elapsed());
    let out = match result {
        Ok(Reply::Response(out)) => out,
        Ok(Reply::None) => return None,
        Err(e) => answer_failure(e).response_to(&request).into(),
    };
    if is_send(code) {
        broker.metrics.send_answered(out.command.code);
    }
    tracing::trace!(
        code,
        fields = ?request.ext_fields,
        response = out.command.code,
        remark = out.command.remark.as_deref().unwrap_or(""),
        "request served"
    );
    (!request.is_oneway()).then_some(out)
}

/// The shared error response for a handler's failure (a config file it could not
/// persist is a failure like any other).
fn answer_failure(e: HandlerError) -> remoting::answer::HandlerError {
    use remoting::answer::HandlerError as Answer;
    match e {
        HandlerError::Header(e) => Answer::Header(e),
        HandlerError::Body(e) => Answer::Body(e),
        HandlerError::Persist(e) => Answer::Failed(e.to_string()),
    }
}
