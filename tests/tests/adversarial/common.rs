//! What every attack test checks afterwards, and the raw requests attackers send.

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{BrokerProcess, send_v2};
use e2e::http;
use protocol::RemotingCommand;
use protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, SubscriptionData,
};
use protocol::code::{request, response};

/// The broker survived and serves a client that took no part in the attack: a fresh
/// connection sends and gets SUCCESS, and `/healthz` answers 200.
pub async fn victim_is_served(b: &mut BrokerProcess) {
    assert!(b.running(), "the broker died; log:\n{}", b.log());
    let c = tokio::time::timeout(Duration::from_secs(10), Client::connect(b.port))
        .await
        .expect("victim connect timed out")
        .expect("victim connects");
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        c.request(send_v2("VictimTopic", 0, b"victim", "")),
    )
    .await
    .expect("victim send timed out")
    .expect("victim send answered");
    assert_eq!(r.code, response::SUCCESS, "victim send: {:?}", r.remark);
    let (status, _) = http::get(b.http_port, "/healthz").await.expect("healthz");
    assert_eq!(status, 200);
}

/// The value of the metric sample `series` (name and labels, exactly as exposed).
pub async fn metric(http_port: u16, series: &str) -> f64 {
    let (_, body) = http::get(http_port, "/metrics").await.expect("metrics");
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `rocketmq_broker_limit_refusals_total{limit="<key>"}`.
pub async fn refusals(http_port: u16, key: &str) -> f64 {
    metric(
        http_port,
        &format!("rocketmq_broker_limit_refusals_total{{limit=\"{key}\"}}"),
    )
    .await
}

/// One SQL92 subscription of `group` to `topic`.
pub fn sql_subscription(topic: &str, selector: &str, version: i64) -> SubscriptionData {
    SubscriptionData {
        class_filter_mode: false,
        topic: topic.to_owned(),
        sub_string: selector.to_owned(),
        tags_set: Default::default(),
        code_set: Default::default(),
        sub_version: version,
        expression_type: "SQL92".to_owned(),
    }
}

/// A HEART_BEAT of one consumer group with these subscriptions.
pub fn heartbeat(client_id: &str, group: &str, subs: Vec<SubscriptionData>) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.to_owned(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            subscription_data_set: subs,
            unit_mode: false,
        }],
    };
    RemotingCommand::bare_request(request::HEART_BEAT).with_body(protocol::body::encode(&data))
}

/// A raw HTTP/2 gRPC call's grpc-status, from its headers (a trailers-only answer) or its
/// trailers; `None` while it has not ended within `within`.
pub async fn grpc_status(answer: h2::client::ResponseFuture, within: Duration) -> Option<u32> {
    tokio::time::timeout(within, async move {
        let response = answer.await.ok()?;
        let code = |h: &::http::HeaderMap| -> Option<u32> {
            h.get("grpc-status")?.to_str().ok()?.parse().ok()
        };
        if let Some(code) = code(response.headers()) {
            return Some(code);
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let _ = chunk.ok()?;
        }
        code(&body.trailers().await.ok()??)
    })
    .await
    .ok()
    .flatten()
}
