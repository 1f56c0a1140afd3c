//! The gRPC request budget turned against other clients: `maxInFlightBytesTotal` is
//! shared by every client of both ports, so whatever a stalled call holds of it is
//! taken from everyone's sends. An announcement (a 5-byte prefix) used to reserve its
//! whole length from the shared total for as long as the call lived, and a call whose
//! message never completed lived forever: two prefixes from one attacker and no victim
//! could send again. Now the shared total holds only the bytes that arrived, and a
//! message whose bytes stop coming ends its call after `grpcRequestMessageTimeoutMillis`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use e2e::broker_harness::TempBroker;
use e2e::wait::{eventually, runtime};
use h2::client::{ResponseFuture, SendRequest};
use tokio::net::TcpSocket;

use crate::common::{grpc_status, refusals, victim_is_served};

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const SEND: &str = "/apache.rocketmq.v2.MessagingService/SendMessage";
/// DEADLINE_EXCEEDED.
const DEADLINE_EXCEEDED: u32 = 4;
/// A connection's budget and the broker's (two connections' worth).
const PER_CONNECTION: u32 = 1024 * 1024;
const TOTAL: u32 = 2 * PER_CONNECTION;
/// A message whose prefixed length is exactly a connection's budget.
const MESSAGE: u32 = PER_CONNECTION - 5;

fn start(timeout_ms: &str) -> TempBroker {
    TempBroker::start(
        None,
        &[
            ("maxInFlightBytesPerConnection", &PER_CONNECTION.to_string()),
            ("maxInFlightBytesTotal", &TOTAL.to_string()),
            ("grpcRequestMessageTimeoutMillis", timeout_ms),
        ],
    )
}

async fn h2_connect_from(port: u16, local: IpAddr) -> SendRequest<Bytes> {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(local, 0))
        .expect("bind the attacker address");
    let tcp = socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connect to the gRPC port");
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Opens a SendMessage call and sends the prefix of a `len`-byte message, then `sent`
/// bytes of it; the call stays open.
async fn stall(
    client: &mut SendRequest<Bytes>,
    port: u16,
    len: u32,
    sent: usize,
) -> (ResponseFuture, h2::SendStream<Bytes>) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1:{port}{SEND}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("request");
    *client = client.clone().ready().await.expect("stream slot");
    let (answer, mut body) = client.send_request(request, false).expect("send request");
    let mut data = vec![0u8];
    data.extend_from_slice(&len.to_be_bytes());
    data.resize(5 + sent, 0x0a);
    body.send_data(Bytes::from(data), false).expect("prefix");
    (answer, body)
}

#[test]
fn bare_announcements_do_not_take_the_shared_budget_from_other_clients() {
    // The stalled calls must outlive the whole test: only the byte accounting is tested.
    let mut b = start("600000");
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        // Two connections announce a connection's whole budget each (the broker's
        // whole total together) and send nothing more.
        let mut held = Vec::new();
        let mut connections = Vec::new();
        for _ in 0..2 {
            let mut c = h2_connect_from(port, ATTACKER).await;
            held.push(stall(&mut c, port, MESSAGE, 0).await);
            connections.push(c);
        }
        // They are admitted and wait for their bytes (the bodies stay open)...
        let (answer, body) = held.pop().expect("held");
        assert_eq!(grpc_status(answer, Duration::from_millis(500)).await, None);
        // ...and the victim's sends go on.
        victim_is_served(&mut b.broker).await;
        drop((held, body, connections));
    });
}

#[test]
fn a_message_whose_bytes_stop_coming_ends_its_call_and_frees_the_budget() {
    let mut b = start("2000");
    runtime().block_on(async {
        let (port, http) = (b.broker.grpc_port, b.broker.http_port);
        // Two connections send all but the last bytes of a connection-sized message
        // each (the broker's whole total together), then stall.
        let mut held = Vec::new();
        let mut connections = Vec::new();
        for _ in 0..2 {
            let mut c = h2_connect_from(port, ATTACKER).await;
            held.push(stall(&mut c, port, MESSAGE, MESSAGE as usize - 8).await);
            connections.push(c);
        }
        // Their calls end once grpcRequestMessageTimeoutMillis has passed without the
        // rest, so their bytes go back to the broker's budget.
        let mut bodies = Vec::new();
        for (answer, body) in held {
            bodies.push(body);
            assert_eq!(
                grpc_status(answer, Duration::from_secs(15)).await,
                Some(DEADLINE_EXCEEDED),
                "a stalled message kept its call (and the bytes it holds) open"
            );
        }
        assert!(refusals(http, "grpcRequestMessageTimeoutMillis").await >= 2.0);
        victim_is_served(&mut b.broker).await;
        drop((bodies, connections));
    });
}

/// A 5.x session is opened by any call under a new `x-mq-client-id`, and the id is the
/// caller's to choose. Sessions are capped by `grpcMaxConnections`, and one that never
/// joins a group used to live until the broker stopped: one attacker naming a few
/// thousand made-up ids (one connection, one cheap Heartbeat each) locked every new 5.x
/// client out for good. One source now opens at most `grpcMaxConnectionsPerIp` sessions,
/// and a session without a Telemetry stream that goes unused for
/// `channelExpiredTimeout` is dropped when a new client needs its place.
#[test]
fn made_up_client_ids_do_not_lock_other_5x_clients_out() {
    use grpc_api::v2::messaging_service_client::MessagingServiceClient;
    use grpc_api::v2::{Code, HeartbeatRequest};

    const CAP: usize = 30;
    const PER_IP: usize = 20;
    let mut b = TempBroker::start(
        None,
        &[
            ("grpcMaxConnections", &CAP.to_string()),
            ("grpcMaxConnectionsPerIp", &PER_IP.to_string()),
            ("channelExpiredTimeout", "3000"),
        ],
    );
    runtime().block_on(async {
        let (port, http) = (b.broker.grpc_port, b.broker.http_port);
        let channel = |local: IpAddr| async move {
            tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
                .expect("endpoint")
                .local_address(Some(local))
                .connect()
                .await
                .expect("connect to the gRPC port")
        };
        let heartbeat = |client_id: String| {
            let mut r = tonic::Request::new(HeartbeatRequest::default());
            r.metadata_mut()
                .insert("x-mq-client-id", client_id.parse().expect("ascii"));
            r
        };
        // One source names made-up ids, one Heartbeat each, on one connection: past
        // its share they are refused.
        let mut attacker = MessagingServiceClient::new(channel(ATTACKER).await);
        let mut opened = 0;
        for i in 0..CAP {
            match attacker.heartbeat(heartbeat(format!("fake@{i}"))).await {
                Ok(_) => opened += 1,
                Err(e) => assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}"),
            }
        }
        assert_eq!(
            opened, PER_IP,
            "one source opened more sessions than its share"
        );
        assert!(refusals(http, "grpcMaxConnectionsPerIp").await >= 1.0);

        // A second source takes the rest: the broker's sessions are all taken.
        let other = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
        let mut second = MessagingServiceClient::new(channel(other).await);
        for i in 0..CAP - PER_IP {
            second
                .heartbeat(heartbeat(format!("other@{i}")))
                .await
                .expect("within the broker's cap");
        }
        // A new 5.x client gets in once those sessions have gone unused for
        // channelExpiredTimeout (none has a Telemetry stream).
        let victim = MessagingServiceClient::new(channel(IpAddr::V4(Ipv4Addr::LOCALHOST)).await);
        eventually(
            Duration::from_secs(20),
            "a new 5.x client to be admitted",
            || {
                let mut victim = victim.clone();
                let call = heartbeat("victim@5x".to_owned());
                async move {
                    victim.heartbeat(call).await.is_ok_and(|r| {
                        r.into_inner()
                            .status
                            .is_some_and(|s| s.code == Code::Ok as i32)
                    })
                }
            },
        )
        .await;
        victim_is_served(&mut b.broker).await;
    });
}

/// Timestamps are the client's to write: a born or delivery time at the ends of the
/// protobuf range overflowed the conversion to milliseconds (a panic that reset the call
/// in a debug build, a silently wrapped time in a release build).
#[test]
fn timestamps_at_the_ends_of_their_range_are_answered() {
    use grpc_api::v2::messaging_service_client::MessagingServiceClient;
    use grpc_api::v2::{Code, Message, Resource, SendMessageRequest, SystemProperties};

    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .expect("endpoint")
            .local_address(Some(ATTACKER))
            .connect()
            .await
            .expect("connect to the gRPC port");
        let mut client = MessagingServiceClient::new(channel);
        let message = |id: &str, born, delivery| Message {
            topic: Some(Resource {
                resource_namespace: String::new(),
                name: "GrpcTimestamps".into(),
            }),
            user_properties: Default::default(),
            system_properties: Some(SystemProperties {
                message_id: id.into(),
                born_timestamp: born,
                delivery_timestamp: delivery,
                ..Default::default()
            }),
            body: b"t".to_vec(),
        };
        let at = |seconds, nanos| Some(prost_types::Timestamp { seconds, nanos });
        for m in [
            message("born-max", at(i64::MAX, 999_999_999), None),
            message("born-min", at(i64::MIN, -999_999_999), None),
            message("due-long-ago", None, at(i64::MIN, -999_999_999)),
        ] {
            let id = m.system_properties.as_ref().unwrap().message_id.clone();
            let mut r = tonic::Request::new(SendMessageRequest { messages: vec![m] });
            r.metadata_mut()
                .insert("x-mq-client-id", "ts@attacker".parse().expect("ascii"));
            let answer = client
                .send_message(r)
                .await
                .unwrap_or_else(|e| panic!("{id}: the call was not answered: {e:?}"))
                .into_inner();
            assert_eq!(
                answer.status.map(|s| s.code),
                Some(Code::Ok as i32),
                "{id}: {:?}",
                answer.entries
            );
        }
        victim_is_served(&mut b.broker).await;
    });
}

/// One SendMessage naming a new topic per message auto-created every one of them in a
/// single call, past `maxAutoCreatePerRequest`. A batch is one topic's (as the 5.x clients
/// build it, and as a 4.x batch is): a mixed one is refused whole, and nothing is created.
#[test]
fn one_send_message_cannot_create_a_topic_per_message() {
    use grpc_api::v2::messaging_service_client::MessagingServiceClient;
    use grpc_api::v2::{Code, Message, Resource, SendMessageRequest, SystemProperties};
    use protocol::RemotingCommand;
    use protocol::body::TopicConfigSerializeWrapper;
    use protocol::code::{request, response};

    let mut b = TempBroker::start(None, &[("maxAutoCreatePerRequest", "2")]);
    runtime().block_on(async {
        let port = b.broker.grpc_port;
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect to the gRPC port");
        let messages = (0..16)
            .map(|i| Message {
                topic: Some(Resource {
                    resource_namespace: String::new(),
                    name: format!("Minted_{i:02}"),
                }),
                user_properties: Default::default(),
                system_properties: Some(SystemProperties {
                    message_id: format!("minted-{i}"),
                    ..Default::default()
                }),
                body: b"m".to_vec(),
            })
            .collect();
        let mut r = tonic::Request::new(SendMessageRequest { messages });
        r.metadata_mut()
            .insert("x-mq-client-id", "minter@attacker".parse().expect("ascii"));
        let answer = MessagingServiceClient::new(channel)
            .send_message(r)
            .await
            .expect("answered")
            .into_inner();
        let status = answer.status.expect("a status");
        assert_eq!(status.code, Code::BadRequest as i32, "{status:?}");
        assert!(status.message.contains("one topic"), "{status:?}");

        let c = e2e::Client::connect(b.broker.port).await.expect("connect");
        let r = c
            .request(RemotingCommand::bare_request(request::GET_ALL_TOPIC_CONFIG))
            .await
            .expect("topic configs");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let all: TopicConfigSerializeWrapper = protocol::body::decode(&r.body).expect("decode");
        let minted: Vec<_> = all
            .topic_config_table
            .keys()
            .filter(|t| t.starts_with("Minted_"))
            .collect();
        assert!(minted.is_empty(), "created {minted:?}");
        victim_is_served(&mut b.broker).await;
    });
}

/// A 5.x consumer that receives and never reads its answers (HTTP/2 window 0) had the
/// broker hold every message it popped, call after call: the answers were charged to
/// nothing and waited for a window that never opened. They are now charged to
/// `maxInFlightBytesPerConnection` and `maxInFlightBytesTotal` (a receive over them is
/// refused), and an answer left unread for `writeTimeoutMillis` is dropped.
#[test]
fn unread_receive_answers_are_bounded_and_dropped() {
    use grpc_api::v2::messaging_service_client::MessagingServiceClient;
    use grpc_api::v2::{MessageQueue, ReceiveMessageRequest, Resource};
    use protocol::code::response;

    const MIB: usize = 1024 * 1024;
    let mut b = TempBroker::start(
        None,
        &[
            ("maxInFlightBytesPerConnection", &(8 * MIB).to_string()),
            ("maxInFlightBytesTotal", &(8 * MIB).to_string()),
            ("writeTimeoutMillis", "2000"),
        ],
    );
    runtime().block_on(async {
        let (port, http) = (b.broker.grpc_port, b.broker.http_port);
        let producer = e2e::Client::connect(b.broker.port).await.expect("connect");
        let body = vec![b'x'; MIB];
        for _ in 0..48 {
            let r = producer
                .request(e2e::broker_harness::send_v2("GrpcUnread", -1, &body, ""))
                .await
                .expect("send");
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .expect("endpoint")
            .local_address(Some(ATTACKER))
            .initial_stream_window_size(Some(0))
            .connect()
            .await
            .expect("connect to the gRPC port");
        let mut attacker = MessagingServiceClient::new(channel);
        let res = |n: &str| {
            Some(Resource {
                resource_namespace: String::new(),
                name: n.into(),
            })
        };
        let rss_before = b.broker.anon_rss_kib();
        // Eight receives whose answers are never read.
        let mut unread = Vec::new();
        for _ in 0..8 {
            let mut r = tonic::Request::new(ReceiveMessageRequest {
                group: res("GUnread"),
                message_queue: Some(MessageQueue {
                    topic: res("GrpcUnread"),
                    id: -1,
                    ..Default::default()
                }),
                batch_size: 32,
                invisible_duration: Some(prost_types::Duration {
                    seconds: 300,
                    nanos: 0,
                }),
                ..Default::default()
            });
            r.metadata_mut()
                .insert("x-mq-client-id", "unread@attacker".parse().expect("ascii"));
            // Over the budget, the call itself may be refused before it is read.
            match attacker.receive_message(r).await {
                Ok(answer) => unread.push(answer.into_inner()),
                Err(e) => assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}"),
            }
        }
        let rss_after = b.broker.anon_rss_kib();
        // Receives past the connection's budget were refused: the broker holds about
        // the budget, not every message the calls could pop.
        assert!(refusals(http, "maxInFlightBytesPerConnection").await >= 1.0);
        let in_flight = crate::common::metric(http, "rocketmq_pop_in_flight").await;
        assert!(
            in_flight <= 16.0,
            "{in_flight} messages popped into unread answers (RSS {rss_before:?} -> {rss_after:?} KiB)"
        );
        // Unread for writeTimeoutMillis, the answers are dropped and their bytes freed:
        // the victim's sends (refused meanwhile, the broker's total being held) go on.
        eventually(
            Duration::from_secs(15),
            "the unread answers to be dropped",
            || async { refusals(http, "writeTimeoutMillis").await >= 1.0 },
        )
        .await;
        let victim = e2e::Client::connect(b.broker.port).await.expect("connect");
        eventually(Duration::from_secs(10), "the victim's send", || async {
            victim
                .request(e2e::broker_harness::send_v2("VictimTopic", 0, b"v", ""))
                .await
                .is_ok_and(|r| r.code == response::SUCCESS)
        })
        .await;
        victim_is_served(&mut b.broker).await;
        drop(unread);
    });
}

/// Rapid reset (HEADERS, then RST_STREAM at once, over and over) on long polls: each
/// stream opens a ReceiveMessage that would park for 20 s and is reset at once. hyper
/// drops a reset call's future (and answers a burst of resets with GOAWAY), so nothing
/// a reset poll parked may stay behind: only the one poll not reset stays parked, and
/// memory stays flat.
#[test]
fn rapidly_reset_long_polls_leave_nothing_parked() {
    use protocol::code::response;

    const ROUNDS: usize = 3000;
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let (port, http) = (b.broker.grpc_port, b.broker.http_port);
        let producer = e2e::Client::connect(b.broker.port).await.expect("connect");
        let r = producer
            .request(e2e::broker_harness::send_v2("GrpcReset", 0, b"m", ""))
            .await
            .expect("send");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        // ReceiveMessageRequest { group: "GR", message_queue: { topic: "GrpcReset",
        // id: 1 (an empty queue) }, batch_size: 1, long_polling_timeout: 20 s }, encoded
        // by hand.
        let resource = |name: &str| {
            let mut r = vec![0x12, name.len() as u8];
            r.extend_from_slice(name.as_bytes());
            r
        };
        let field = |tag: u8, bytes: Vec<u8>| {
            let mut f = vec![tag, bytes.len() as u8];
            f.extend(bytes);
            f
        };
        let mut queue = field(0x0a, resource("GrpcReset"));
        queue.extend([0x10, 1]);
        let mut message = field(0x0a, resource("GR"));
        message.extend(field(0x12, queue));
        message.extend([0x20, 1]);
        message.extend(field(0x3a, vec![0x08, 20]));
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend(message);
        let framed = Bytes::from(framed);

        let request = || {
            http::Request::builder()
                .method("POST")
                .uri(format!(
                    "http://127.0.0.1:{port}/apache.rocketmq.v2.MessagingService/ReceiveMessage"
                ))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("x-mq-client-id", "reset@attacker")
                .body(())
                .expect("request")
        };
        // One poll that is not reset, on a connection of its own: it parks, so the
        // resets are measured against it.
        let kept = h2_connect_from(port, ATTACKER).await;
        let mut kept = kept.ready().await.expect("ready");
        let (_kept, mut kept_body) = kept.send_request(request(), false).expect("send");
        kept_body.send_data(framed.clone(), true).expect("data");
        eventually(Duration::from_secs(10), "the kept poll to park", || async {
            crate::common::metric(http, "rocketmq_pop_parked").await >= 1.0
        })
        .await;
        let rss_before = b.broker.anon_rss_kib().expect("rss");
        // hyper answers a burst of resets with GOAWAY; the attacker reconnects.
        let (mut sent, mut connections) = (0, 0);
        while sent < ROUNDS {
            let mut client = h2_connect_from(port, ATTACKER).await;
            connections += 1;
            while sent < ROUNDS {
                let Ok(ready) = client.clone().ready().await else {
                    break;
                };
                client = ready;
                let Ok((_answer, mut body)) = client.send_request(request(), false) else {
                    break;
                };
                let _ = body.send_data(framed.clone(), true);
                body.send_reset(h2::Reason::CANCEL);
                sent += 1;
            }
        }
        // Every reset poll is gone: only the kept one stays parked.
        eventually(
            Duration::from_secs(20),
            "the reset polls to unpark",
            || async { crate::common::metric(http, "rocketmq_pop_parked").await <= 1.0 },
        )
        .await;
        let rss_after = b.broker.anon_rss_kib().expect("rss");
        assert!(
            rss_after < rss_before + 32 * 1024,
            "{ROUNDS} reset long polls grew the broker from {rss_before} to {rss_after} KiB"
        );
        eprintln!(
            "rapid reset: {sent} streams on {connections} connections, \
             anon RSS {rss_before} -> {rss_after} KiB"
        );
        victim_is_served(&mut b.broker).await;
        drop(kept_body);
    });
}
