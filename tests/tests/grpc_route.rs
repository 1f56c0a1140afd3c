//! QueryRoute across broker groups: one nameserver, two real `rmq-broker` processes of
//! different broker names, each with its own `grpcServerPort`. A QueryRoute through
//! either broker answers the queues of both groups, each pointing at the gRPC endpoint
//! of the master that holds it, and a SendMessage to each endpoint is stored on that
//! broker (read back with 4.x raw pulls). A broker whose nameserver is unreachable
//! answers with its own queues.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::broker_harness::{self, TempBroker};
use e2e::client::Client;
use e2e::nameserver::{NameServer, Options};
use e2e::wait::{eventually, runtime};
use grpc_api::v2::messaging_service_client::MessagingServiceClient;
use grpc_api::v2::*;
use protocol::code::request;

#[path = "support/grpc_client.rs"]
mod grpc_client;
use grpc_client::{channel, create_topic, res};

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "T_GRPC_TWO_GROUPS";

fn route_req<T>(msg: T) -> tonic::Request<T> {
    grpc_client::req(msg, "route-client")
}

async fn query_route(port: u16, topic: &str) -> QueryRouteResponse {
    MessagingServiceClient::new(channel(port).await)
        .query_route(route_req(QueryRouteRequest {
            topic: Some(res(topic)),
            endpoints: None,
        }))
        .await
        .unwrap()
        .into_inner()
}

/// (broker name, gRPC host, gRPC port, queue id, permission) of each queue, sorted.
fn shape(r: &QueryRouteResponse) -> Vec<(String, String, i32, i32, i32)> {
    let mut v: Vec<_> = r
        .message_queues
        .iter()
        .map(|q| {
            let b = q.broker.as_ref().unwrap();
            let a = &b.endpoints.as_ref().unwrap().addresses[0];
            (b.name.clone(), a.host.clone(), a.port, q.id, q.permission)
        })
        .collect();
    v.sort();
    v
}

fn expected(groups: &[(&str, u16, i32)]) -> Vec<(String, String, i32, i32, i32)> {
    let mut v: Vec<_> = groups
        .iter()
        .flat_map(|(name, port, queues)| {
            (0..*queues).map(move |id| {
                (
                    (*name).to_owned(),
                    "127.0.0.1".to_owned(),
                    i32::from(*port),
                    id,
                    Permission::ReadWrite as i32,
                )
            })
        })
        .collect();
    v.sort();
    v
}

async fn metric(http_port: u16, series: &str) -> u64 {
    let (_, text) = e2e::http::get(http_port, "/metrics").await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn query_route_spans_broker_groups_and_sends_land_on_each() {
    let ns = NameServer::start(Options::default());
    let a = TempBroker::start(Some(ns.port), &[("brokerName", "broker-a")]);
    // B keeps a looked-up route a minute: its second QueryRoute is served from the cache.
    let b = TempBroker::start(
        Some(ns.port),
        &[
            ("brokerName", "broker-b"),
            ("grpcRouteCacheMillis", "60000"),
        ],
    );
    let (a, b) = (&a.broker, &b.broker);
    assert_ne!(a.grpc_port, b.grpc_port);
    let rt = runtime();
    rt.block_on(async {
        let ca = Client::connect(a.port).await.unwrap();
        let cb = Client::connect(b.port).await.unwrap();
        create_topic(&ca, TOPIC, 2).await;
        create_topic(&cb, TOPIC, 5).await;
        let want = expected(&[("broker-a", a.grpc_port, 2), ("broker-b", b.grpc_port, 5)]);

        // Both groups register; A's cached route expires within grpcRouteCacheMillis.
        eventually(WAIT, "QueryRoute through A spans both groups", || async {
            let r = query_route(a.grpc_port, TOPIC).await;
            r.status.as_ref().map(|s| s.code) == Some(Code::Ok as i32) && shape(&r) == want
        })
        .await;
        for q in &query_route(a.grpc_port, TOPIC).await.message_queues {
            assert_eq!(q.topic.as_ref().unwrap().name, TOPIC);
            assert_eq!(q.broker.as_ref().unwrap().id, 0);
            assert_eq!(q.accept_message_types.len(), 4);
        }
        // The nameserver has the whole route now: B's first lookup gets it, the second
        // comes from its cache.
        assert_eq!(shape(&query_route(b.grpc_port, TOPIC).await), want);
        assert_eq!(shape(&query_route(b.grpc_port, TOPIC).await), want);
        assert!(
            metric(
                b.http_port,
                "rocketmq_grpc_route_lookups_total{outcome=\"cached\"}"
            )
            .await
                >= 1
        );
        assert!(
            metric(
                b.http_port,
                "rocketmq_grpc_route_lookups_total{outcome=\"namesrv\"}"
            )
            .await
                >= 1
        );

        // A SendMessage to each endpoint the route names is stored by that broker.
        for (port, id) in [(a.grpc_port, "ID-ON-A"), (b.grpc_port, "ID-ON-B")] {
            let m = Message {
                topic: Some(res(TOPIC)),
                user_properties: Default::default(),
                system_properties: Some(SystemProperties {
                    message_id: id.to_owned(),
                    message_type: MessageType::Normal as i32,
                    ..Default::default()
                }),
                body: id.as_bytes().to_vec(),
            };
            let r = MessagingServiceClient::new(channel(port).await)
                .send_message(route_req(SendMessageRequest { messages: vec![m] }))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(
                r.status.as_ref().map(|s| s.code),
                Some(Code::Ok as i32),
                "{r:?}"
            );
        }
        for (c, queues, here, elsewhere) in [
            (&ca, 2, "ID-ON-A", "ID-ON-B"),
            (&cb, 5, "ID-ON-B", "ID-ON-A"),
        ] {
            let bodies = || async move {
                let mut bodies = Vec::new();
                for q in 0..queues {
                    for p in broker_harness::pull_queue(c, "G_ROUTE_READBACK", TOPIC, q).await {
                        bodies.push(String::from_utf8(p.body).unwrap());
                    }
                }
                bodies
            };
            // Stored messages reach the consume queues asynchronously (reput).
            eventually(WAIT, "the message readable where it was sent", || async {
                !bodies().await.is_empty()
            })
            .await;
            assert_eq!(bodies().await, vec![here.to_owned()], "not {elsewhere}");
        }
    });
}

#[test]
fn an_unreachable_nameserver_leaves_the_local_queues() {
    // Nothing listens on this port.
    let dead = e2e::ports::free_port();
    let b = TempBroker::start(Some(dead), &[("brokerName", "broker-alone")]);
    let b = &b.broker;
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.port).await.unwrap();
        create_topic(&c, TOPIC, 3).await;
        let r = query_route(b.grpc_port, TOPIC).await;
        assert_eq!(r.status.as_ref().map(|s| s.code), Some(Code::Ok as i32));
        assert_eq!(shape(&r), expected(&[("broker-alone", b.grpc_port, 3)]));
        assert!(
            metric(
                b.http_port,
                "rocketmq_grpc_route_lookups_total{outcome=\"unreachable\"}"
            )
            .await
                >= 1
        );
    });
}

/// A "nameserver" that reads requests and never answers; counts GET_ROUTEINFO_BY_TOPIC.
fn silent_nameserver() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Read;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&routes);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let counted = std::sync::Arc::clone(&counted);
            std::thread::spawn(move || {
                // frame: total length, serialize type + header length, JSON header, body.
                let mut len = [0u8; 4];
                while conn.read_exact(&mut len).is_ok() {
                    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
                    if conn.read_exact(&mut frame).is_err() || frame.len() < 4 {
                        return;
                    }
                    let header_len =
                        (u32::from_be_bytes(frame[..4].try_into().unwrap()) & 0xFF_FFFF) as usize;
                    let header: Option<serde_json::Value> = frame
                        .get(4..4 + header_len)
                        .and_then(|h| serde_json::from_slice(h).ok());
                    let code = header.as_ref().and_then(|h| h["code"].as_i64());
                    if code == Some(i64::from(request::GET_ROUTEINFO_BY_TOPIC)) {
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    (port, routes)
}

#[test]
fn a_silent_nameserver_costs_one_lookup_and_calls_keep_their_deadline() {
    let (ns_port, asked) = silent_nameserver();
    let b = TempBroker::start(Some(ns_port), &[("brokerName", "broker-waiting")]);
    let b = &b.broker;
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.port).await.unwrap();
        create_topic(&c, TOPIC, 2).await;
        let ch = channel(b.grpc_port).await;
        // A burst of calls with a 2 s deadline: each is answered (tonic would report
        // DEADLINE_EXCEEDED otherwise) with the local queues.
        let calls = (0..8).map(|_| {
            let mut cl = MessagingServiceClient::new(ch.clone());
            async move {
                let mut r = route_req(QueryRouteRequest {
                    topic: Some(res(TOPIC)),
                    endpoints: None,
                });
                r.set_timeout(Duration::from_secs(2));
                cl.query_route(r).await
            }
        });
        for r in futures::future::join_all(calls).await {
            let r = r
                .expect("answered within the client's deadline")
                .into_inner();
            assert_eq!(r.status.as_ref().map(|s| s.code), Some(Code::Ok as i32));
            assert_eq!(shape(&r), expected(&[("broker-waiting", b.grpc_port, 2)]));
        }
        // The calls waited for one lookup in flight instead of sending one each.
        let n = asked.load(std::sync::atomic::Ordering::SeqCst);
        assert!((1..8).contains(&n), "{n} route requests for 8 calls");
    });
}
