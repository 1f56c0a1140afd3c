//! Shared by the suites that speak to the broker's 5.x gRPC endpoint with a raw tonic
//! client (endpoint, routes, attacks): connecting, the request headers 5.x clients send,
//! resources, and the 4.x admin call that creates a topic. Included with `#[path]` so each
//! suite stays its own test binary.

#![allow(dead_code)]

use std::net::IpAddr;
use std::time::Duration;

use e2e::broker_harness;
use e2e::client::Client;
use grpc_api::v2::Resource;
use protocol::code::response;
use tonic::transport::{Channel, Endpoint};

/// A channel to the gRPC port on this host.
pub async fn channel(port: u16) -> Channel {
    connect(endpoint(port)).await
}

/// A channel to the gRPC port from the local address `local` (another "source").
pub async fn channel_from(port: u16, local: IpAddr) -> Channel {
    connect(endpoint(port).local_address(Some(local))).await
}

fn endpoint(port: u16) -> Endpoint {
    Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .expect("a valid URI")
        .connect_timeout(Duration::from_secs(10))
}

async fn connect(e: Endpoint) -> Channel {
    e.connect().await.expect("connect to the gRPC port")
}

/// `msg` with the headers the 5.x clients send, as client `client_id`.
pub fn req<T>(msg: T, client_id: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let md = r.metadata_mut();
    md.insert("x-mq-client-id", client_id.parse().expect("ASCII id"));
    md.insert("x-mq-language", "JAVA".parse().expect("ASCII"));
    md.insert("x-mq-protocol", "v2".parse().expect("ASCII"));
    md.insert("x-mq-client-version", "5.0.7".parse().expect("ASCII"));
    md.insert("x-mq-request-id", "r-1".parse().expect("ASCII"));
    r
}

/// A resource (topic or group) without a namespace.
pub fn res(name: &str) -> Resource {
    Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    }
}

/// Creates `topic` with `queues` read and write queues through the 4.x admin request.
pub async fn create_topic(c: &Client, topic: &str, queues: i32) {
    let r = c
        .request(broker_harness::create_topic_request(topic, queues))
        .await
        .expect("create topic");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
}
