//! Route queries and topic administration.

use protocol::RemotingCommand;
use protocol::body::route::V5_MIN_VERSION;
use protocol::body::{self, RouteEncoding, TopicList};
use protocol::code::response;
use protocol::header::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
    DeleteTopicFromNamesrvRequestHeader, GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader, WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
};

use super::{HandlerError, success};
use crate::kv_config::NAMESPACE_ORDER_TOPIC_CONFIG;
use crate::route_table::{ConnId, UnitFilter, WritePermOp};
use crate::state::Shared;

type Reply = Result<RemotingCommand, HandlerError>;

pub fn route_by_topic(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: GetRouteInfoRequestHeader = request.header()?;
    let Some(mut route) = shared.routes.read().route(&h.topic) else {
        return Ok(RemotingCommand::error_response(
            request,
            response::TOPIC_NOT_EXIST,
            format!(
                "No topic route info in name server for the topic: {}",
                h.topic
            ),
        ));
    };
    if shared.config.read().order_message_enable {
        route.order_topic_conf = shared.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, &h.topic);
    }
    // Answer 5.x clients with the 5.x BrokerData shape, as a 5.x nameserver would.
    if request.version >= V5_MIN_VERSION {
        route.fill_v5_fields();
    }
    let encoding = RouteEncoding::for_request(request.version, h.accept_standard_json_only);
    Ok(success(request).with_body(route.encode(encoding)))
}

pub fn cluster_info(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let mut info = shared.routes.read().cluster_info();
    if request.version >= V5_MIN_VERSION {
        info.fill_v5_fields();
    }
    Ok(success(request).with_body(info.encode()))
}

fn topic_list(request: &RemotingCommand, list: TopicList) -> Reply {
    Ok(success(request).with_body(body::encode(&list)))
}

pub fn all_topics(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let list = shared.routes.read().all_topics();
    topic_list(request, list)
}

pub fn topics_by_cluster(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: GetTopicsByClusterRequestHeader = request.header()?;
    let list = shared.routes.read().topics_by_cluster(&h.cluster);
    topic_list(request, list)
}

pub fn system_topics(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let list = shared.routes.read().system_topics();
    topic_list(request, list)
}

pub fn unit_topics(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let list = shared.routes.read().unit_topics(UnitFilter::Unit);
    topic_list(request, list)
}

pub fn has_unit_sub_topics(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let list = shared.routes.read().unit_topics(UnitFilter::HasUnitSub);
    topic_list(request, list)
}

pub fn has_unit_sub_ununit_topics(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let list = shared
        .routes
        .read()
        .unit_topics(UnitFilter::HasUnitSubNotUnit);
    topic_list(request, list)
}

pub fn delete_topic(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: DeleteTopicFromNamesrvRequestHeader = request.header()?;
    shared
        .routes
        .write()
        .delete_topic(&h.topic, h.cluster_name.as_deref());
    tracing::info!(topic = %h.topic, cluster = ?h.cluster_name, "topic deleted");
    Ok(success(request))
}

pub fn wipe_write_perm(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: WipeWritePermOfBrokerRequestHeader = request.header()?;
    let count = shared
        .routes
        .write()
        .change_write_perm(&h.broker_name, WritePermOp::Wipe);
    tracing::info!(broker = %h.broker_name, topics = count, "write permission wiped");
    Ok(
        success(request).with_header(&WipeWritePermOfBrokerResponseHeader {
            wipe_topic_count: count,
        }),
    )
}

pub fn add_write_perm(shared: &Shared, request: &RemotingCommand, _: ConnId) -> Reply {
    let h: AddWritePermOfBrokerRequestHeader = request.header()?;
    let count = shared
        .routes
        .write()
        .change_write_perm(&h.broker_name, WritePermOp::Add);
    tracing::info!(broker = %h.broker_name, topics = count, "write permission added");
    Ok(
        success(request).with_header(&AddWritePermOfBrokerResponseHeader {
            add_topic_count: count,
        }),
    )
}
