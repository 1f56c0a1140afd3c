//! Bad input, unknown requests, config updates and the HTTP endpoint.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::broker::FakeBroker;
use e2e::nameserver::Options;
use e2e::wait::eventually_ok;
use e2e::{Client, NameServer, http};
use protocol::RemotingCommand;
use protocol::body::TopicRouteData;
use protocol::code::{request, response};
use protocol::header::{
    GetKVConfigRequestHeader, GetRouteInfoRequestHeader, PutKVConfigRequestHeader,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn route_request(topic: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    )
}

/// Writes `bytes` on a fresh connection (then half-closes if `close_write`) and
/// returns true when the server closes the connection without answering.
async fn server_hangs_up(port: u16, bytes: &[u8], close_write: bool) -> bool {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(bytes).await.unwrap();
    if close_write {
        s.shutdown().await.unwrap();
    }
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

fn frame(serialize_type: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&(((serialize_type as u32) << 24) | header.len() as u32).to_be_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}

#[tokio::test]
async fn malformed_frames_close_only_their_connection() {
    let ns = NameServer::start(Options::default());
    let healthy = Client::connect(ns.port).await.unwrap();
    let broker = FakeBroker::new("C", "b", "127.0.0.1:17911", 0).topic("Still", 1);
    healthy.request(broker.register(false)).await.unwrap();

    let absurd = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
    assert!(
        server_hangs_up(ns.port, &absurd, false).await,
        "absurd length"
    );
    let negative = (-5i32).to_be_bytes();
    assert!(
        server_hangs_up(ns.port, &negative, false).await,
        "negative length"
    );
    let garbage_json = frame(0, b"{this is not json", b"");
    assert!(
        server_hangs_up(ns.port, &garbage_json, false).await,
        "garbage JSON"
    );
    let bad_type = frame(9, b"{}", b"");
    assert!(
        server_hangs_up(ns.port, &bad_type, false).await,
        "serialize type 9"
    );
    let bad_header_len = {
        let mut f = frame(0, b"{\"code\":105}", b"");
        f[5..8].copy_from_slice(&[0xff, 0xff, 0xff]);
        f
    };
    assert!(
        server_hangs_up(ns.port, &bad_header_len, false).await,
        "header length"
    );
    let full = frame(
        0,
        br#"{"code":105,"flag":0,"language":"JAVA","opaque":1,"version":409}"#,
        b"",
    );
    assert!(
        server_hangs_up(ns.port, &full[..full.len() - 10], true).await,
        "truncated"
    );

    // The registered broker's connection and the route survived all of that.
    let r = healthy.request(route_request("Still")).await.unwrap();
    assert_eq!(r.code, response::SUCCESS);
    let fresh = Client::connect(ns.port).await.unwrap();
    let r = fresh.request(route_request("Still")).await.unwrap();
    assert_eq!(
        TopicRouteData::decode(&r.body).unwrap().queue_datas.len(),
        1
    );
}

#[tokio::test]
async fn unknown_codes_bad_headers_and_oneway() {
    let ns = NameServer::start(Options::default());
    let c = Client::connect(ns.port).await.unwrap();

    let r = c
        .request(RemotingCommand::bare_request(9999))
        .await
        .unwrap();
    assert_eq!(r.code, response::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        r.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
    // A broker-only code is not the nameserver's either.
    let r = c
        .request(RemotingCommand::bare_request(request::SEND_MESSAGE))
        .await
        .unwrap();
    assert_eq!(r.code, response::REQUEST_CODE_NOT_SUPPORTED);

    let r = c
        .request(RemotingCommand::bare_request(
            request::GET_ROUTEINFO_BY_TOPIC,
        ))
        .await
        .unwrap();
    assert_eq!(r.code, response::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("<topic>"));
    let mut bad_id = FakeBroker::new("C", "b", "127.0.0.1:1", 0).register(false);
    bad_id.ext_fields.insert("brokerId", "zero");
    let r = c.request(bad_id).await.unwrap();
    assert_eq!(r.code, response::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("brokerId"));
    let mut bad_body = FakeBroker::new("C", "b", "127.0.0.1:1", 0).register(false);
    bad_body.body = bytes::Bytes::from_static(b"{\"topicConfigSerializeWrapper\":[");
    bad_body.ext_fields.insert("bodyCrc32", "0");
    assert_eq!(
        c.request(bad_body).await.unwrap().code,
        response::SYSTEM_ERROR
    );

    // Oneway: applied, never answered; the next request still matches its opaque.
    c.oneway(RemotingCommand::request(
        request::PUT_KV_CONFIG,
        &PutKVConfigRequestHeader {
            namespace: "N".into(),
            key: "k".into(),
            value: "v1".into(),
        },
    ))
    .await
    .unwrap();
    let get = RemotingCommand::request(
        request::GET_KV_CONFIG,
        &GetKVConfigRequestHeader {
            namespace: "N".into(),
            key: "k".into(),
        },
    );
    let value = eventually_ok(Duration::from_secs(5), "the oneway put applied", || async {
        let r = c.request(get.clone()).await.unwrap();
        if r.code == response::SUCCESS {
            Ok(r.ext_fields.get("value").map(str::to_owned))
        } else {
            Err(r.code)
        }
    })
    .await;
    assert_eq!(value.as_deref(), Some("v1"));
    c.oneway(RemotingCommand::bare_request(9999)).await.unwrap();
    let r = c.request(route_request("x")).await.unwrap();
    assert_eq!(r.code, response::TOPIC_NOT_EXIST);
    assert_eq!(c.pending_count(), 0);
}

#[tokio::test]
async fn config_update_is_restricted_to_harmless_keys() {
    let ns = NameServer::start(Options::default());
    let c = Client::connect(ns.port).await.unwrap();
    let kv_path = ns.data_dir().join("kvConfig.json").display().to_string();
    let get_config = || RemotingCommand::bare_request(request::GET_NAMESRV_CONFIG);
    let text = |r: &RemotingCommand| String::from_utf8(r.body.to_vec()).unwrap();

    let r = c.request(get_config()).await.unwrap();
    assert_eq!(r.code, response::SUCCESS);
    assert!(text(&r).contains(&format!("kvConfigPath={kv_path}\n")));
    assert!(text(&r).contains("orderMessageEnable=false\n"));

    let update = |body: &str| {
        RemotingCommand::bare_request(request::UPDATE_NAMESRV_CONFIG)
            .with_body(body.as_bytes().to_vec())
    };
    for evil in [
        "kvConfigPath=/tmp/evil.json",
        "configStorePath=/etc/cron.d/x",
        "orderMessageEnable=true\nrocketmqHome=/tmp",
        "listenPort=1",
    ] {
        let r = c.request(update(evil)).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR, "{evil}");
    }
    let r = c.request(get_config()).await.unwrap();
    assert!(text(&r).contains(&format!("kvConfigPath={kv_path}\n")));
    assert!(
        text(&r).contains("orderMessageEnable=false\n"),
        "rejected update applied partly"
    );

    // A permitted key takes effect: routes now carry orderTopicConf.
    let r = c.request(update("orderMessageEnable=true")).await.unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let broker = FakeBroker::new("C", "broker-a", "127.0.0.1:18911", 0).topic("Ordered", 4);
    c.request(broker.register(false)).await.unwrap();
    c.request(RemotingCommand::request(
        request::PUT_KV_CONFIG,
        &PutKVConfigRequestHeader {
            namespace: "ORDER_TOPIC_CONFIG".into(),
            key: "Ordered".into(),
            value: "broker-a:4".into(),
        },
    ))
    .await
    .unwrap();
    let r = c.request(route_request("Ordered")).await.unwrap();
    let route = TopicRouteData::decode(&r.body).unwrap();
    assert_eq!(route.order_topic_conf.as_deref(), Some("broker-a:4"));
    // Registration answers with the ORDER_TOPIC_CONFIG namespace as a KVTable.
    let r = c.request(broker.register(false)).await.unwrap();
    assert_eq!(&r.body[..], br#"{"table":{"Ordered":"broker-a:4"}}"#);
}

#[tokio::test]
async fn http_endpoint_serves_metrics_and_probes() {
    let ns = NameServer::start(Options::default());
    let c = Client::connect(ns.port).await.unwrap();
    let broker = FakeBroker::new("C", "b", "127.0.0.1:19911", 0).topic("M", 1);
    c.request(broker.register(false)).await.unwrap();
    c.request(route_request("M")).await.unwrap();

    let (status, body) = http::get(ns.http_port, "/healthz").await.unwrap();
    assert_eq!((status, body.trim()), (200, "ok"));
    let (status, _) = http::get(ns.http_port, "/readyz").await.unwrap();
    assert_eq!(status, 200);
    let (status, body) = http::get(ns.http_port, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    for needle in [
        r#"rmq_namesrv_requests_total{code="REGISTER_BROKER"} 1"#,
        r#"rmq_namesrv_requests_total{code="GET_ROUTEINFO_BY_TOPIC"} 1"#,
        "rmq_namesrv_request_duration_seconds_count",
        "rmq_namesrv_live_brokers 1",
        "rmq_namesrv_topics 1",
        "rmq_namesrv_open_connections 1",
    ] {
        assert!(body.contains(needle), "missing {needle} in\n{body}");
    }
    let (status, _) = http::get(ns.http_port, "/nope").await.unwrap();
    assert_eq!(status, 404);
}
