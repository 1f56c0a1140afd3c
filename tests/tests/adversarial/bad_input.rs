//! Bad input over real TCP: each gets RocketMQ's error answer or a closed connection,
//! and the broker keeps serving everyone else.

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, properties, send_v2, with_fields};
use e2e::wait::runtime;
use protocol::RemotingCommand;
use protocol::code::{request, response};
use tokio::io::AsyncWriteExt;

#[test]
fn oversized_unknown_topic_malformed_header_unknown_code() {
    let b = TempBroker::start(
        None,
        &[
            ("autoCreateTopicEnable", "false"),
            ("maxMessageSize", "1024"),
        ],
    );
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        // Auto-create is off: an unknown topic is TOPIC_NOT_EXIST.
        let r = c
            .request(send_v2("NoSuchTopic", 0, b"x", ""))
            .await
            .unwrap();
        assert_eq!(r.code, response::TOPIC_NOT_EXIST);
        assert_eq!(
            r.remark.as_deref(),
            Some("topic[NoSuchTopic] not exist, apply first please!")
        );

        // Create it through the admin request, then oversize is MESSAGE_ILLEGAL.
        let create = with_fields(
            request::UPDATE_AND_CREATE_TOPIC,
            &[
                ("topic", "Small".to_owned()),
                ("defaultTopic", "TBW102".to_owned()),
                ("readQueueNums", "2".to_owned()),
                ("writeQueueNums", "2".to_owned()),
                ("perm", "6".to_owned()),
                ("topicFilterType", "SINGLE_TAG".to_owned()),
                ("order", "false".to_owned()),
            ],
        );
        assert_eq!(c.request(create).await.unwrap().code, response::SUCCESS);
        let r = c
            .request(send_v2("Small", 0, &vec![7u8; 1025], ""))
            .await
            .unwrap();
        assert_eq!(r.code, response::MESSAGE_ILLEGAL);
        let r = c
            .request(send_v2(
                "Small",
                0,
                &vec![7u8; 1024],
                &properties(&[("TAGS", "ok")]),
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        // Queue id beyond the topic's queues, and an invalid topic name.
        let r = c.request(send_v2("Small", 5, b"x", "")).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert!(
            r.remark
                .unwrap_or_default()
                .contains("queueId[5] is illegal")
        );
        let r = c.request(send_v2("bad topic!", 0, b"x", "")).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert!(r.remark.unwrap_or_default().contains("illegal characters"));
        // Every failed send is counted by reason (what RocketMQSendsRejected alerts on).
        let (_, metrics) = e2e::http::get(b.broker.http_port, "/metrics")
            .await
            .unwrap();
        for series in [
            r#"rocketmq_broker_send_failed_total{reason="topic_not_exist"} 1"#,
            r#"rocketmq_broker_send_failed_total{reason="message_illegal"} 1"#,
            r#"rocketmq_broker_send_failed_total{reason="system_error"} 2"#,
        ] {
            assert!(metrics.contains(series), "{series} in\n{metrics}");
        }
        assert!(!metrics.contains(r#"reason="success""#));

        // Malformed headers: a missing required field and a non-numeric one, named.
        let mut missing = send_v2("Small", 0, b"x", "");
        missing.ext_fields.remove("b");
        let r = c.request(missing).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert_eq!(r.remark.as_deref(), Some("the custom field <b> is null"));
        let bad = with_fields(
            request::GET_MAX_OFFSET,
            &[
                ("topic", "Small".to_owned()),
                ("queueId", "zero".to_owned()),
            ],
        );
        let r = c.request(bad).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert!(r.remark.unwrap_or_default().contains("<queueId>"));
        // A body that is not JSON.
        let r = c
            .request(
                RemotingCommand::bare_request(request::HEART_BEAT).with_body(b"{nope".to_vec()),
            )
            .await
            .unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        // Unknown request code.
        let r = c
            .request(RemotingCommand::bare_request(9999))
            .await
            .unwrap();
        assert_eq!(r.code, response::REQUEST_CODE_NOT_SUPPORTED);
        assert_eq!(
            r.remark.as_deref(),
            Some(" request type 9999 not supported")
        );
        // Pull of a queue id out of range.
        let r = c
            .request(e2e::broker_harness::pull("G", "Small", 9, 0, 1, None, "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        // The connection is still usable after all of that.
        let r = c
            .request(send_v2("Small", 1, b"still-fine", ""))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
    });
}

/// A frame announcing more than `frameMaxLength` (16 MiB by default) is refused before
/// anything is allocated for it.
#[test]
fn absurd_frame_length_closes_only_that_connection() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let healthy = Client::connect(b.broker.port).await.unwrap();
        assert_eq!(
            healthy
                .request(send_v2("Fine", 0, b"a", ""))
                .await
                .unwrap()
                .code,
            response::SUCCESS
        );

        let mut raw = tokio::net::TcpStream::connect(("127.0.0.1", b.broker.port))
            .await
            .unwrap();
        // Announces a 2 GiB frame; the broker must not try to buffer it.
        raw.write_all(&0x7FFF_FFF0_i32.to_be_bytes()).await.unwrap();
        raw.write_all(&[0u8; 64]).await.unwrap();
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut raw, &mut buf),
        )
        .await
        .expect("broker closes the connection")
        .unwrap_or(0);
        assert_eq!(n, 0, "connection closed without an answer");

        // Garbage header on another connection: closed as well.
        let garbage = Client::connect(b.broker.port).await.unwrap();
        drop(garbage);
        let mut raw2 = tokio::net::TcpStream::connect(("127.0.0.1", b.broker.port))
            .await
            .unwrap();
        let mut frame = 12_i32.to_be_bytes().to_vec();
        frame.extend_from_slice(&8_i32.to_be_bytes());
        frame.extend_from_slice(b"notjson!");
        raw2.write_all(&frame).await.unwrap();
        let n = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut raw2, &mut buf),
        )
        .await
        .expect("broker closes the connection")
        .unwrap_or(0);
        assert_eq!(n, 0);

        // Everyone else is still served.
        assert_eq!(
            healthy
                .request(send_v2("Fine", 0, b"b", ""))
                .await
                .unwrap()
                .code,
            response::SUCCESS
        );
        let fresh = Client::connect(b.broker.port).await.unwrap();
        assert_eq!(
            fresh
                .request(send_v2("Fine", 0, b"c", ""))
                .await
                .unwrap()
                .code,
            response::SUCCESS
        );
    });
}

#[test]
fn parked_pulls_beyond_their_bound_get_system_busy_and_leave_the_in_flight_slots_free() {
    // Each connection may park 1 pull; parked pulls do not hold the in-flight slots that
    // other requests need, so a request behind them is still served.
    let b = TempBroker::start(
        None,
        &[
            ("maxInFlightPerConnection", "2"),
            ("maxParkedPullsPerConnection", "1"),
        ],
    );
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        assert_eq!(
            c.request(send_v2("Busy", 0, b"a", "")).await.unwrap().code,
            response::SUCCESS
        );
        // Pulls park only at the queue's end: wait until the first message is dispatched.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while c
            .request(e2e::broker_harness::pull("G", "Busy", 0, 0, 1, None, "*"))
            .await
            .unwrap()
            .code
            != response::SUCCESS
        {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let hold = || e2e::broker_harness::pull("G", "Busy", 0, 1, 1, Some(3_000), "*");
        let responses = c
            .pipeline(vec![
                hold(),
                hold(),
                RemotingCommand::bare_request(request::GET_BROKER_RUNTIME_INFO),
            ])
            .await
            .unwrap();
        assert_eq!(responses[1].code, response::SYSTEM_BUSY);
        assert!(
            responses[1]
                .remark
                .as_deref()
                .unwrap_or("")
                .starts_with("[OVERLOAD]")
        );
        assert_eq!(responses[2].code, response::SUCCESS);
        assert!(
            String::from_utf8_lossy(&responses[2].body)
                .contains("\"brokerVersionDesc\":\"V4_9_8\"")
        );
        assert_eq!(responses[0].code, response::PULL_NOT_FOUND);
    });
}
