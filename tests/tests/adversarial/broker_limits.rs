//! Resource bounds against the real broker process: a client, broken or hostile, cannot
//! exhaust what other clients need. Each test shows the limit holds and the
//! metric that says it bit.

use std::time::Duration;

use bytes::BytesMut;
use e2e::Client;
use e2e::broker_harness::create_topic_request as create_topic;
use e2e::broker_harness::{TempBroker, properties, pull, send_v2, with_fields};
use e2e::http;
use e2e::wait::{eventually, runtime};
use futures::StreamExt;
use protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, LockBatchRequestBody,
    LockBatchResponseBody, MessageModel, MessageQueue,
};
use protocol::code::{request, response};
use protocol::{RemotingCodec, RemotingCommand};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_util::codec::{Encoder, FramedRead};

/// The frames of `requests`, opaques 1.., back to back.
fn frames(requests: Vec<RemotingCommand>) -> BytesMut {
    let mut codec = RemotingCodec::default();
    let mut out = BytesMut::new();
    for (i, mut r) in requests.into_iter().enumerate() {
        r.opaque = i as i32 + 1;
        codec.encode(r, &mut out).expect("encode");
    }
    out
}

/// The value of the first sample of `name` (with the given label text, if any).
async fn metric(http_port: u16, series: &str) -> Option<f64> {
    let (_, body) = http::get(http_port, "/metrics").await.ok()?;
    body.lines()
        .find(|l| {
            l.strip_prefix(series)
                .is_some_and(|rest| rest.starts_with(' '))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn heartbeat(client_id: &str, groups: impl IntoIterator<Item = String>) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        producer_data_set: Vec::new(),
        consumer_data_set: groups
            .into_iter()
            .map(|group_name| ConsumerData {
                group_name,
                consume_type: ConsumeType::ConsumePassively,
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                subscription_data_set: Vec::new(),
                unit_mode: false,
            })
            .collect(),
    };
    RemotingCommand::bare_request(request::HEART_BEAT).with_body(protocol::body::encode(&data))
}

fn lock(client_id: &str, group: &str, topic: &str, queue_id: i32) -> RemotingCommand {
    let body = LockBatchRequestBody {
        consumer_group: group.to_owned(),
        client_id: client_id.to_owned(),
        only_this_broker: false,
        mq_set: [MessageQueue {
            topic: topic.into(),
            broker_name: "broker-e2e".into(),
            queue_id,
        }]
        .into_iter()
        .collect(),
    };
    RemotingCommand::bare_request(request::LOCK_BATCH_MQ).with_body(protocol::body::encode(&body))
}

async fn locked(c: &Client, request: RemotingCommand) -> bool {
    let r = c.request(request).await.expect("lock request");
    assert_eq!(r.code, response::SUCCESS);
    let body: LockBatchResponseBody = protocol::body::decode(&r.body).expect("lock body");
    !body.lock_ok_mq_set.is_empty()
}

/// 1,000 parked pulls from one client hold no in-flight permits, so another
/// client's sends and heartbeats go through even with `maxInFlightTotal=64`; closing the
/// parking client frees every parked pull at once.
#[test]
fn parked_pulls_do_not_starve_sends_or_heartbeats() {
    let b = TempBroker::start(None, &[("maxInFlightTotal", "64")]);
    runtime().block_on(async {
        let other = Client::connect(b.broker.port).await.unwrap();
        let r = other.request(create_topic("Parked", 1)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        // A filter no message matches and a huge hold: these pulls park until closed.
        let pulls: Vec<_> = (0..1000)
            .map(|_| pull("G_PARK", "Parked", 0, 0, 32, Some(3_600_000), "never"))
            .collect();
        let mut parker = TcpStream::connect(("127.0.0.1", b.broker.port))
            .await
            .unwrap();
        parker.write_all(&frames(pulls)).await.unwrap();
        eventually(Duration::from_secs(20), "1000 parked pulls", || async {
            metric(b.broker.http_port, "rocketmq_broker_parked_pulls").await == Some(1000.0)
        })
        .await;

        let r = other
            .request(send_v2(
                "Parked",
                0,
                b"m",
                &properties(&[("TAGS", "other")]),
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "send: {:?}", r.remark);
        let r = other
            .request(heartbeat("other@1", ["G_OTHER".to_owned()]))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "heartbeat: {:?}", r.remark);
        // The parked pulls stayed parked (none was answered busy).
        let mut buf = [0u8; 1];
        assert!(
            tokio::time::timeout(Duration::from_millis(200), parker.read(&mut buf))
                .await
                .is_err(),
            "a parked pull was answered"
        );

        drop(parker);
        eventually(Duration::from_secs(10), "parked pulls freed", || async {
            metric(b.broker.http_port, "rocketmq_broker_parked_pulls").await == Some(0.0)
        })
        .await;
    });
}

/// The hold is capped at `maxSuspendTimeoutMillis` whatever the client asks.
#[test]
fn pull_hold_is_capped() {
    let b = TempBroker::start(None, &[("maxSuspendTimeoutMillis", "300")]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        assert_eq!(
            c.request(create_topic("Held", 1)).await.unwrap().code,
            response::SUCCESS
        );
        // The client waits 10 s at most; an uncapped hold of an hour would time out.
        let r = c
            .request(pull("G_HOLD", "Held", 0, 0, 32, Some(3_600_000), "*"))
            .await
            .expect("answered within the cap");
        assert_eq!(r.code, response::PULL_NOT_FOUND);
    });
}

/// Defects 4: a peer that stops reading is disconnected within the write deadline, and
/// its orderly-consumption locks are released for the next consumer.
#[test]
fn peer_that_stops_reading_is_disconnected_and_its_locks_released() {
    let b = TempBroker::start(
        None,
        &[
            ("writeTimeoutMillis", "1000"),
            ("maxMessageSize", "2097152"),
        ],
    );
    runtime().block_on(async {
        let admin = Client::connect(b.broker.port).await.unwrap();
        assert_eq!(
            admin.request(create_topic("Big", 1)).await.unwrap().code,
            response::SUCCESS
        );
        let body = vec![7u8; 1 << 20];
        for _ in 0..4 {
            let r = admin.request(send_v2("Big", 0, &body, "")).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }

        // The stuck consumer: joins the group, locks queue 0, then asks for megabytes of
        // pulls through a tiny receive window it never drains.
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stuck = socket
            .connect(([127, 0, 0, 1], b.broker.port).into())
            .await
            .unwrap();
        // One at a time: requests of one connection may be served concurrently, and the
        // lock must come after the heartbeat that joins the group. One reader for both, so
        // that no byte it buffered is lost between them.
        let mut reader = FramedRead::new(&mut stuck, RemotingCodec::default());
        for request in [
            heartbeat("stuck@1", ["G_ORDER".to_owned()]),
            lock("stuck@1", "G_ORDER", "Big", 0),
        ] {
            reader
                .get_mut()
                .write_all(&frames(vec![request]))
                .await
                .unwrap();
            // The broker may first send NOTIFY_CONSUMER_IDS_CHANGED (a request of its own:
            // 4.9 notifies every member of a group that changed, the new one included).
            let mut answer = reader.next().await;
            while answer
                .as_ref()
                .is_some_and(|a| a.as_ref().is_ok_and(|a| !a.is_response()))
            {
                answer = reader.next().await;
            }
            assert!(
                answer
                    .as_ref()
                    .is_some_and(|a| a.as_ref().is_ok_and(|a| a.code == response::SUCCESS)),
                "{answer:?}"
            );
        }
        // From here on nothing reads from the stuck connection.
        drop(reader);
        let pulls = (0..64)
            .map(|i| pull("G_ORDER", "Big", 0, i % 4, 1, None, "*"))
            .collect();
        stuck.write_all(&frames(pulls)).await.unwrap();

        let next = Client::connect(b.broker.port).await.unwrap();
        let r = next
            .request(heartbeat("next@1", ["G_ORDER".to_owned()]))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert!(
            !locked(&next, lock("next@1", "G_ORDER", "Big", 0)).await,
            "held by the stuck consumer"
        );
        // Free once the write deadline closed the stuck connection (the lock itself would
        // expire only after 60 s).
        eventually(
            Duration::from_secs(15),
            "lock freed by the stuck peer",
            || async { locked(&next, lock("next@1", "G_ORDER", "Big", 0)).await },
        )
        .await;
        // The broker closed the stuck connection: draining what it had buffered ends in
        // EOF or a reset. Either the write deadline closed it (counted in
        // `rocketmq_broker_write_timeouts_total`) or, first, the kernel's
        // TCP_USER_TIMEOUT, which the broker sets to the same `writeTimeoutMillis`.
        let mut sink = vec![0u8; 1 << 16];
        let drained = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match stuck.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(drained.is_ok(), "the stuck connection was never closed");
    });
}

/// Over `maxConnections` / `maxConnectionsPerIp` a peer is closed at once,
/// everyone admitted keeps working, and a freed slot admits again.
#[test]
fn connection_caps_close_over_limit_peers() {
    let b = TempBroker::start(
        None,
        &[("maxConnections", "4"), ("maxConnectionsPerIp", "3")],
    );
    let port = b.broker.port;
    runtime().block_on(async {
        let closed_at_once = |from: [u8; 4]| async move {
            let socket = TcpSocket::new_v4().unwrap();
            socket.bind((from, 0).into()).unwrap();
            let mut s = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
            let mut buf = [0u8; 1];
            matches!(
                tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await,
                Ok(Ok(0)) | Ok(Err(_))
            )
        };
        let mut admitted = Vec::new();
        for _ in 0..3 {
            admitted.push(Client::connect(b.broker.port).await.unwrap());
        }
        // Admission happens on the accept loop: make sure all three are counted.
        for c in &admitted {
            let r = c.request(heartbeat("cap@1", [])).await.unwrap();
            assert_eq!(r.code, response::SUCCESS);
        }
        assert!(closed_at_once([127, 0, 0, 1]).await, "per-IP cap");
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, 2], 0).into()).unwrap();
        let fourth = socket
            .connect(([127, 0, 0, 1], b.broker.port).into())
            .await
            .unwrap();
        assert!(closed_at_once([127, 0, 0, 3]).await, "global cap");
        let refused = metric(
            b.broker.http_port,
            "rocketmq_listener_connections_refused_total{listener=\"remoting\"}",
        )
        .await;
        assert_eq!(refused, Some(2.0));
        for c in &admitted {
            let r = c.request(heartbeat("cap@1", [])).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "admitted clients keep working");
        }
        drop(fourth);
        admitted.pop().unwrap().close().await;
        // The two closed peers' slots come back once the broker has seen them go.
        let open = "rocketmq_listener_connections{listener=\"remoting\"}";
        eventually(
            Duration::from_secs(30),
            "the gauge to drop to 2",
            || async { metric(b.broker.http_port, open).await == Some(2.0) },
        )
        .await;
        let c = Client::connect(b.broker.port).await.unwrap();
        let r = c.request(heartbeat("cap@2", [])).await;
        assert!(
            r.is_ok(),
            "a freed slot admits a new peer: {r:?}; open {:?}, refused {:?}",
            metric(b.broker.http_port, open).await,
            metric(
                b.broker.http_port,
                "rocketmq_listener_connections_refused_total{listener=\"remoting\"}"
            )
            .await,
        );
    });
}

/// Defects 4 and 5 on the HTTP port: peers that connect and say nothing take every
/// capped slot, then are closed after `httpIdleTimeoutMillis`, so probes and scrapes get
/// through again and the closes are counted.
#[test]
fn idle_http_peers_cannot_hold_the_metrics_port() {
    let b = TempBroker::start(
        None,
        &[
            ("httpMaxConnections", "2"),
            ("httpIdleTimeoutMillis", "500"),
        ],
    );
    let http_port = b.broker.http_port;
    runtime().block_on(async {
        let mut silent = Vec::new();
        for _ in 0..2 {
            silent.push(TcpStream::connect(("127.0.0.1", http_port)).await.unwrap());
        }
        // Both slots are held: a third peer is closed at accept and gets no answer.
        let mut third = TcpStream::connect(("127.0.0.1", http_port)).await.unwrap();
        third
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .ok();
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf))
            .await
            .expect("closed, not left hanging")
            .unwrap_or(0);
        assert_eq!(n, 0, "over the cap: closed without an answer");
        // The silent peers are dropped by the idle deadline; the port serves again.
        for s in &mut silent {
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
                .await
                .expect("idle peer closed by the server")
                .unwrap_or(0);
            assert_eq!(n, 0);
        }
        let closed = metric(http_port, "rocketmq_broker_http_idle_closed_total").await;
        assert_eq!(closed, Some(2.0));
    });
}

/// A heartbeat naming 10,000 groups is refused before it creates anything; one
/// naming many new valid groups creates at most `maxAutoCreatePerRequest`; bad names
/// are refused; other clients are unaffected throughout.
#[test]
fn heartbeat_group_bounds() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let hostile = Client::connect(b.broker.port).await.unwrap();
        let other = Client::connect(b.broker.port).await.unwrap();
        let groups_now = || async {
            let r = other
                .request(with_fields(request::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, &[]))
                .await
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            v["subscriptionGroupTable"]
                .as_object()
                .map_or(0, |m| m.len())
        };
        let before = groups_now().await;

        let r = hostile
            .request(heartbeat("h@1", (0..10_000).map(|i| format!("G{i}"))))
            .await
            .unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert!(r.remark.unwrap_or_default().contains("maxHeartbeatGroups"));
        assert_eq!(
            groups_now().await,
            before,
            "a refused heartbeat created nothing"
        );

        let r = hostile
            .request(heartbeat("h@1", ["bad group!".to_owned()]))
            .await
            .unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert!(r.remark.unwrap_or_default().contains("illegal characters"));

        let r = hostile
            .request(heartbeat("h@1", (0..1000).map(|i| format!("N{i}"))))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(groups_now().await, before + 64, "maxAutoCreatePerRequest");
        let deferred = metric(
            b.broker.http_port,
            "rocketmq_broker_auto_create_deferred_total",
        )
        .await;
        assert_eq!(deferred, Some(936.0));

        let r = other
            .request(heartbeat("o@1", ["G_FINE".to_owned()]))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let r = other.request(send_v2("Fine", -1, b"x", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    });
}

/// Topics created concurrently from many connections all survive a kill -9
/// (each was persisted before its answer, and no persist overwrote another's).
#[test]
fn concurrent_topic_creations_all_survive_a_crash() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let mut tasks = Vec::new();
        for conn in 0..8 {
            let port = b.broker.port;
            tasks.push(tokio::spawn(async move {
                let c = Client::connect(port).await.unwrap();
                let creates = (0..25)
                    .map(|i| create_topic(&format!("C{conn}_{i}"), 1))
                    .collect();
                for r in c.pipeline(creates).await.unwrap() {
                    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    b.broker.kill9();
    b.broker.restart();
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        let r = c
            .request(with_fields(request::GET_ALL_TOPIC_CONFIG, &[]))
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let table = v["topicConfigTable"].as_object().expect("table");
        let missing: Vec<String> = (0..8)
            .flat_map(|c| (0..25).map(move |i| format!("C{c}_{i}")))
            .filter(|t| !table.contains_key(t))
            .collect();
        assert!(missing.is_empty(), "lost topics: {missing:?}");
    });
}

/// Queue counts are bounded (`maxQueueNums`).
#[test]
fn queue_counts_are_bounded() {
    let b = TempBroker::start(None, &[("maxQueueNums", "64")]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        for n in [i32::MAX, 65, 0, -1] {
            let r = c.request(create_topic("Q", n)).await.unwrap();
            assert_eq!(r.code, response::SYSTEM_ERROR, "{n} queues");
        }
        let r = c.request(create_topic("Q", 64)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
    });
}
