//! Produce and consume through a real rmq-broker with our own remoting client: send
//! (single, batch), pull with tag filters, long polling, lookups by key and by id, and
//! the broker's registration showing up in the nameserver's routes.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use e2e::broker_harness::{
    TempBroker, decode_records, parked_pulls, properties, property, pull, send_v2, with_fields,
};
use e2e::metrics::wait_dispatched;
use e2e::nameserver::Options;
use e2e::wait::{eventually, eventually_ok, runtime};
use e2e::{Client, NameServer};
use protocol::RemotingCommand;
use protocol::code::{request, response};

#[test]
fn send_then_pull_round_trip_with_tags_keys_and_lookups() {
    let ns = NameServer::start(Options::default());
    let b = TempBroker::start(Some(ns.port), &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        let props_a = properties(&[
            ("TAGS", "TagA"),
            ("KEYS", "order-1 order-2"),
            ("UNIQ_KEY", "AC110001000000000000000000000001"),
            ("color", "blue"),
        ]);
        let r = c
            .request(send_v2("RoundTrip", 0, b"hello", &props_a))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let msg_id = r.ext_fields.get("msgId").unwrap().to_owned();
        assert_eq!(msg_id.len(), 32, "offset msgId for IPv4");
        assert_eq!(r.ext_fields.get("queueId"), Some("0"));
        assert_eq!(r.ext_fields.get("queueOffset"), Some("0"));
        assert_eq!(r.ext_fields.get("MSG_REGION"), Some("DefaultRegion"));
        assert_eq!(r.ext_fields.get("TRACE_ON"), Some("true"));
        let binary: Vec<u8> = (0..=255u8).collect();
        let props_b = properties(&[("TAGS", "TagB")]);
        let r = c
            .request(send_v2("RoundTrip", 0, &binary, &props_b))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(r.ext_fields.get("queueOffset"), Some("1"));

        // Dispatch is asynchronous: wait until both are in the ConsumeQueue and the index.
        wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        let all = c
            .request(pull("G1", "RoundTrip", 0, 0, 32, None, "*"))
            .await
            .unwrap();
        assert_eq!(all.code, response::SUCCESS, "{:?}", all.remark);
        assert_eq!(decode_records(&all.body).len(), 2);
        assert_eq!(all.ext_fields.get("nextBeginOffset"), Some("2"));
        assert_eq!(all.ext_fields.get("minOffset"), Some("0"));
        assert_eq!(all.ext_fields.get("maxOffset"), Some("2"));
        assert_eq!(all.ext_fields.get("suggestWhichBrokerId"), Some("0"));
        let msgs = decode_records(&all.body);
        assert_eq!(msgs[0].body, b"hello");
        assert_eq!(msgs[1].body, binary);
        assert_eq!(
            property(&msgs[0].properties, "KEYS"),
            Some("order-1 order-2")
        );
        assert_eq!(property(&msgs[0].properties, "color"), Some("blue"));
        assert_eq!(
            property(&msgs[0].properties, "CLUSTER"),
            Some("TestCluster")
        );
        assert_eq!(
            property(&msgs[0].properties, "WAIT"),
            None,
            "WAIT is not stored"
        );

        // Tag filtering: only TagB; the next offset still covers both scanned units.
        let r = c
            .request(pull("G1", "RoundTrip", 0, 0, 32, None, "TagB || TagC"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let only_b = decode_records(&r.body);
        assert_eq!(only_b.len(), 1);
        assert_eq!(only_b[0].queue_offset, 1);
        // Nothing matches: PULL_RETRY_IMMEDIATELY with next offset past the scan.
        let r = c
            .request(pull("G1", "RoundTrip", 0, 0, 32, None, "TagZ"))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_RETRY_IMMEDIATELY);
        assert_eq!(r.ext_fields.get("nextBeginOffset"), Some("2"));
        // At the end: PULL_NOT_FOUND; far beyond: PULL_OFFSET_MOVED back to 0.
        let r = c
            .request(pull("G1", "RoundTrip", 0, 2, 32, None, "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_NOT_FOUND);
        let r = c
            .request(pull("G1", "RoundTrip", 0, 50, 32, None, "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_OFFSET_MOVED);
        // SQL92 gets a clear refusal.
        let mut sql = pull("G1", "RoundTrip", 0, 0, 32, None, "a > 1");
        sql.ext_fields.insert("expressionType", "SQL92");
        let r = c.request(sql).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert!(r.remark.unwrap_or_default().contains("SQL92"));

        // VIEW_MESSAGE_BY_ID with the physical offset of the first record.
        let view = with_fields(
            request::VIEW_MESSAGE_BY_ID,
            &[("offset", msgs[0].physical_offset.to_string())],
        );
        let r = c.request(view).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(decode_records(&r.body)[0].body, b"hello");
        // QUERY_MESSAGE by business key (indexed by the dispatch waited for above).
        let query = with_fields(
            request::QUERY_MESSAGE,
            &[
                ("topic", "RoundTrip".to_owned()),
                ("key", "order-2".to_owned()),
                ("maxNum", "32".to_owned()),
                ("beginTimestamp", "0".to_owned()),
                ("endTimestamp", i64::MAX.to_string()),
            ],
        );
        let r = c.request(query).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "key indexed: {:?}", r.remark);
        let found = decode_records(&r.body);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].body, b"hello");

        // The auto-created topic reached the nameserver (re-registration on change).
        let ns_client = Client::connect(ns.port).await.unwrap();
        let text = eventually_ok(Duration::from_secs(10), "the route registered", || async {
            let route = with_fields(
                request::GET_ROUTEINFO_BY_TOPIC,
                &[("topic", "RoundTrip".to_owned())],
            );
            let r = ns_client.request(route).await.unwrap();
            if r.code == response::SUCCESS {
                Ok(String::from_utf8_lossy(&r.body).into_owned())
            } else {
                Err(format!("{} {:?}", r.code, r.remark))
            }
        })
        .await;
        assert!(text.contains(&b.broker.addr()), "{text}");
        assert!(text.contains("\"writeQueueNums\":4"), "{text}");
    });
}

#[test]
fn batch_send_stores_every_message() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        let mut body = Vec::new();
        for i in 0..3 {
            let props = properties(&[("TAGS", "T"), ("UNIQ_KEY", &format!("ID{i}"))]);
            let text = format!("m{i}");
            let entry = protocol::message::batch::BatchEntry {
                flag: i,
                body: text.as_bytes(),
                properties: &props,
            };
            entry.encode_to(&mut body).unwrap();
        }
        let mut cmd = send_v2("BatchTopic", 1, &body, &properties(&[("WAIT", "true")]));
        cmd.code = request::SEND_BATCH_MESSAGE;
        cmd.ext_fields.insert("m", "true");
        let r = c.request(cmd).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert_eq!(r.ext_fields.get("msgId").unwrap().split(',').count(), 3);
        assert_eq!(r.ext_fields.get("queueOffset"), Some("0"));
        wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        let r = c
            .request(pull("G", "BatchTopic", 1, 0, 32, None, "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let got = decode_records(&r.body);
        let bodies: Vec<_> = got
            .iter()
            .map(|m| String::from_utf8_lossy(&m.body).into_owned())
            .collect();
        assert_eq!(bodies, ["m0", "m1", "m2"]);
        assert_eq!(property(&got[2].properties, "UNIQ_KEY"), Some("ID2"));
        assert_eq!(property(&got[2].properties, "CLUSTER"), Some("TestCluster"));
        // The pulled messages count toward the group's consume rate of the last minute.
        let r = c
            .request(with_fields(
                request::GET_CONSUME_STATS,
                &[
                    ("consumerGroup", "G".to_owned()),
                    ("topic", "BatchTopic".to_owned()),
                ],
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        // fastjson's ConsumeStats has MessageQueue objects as map keys (not JSON): read
        // the one number directly.
        let text = String::from_utf8_lossy(&r.body);
        let tps: f64 = text
            .split_once("\"consumeTps\":")
            .and_then(|(_, rest)| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no consumeTps in {text}"));
        assert!(tps >= 3.0 / 60.0, "consumeTps {tps}");
    });
}

#[test]
fn long_polling_pull_wakes_on_new_message_and_times_out_otherwise() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        // Create the topic with one message so the queue exists.
        let r = c
            .request(send_v2(
                "LongPoll",
                0,
                b"first",
                &properties(&[("TAGS", "A")]),
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;

        // A parked pull with a 1 s hold and nothing arriving answers PULL_NOT_FOUND after it.
        let started = Instant::now();
        let r = c
            .request(pull("LP", "LongPoll", 0, 1, 32, Some(1_000), "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_NOT_FOUND);
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "answered after {:?}",
            started.elapsed()
        );

        // A parked pull (8 s hold) is woken by a matching message well before the hold ends,
        // while a message with another tag does not wake a TagA-only pull.
        let c2 = Client::connect(b.broker.port).await.unwrap();
        let parked_all = c.request(pull("LP", "LongPoll", 0, 1, 32, Some(8_000), "*"));
        let parked_a = c2.request(pull("LP2", "LongPoll", 0, 1, 32, Some(8_000), "A"));
        let sender = async {
            let p = Client::connect(b.broker.port).await.unwrap();
            eventually(Duration::from_secs(10), "both pulls to park", || async {
                parked_pulls(&p).await == 2
            })
            .await;
            let r = p
                .request(send_v2(
                    "LongPoll",
                    0,
                    b"other-tag",
                    &properties(&[("TAGS", "B")]),
                ))
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS);
            // Dispatched, its arrival has woken the `*` pull and left the TagA one parked.
            wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
            assert_eq!(parked_pulls(&p).await, 1, "other-tag woke the TagA pull");
            let r = p
                .request(send_v2(
                    "LongPoll",
                    0,
                    b"tag-a",
                    &properties(&[("TAGS", "A")]),
                ))
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS);
            Instant::now()
        };
        let started = Instant::now();
        let (all, a, sent_a_at) = tokio::join!(parked_all, parked_a, sender);
        let all = all.unwrap();
        assert_eq!(all.code, response::SUCCESS);
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "long poll not woken: {:?}",
            started.elapsed()
        );
        assert_eq!(decode_records(&all.body)[0].body, b"other-tag");
        let a = a.unwrap();
        assert_eq!(a.code, response::SUCCESS);
        let bodies: Vec<_> = decode_records(&a.body)
            .into_iter()
            .map(|m| m.body)
            .collect();
        assert_eq!(bodies, vec![b"tag-a".to_vec()]);
        assert!(sent_a_at.elapsed() < Duration::from_secs(5));
    });
}

#[test]
fn heartbeat_consumer_list_and_offsets() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        let hb = r#"{"clientID":"127.0.0.1@e2e","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,"groupName":"HG","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"1","topic":"HbTopic"}]}],"producerDataSet":[{"groupName":"PG"}]}"#;
        let r = c.request(RemotingCommand::bare_request(request::HEART_BEAT).with_body(hb.as_bytes().to_vec())).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert!(r.version >= 232, "clients need a broker version >= V4_1_0 for SQL92 checks");
        let list = with_fields(request::GET_CONSUMER_LIST_BY_GROUP, &[("consumerGroup", "HG".to_owned())]);
        let r = c.request(list.clone()).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert!(String::from_utf8_lossy(&r.body).contains("127.0.0.1@e2e"));

        // A second member joining makes the broker push NOTIFY_CONSUMER_IDS_CHANGED to the
        // first (checked indirectly: the list grows; the push itself is oneway).
        let c2 = Client::connect(b.broker.port).await.unwrap();
        let hb2 = hb.replace("127.0.0.1@e2e", "127.0.0.1@e2e-2");
        c2.request(RemotingCommand::bare_request(request::HEART_BEAT).with_body(hb2.into_bytes())).await.unwrap();
        let r = c.request(list.clone()).await.unwrap();
        assert!(String::from_utf8_lossy(&r.body).contains("e2e-2"));
        // Closing the connection removes the member.
        c2.close().await;
        eventually(Duration::from_secs(5), "the closed member to go", || async {
            let r = c.request(list.clone()).await.unwrap();
            !String::from_utf8_lossy(&r.body).contains("e2e-2")
        })
        .await;

        // Offsets: a new group on an empty queue starts at 0; commits are read back. (An
        // offset is kept only for a queue that exists.)
        let create = with_fields(
            request::UPDATE_AND_CREATE_TOPIC,
            &[
                ("topic", "HbTopic".to_owned()),
                ("defaultTopic", "TBW102".to_owned()),
                ("readQueueNums", "1".to_owned()),
                ("writeQueueNums", "1".to_owned()),
                ("perm", "6".to_owned()),
                ("topicFilterType", "SINGLE_TAG".to_owned()),
                ("order", "false".to_owned()),
            ],
        );
        assert_eq!(c.request(create).await.unwrap().code, response::SUCCESS);
        let q = |g: &str| with_fields(request::QUERY_CONSUMER_OFFSET, &[("consumerGroup", g.to_owned()), ("topic", "HbTopic".to_owned()), ("queueId", "0".to_owned())]);
        let r = c.request(q("HG")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(r.ext_fields.get("offset"), Some("0"));
        let u = with_fields(request::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", "HG".to_owned()), ("topic", "HbTopic".to_owned()), ("queueId", "0".to_owned()), ("commitOffset", "7".to_owned())]);
        assert_eq!(c.request(u).await.unwrap().code, response::SUCCESS);
        assert_eq!(c.request(q("HG")).await.unwrap().ext_fields.get("offset"), Some("7"));
        let max = with_fields(request::GET_MAX_OFFSET, &[("topic", "HbTopic".to_owned()), ("queueId", "0".to_owned())]);
        assert_eq!(c.request(max).await.unwrap().ext_fields.get("offset"), Some("0"));
    });
}
