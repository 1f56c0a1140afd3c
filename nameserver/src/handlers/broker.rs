//! Broker-facing requests: REGISTER_BROKER, UNREGISTER_BROKER, QUERY_DATA_VERSION.

use std::time::Instant;

use protocol::RemotingCommand;
use protocol::body::{self, DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper};
use protocol::code::response;
use protocol::header::{
    QueryDataVersionRequestHeader, QueryDataVersionResponseHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader,
};

use super::{HandlerError, success};
use crate::kv_config::NAMESPACE_ORDER_TOPIC_CONFIG;
use crate::limits::MAX_REGISTER_BODY_BYTES;
use crate::route_table::{ConnId, RegisterRefusal, Registration};
use crate::state::Shared;

/// `MQVersion.Version.V3_0_11.ordinal()`: older brokers send a bare topic wrapper.
const REGISTER_BODY_MIN_VERSION: i32 = 37;

/// `UtilAll.crc32`: CRC32 with the sign bit masked off.
pub fn body_crc32(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

pub fn register(
    shared: &Shared,
    request: &RemotingCommand,
    conn: ConnId,
) -> Result<RemotingCommand, HandlerError> {
    let header: RegisterBrokerRequestHeader = request.header()?;
    if header.body_crc32 != 0 && body_crc32(&request.body) != header.body_crc32 {
        tracing::warn!(broker = %header.broker_addr, "register body crc32 mismatch");
        return Ok(RemotingCommand::error_response(
            request,
            response::SYSTEM_ERROR,
            "crc32 not match",
        ));
    }
    // An absent body registers with DataVersion 0/0, like Java.
    let body = if request.body.is_empty() {
        RegisterBrokerBody::default()
    } else if request.version >= REGISTER_BODY_MIN_VERSION {
        // `maxRegisterBodyBytes` caps the inflated size (the codec's own cap is 64 MiB).
        let max = shared.config.read().max_register_body_bytes;
        RegisterBrokerBody::decode_with_limit(&request.body, header.compressed, max).inspect_err(
            |_| {
                shared.metrics.register_refused.inc();
                shared.metrics.limit_refused(MAX_REGISTER_BODY_BYTES);
            },
        )?
    } else {
        RegisterBrokerBody {
            topic_config_serialize_wrapper: body::decode::<TopicConfigSerializeWrapper>(
                &request.body,
            )?,
            filter_server_list: Vec::new(),
        }
    };
    let topics = body.topic_config_serialize_wrapper.topic_config_table.len();
    let registered = shared.routes.write().register(
        Registration {
            cluster_name: header.cluster_name,
            broker_addr: header.broker_addr.clone(),
            broker_name: header.broker_name.clone(),
            broker_id: header.broker_id,
            ha_server_addr: header.ha_server_addr,
            topic_config: body.topic_config_serialize_wrapper,
            filter_server_list: body.filter_server_list,
            conn,
            master_epoch: header.master_epoch,
            // Not a RocketMQ field; a port out of range publishes no gRPC endpoint.
            grpc_port: header
                .grpc_port
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0),
        },
        Instant::now(),
    );
    let result = match registered {
        Ok(result) => result,
        Err(RegisterRefusal::StaleMaster { theirs, ours }) => {
            tracing::warn!(
                broker = %header.broker_addr, name = %header.broker_name,
                epoch = ?theirs, highest = ours,
                "refused a master registration older than the group's newest master"
            );
            return Ok(RemotingCommand::error_response(
                request,
                response::SYSTEM_ERROR,
                format!(
                    "stale master: brokerName {} has a master of epoch {ours}; this \
                     registration carries {}",
                    header.broker_name,
                    theirs.map_or("no epoch".to_owned(), |e| format!("epoch {e}"))
                ),
            ));
        }
        Err(RegisterRefusal::Limit(refusal)) => {
            shared.metrics.limit_refused(refusal.key);
            tracing::warn!(
                broker = %header.broker_addr, name = %header.broker_name,
                limit = refusal.key, "registration refused: {}", refusal.detail
            );
            return Ok(RemotingCommand::error_response(
                request,
                response::SYSTEM_ERROR,
                refusal.remark(),
            ));
        }
    };
    tracing::debug!(
        broker = %header.broker_addr,
        name = %header.broker_name,
        id = header.broker_id,
        topics,
        "broker registered"
    );
    let mut response = success(request).with_header(&RegisterBrokerResponseHeader {
        ha_server_addr: result.ha_server_addr,
        master_addr: result.master_addr,
    });
    // The broker stays registered with the routes it had; the remark (which brokers
    // ignore on SUCCESS) and the log say which growth was left out.
    if let Some(refusal) = result.growth_refused {
        shared.metrics.limit_refused(refusal.key);
        tracing::warn!(
            broker = %header.broker_addr, name = %header.broker_name,
            limit = refusal.key, "new topics of a registered broker left out: {}", refusal.detail
        );
        response.remark = Some(refusal.remark());
    }
    if let Some(order) = shared.kv.list(NAMESPACE_ORDER_TOPIC_CONFIG) {
        response = response.with_body(body::encode(&order));
    }
    Ok(response)
}

pub fn unregister(
    shared: &Shared,
    request: &RemotingCommand,
    _conn: ConnId,
) -> Result<RemotingCommand, HandlerError> {
    let h: UnRegisterBrokerRequestHeader = request.header()?;
    shared
        .routes
        .write()
        .unregister(&h.broker_addr, Instant::now());
    tracing::info!(broker = %h.broker_addr, name = %h.broker_name, "broker unregistered");
    Ok(success(request))
}

pub fn query_data_version(
    shared: &Shared,
    request: &RemotingCommand,
    _conn: ConnId,
) -> Result<RemotingCommand, HandlerError> {
    let h: QueryDataVersionRequestHeader = request.header()?;
    let version: DataVersion = body::decode(&request.body)?;
    let (changed, ours) = {
        let mut routes = shared.routes.write();
        let changed = routes.is_topic_config_changed(&h.broker_addr, &version);
        if !changed {
            routes.touch(&h.broker_addr, Instant::now());
        }
        (changed, routes.data_version(&h.broker_addr))
    };
    let mut response = success(request).with_header(&QueryDataVersionResponseHeader { changed });
    if let Some(ours) = ours {
        response = response.with_body(body::encode(&ours));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_masked_like_utilall() {
        // CRC32("123456789") = 0xCBF43926; masked to 31 bits.
        assert_eq!(body_crc32(b"123456789"), 0x4BF4_3926);
        assert!(body_crc32(&[0xff; 64]) >= 0);
    }
}
