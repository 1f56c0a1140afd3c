//! Fuzz targets on the stable toolchain (see `fuzz/driver.rs`): everything a peer can
//! put on the wire before authentication or validation, plus a stateful target that
//! drives random request sequences through the broker's one dispatch table on a temp
//! store. `cargo test -p rmq-broker --test fuzz` runs each for `RMQ_FUZZ_SECONDS`
//! (0.5 s by default; CI's fuzz step gives them more).
#![allow(clippy::unwrap_used)]

#[path = "fuzz/driver.rs"]
mod driver;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use broker::config::Config;
use broker::metrics::Metrics;
use broker::services::Broker;
use broker::services::clients::Conn;
use broker::services::ha::transfer_frame::next_frame;
use broker::services::put_path::BrokerStore;
use bytes::BytesMut;
use protocol::body::{
    ConsumerListBody, HeartbeatData, KvTable, LockBatchRequestBody, LockBatchResponseBody,
    RegisterBrokerBody, TopicConfigSerializeWrapper, UnlockBatchRequestBody,
};
use protocol::code::request as rq;
use protocol::header::*;
use protocol::message::PhysicalOffset;
use protocol::{ExtFields, RemotingCommand};
use store::config_files::{SubscriptionGroupConfig, SubscriptionGroupTable};
use store::ha::{EpochEntry, last_consistent_point};

/// extFields keys the typed headers read, so mutated inputs hit real fields.
const KEYS: &[&str] = &[
    "topic",
    "queueId",
    "consumerGroup",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subscription",
    "subVersion",
    "expressionType",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "n",
    "producerGroup",
    "defaultTopic",
    "readQueueNums",
    "writeQueueNums",
    "perm",
    "topicFilterType",
    "topicSysFlag",
    "order",
    "offset",
    "timestamp",
    "key",
    "beginTimestamp",
    "endTimestamp",
    "groupName",
    "removeOffset",
    "brokerName",
    "brokerAddr",
    "clusterName",
    "haServerAddr",
    "brokerId",
    "compressed",
    "bodyCrc32",
    "namespace",
    "value",
    "clientId",
    "tranStateTableOffset",
    "commitLogOffset",
    "commitOrRollback",
    "fromTransactionCheck",
    "msgId",
    "transactionId",
    "originMsgId",
    "originTopic",
    "delayLevel",
    "maxReconsumeTimes",
    "masterBrokerId",
    "masterAddress",
    "masterEpoch",
    "bname",
    "unitMode",
    "batch",
];

/// `key\x01value\x02...` with a key byte below 0x80 picking from [`KEYS`].
fn ext_fields(data: &[u8]) -> ExtFields {
    let mut fields = ExtFields::new();
    for pair in data.split(|b| *b == 2) {
        let (key, value) = match pair.iter().position(|b| *b == 1) {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &[][..]),
        };
        let key = match key {
            [k] if *k < 0x80 => KEYS[*k as usize % KEYS.len()].to_owned(),
            other => String::from_utf8_lossy(other).into_owned(),
        };
        fields.insert(&key, String::from_utf8_lossy(value).into_owned());
    }
    fields
}

/// Reads `H` from `fields`; a header that reads must write and read back to itself.
fn header_round_trip<H: CommandHeader + PartialEq + std::fmt::Debug>(fields: &ExtFields) -> bool {
    let Ok(h) = H::read(fields) else {
        return false;
    };
    let mut again = ExtFields::new();
    h.write(&mut again);
    let back = H::read(&again);
    assert_eq!(back.as_ref(), Ok(&h), "header round trip");
    true
}

macro_rules! headers {
    ($fields:expr; $($h:ty),* $(,)?) => {{
        let mut any = false;
        $( any |= header_round_trip::<$h>($fields); )*
        any
    }};
}

#[test]
fn typed_headers() {
    let seeds = vec![
        b"\x00T\x02\x01\x00\x02\x02g\x02\x03 0\x02\x04 32".to_vec(),
        b"\x0bG\x02\x0cT\x02\x0dTBW102\x02\x0e4\x02\x0f0\x02\x100\x02\x111\x02\x120\x02\x13\x02\x140\x02\x15false".to_vec(),
    ];
    driver::run("typed_headers", seeds, 4096, |data| {
        let fields = ext_fields(data);
        headers!(&fields;
            CreateTopicRequestHeader, DeleteTopicRequestHeader, DeleteSubscriptionGroupRequestHeader,
            GetConsumerConnectionListRequestHeader, GetProducerConnectionListRequestHeader,
            GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader,
            UnregisterClientRequestHeader, GetConsumerListByGroupRequestHeader,
            NotifyConsumerIdsChangedRequestHeader, ConsumerSendMsgBackRequestHeader,
            NotifyBrokerRoleChangedRequestHeader, RegisterBrokerRequestHeader,
            UnRegisterBrokerRequestHeader, QueryDataVersionRequestHeader, GetRouteInfoRequestHeader,
            DeleteTopicFromNamesrvRequestHeader, GetTopicsByClusterRequestHeader,
            PutKVConfigRequestHeader, GetKVConfigRequestHeader, DeleteKVConfigRequestHeader,
            GetKVListByNamespaceRequestHeader, WipeWritePermOfBrokerRequestHeader,
            AddWritePermOfBrokerRequestHeader, QueryConsumerOffsetRequestHeader,
            UpdateConsumerOffsetRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
            SearchOffsetRequestHeader, GetEarliestMsgStoretimeRequestHeader,
            PullMessageRequestHeader, QueryMessageRequestHeader, ViewMessageRequestHeader,
            SendMessageRequestHeader, SendMessageRequestHeaderV2, EndTransactionRequestHeader,
            CheckTransactionStateRequestHeader, ReplyMessageRequestHeader,
        )
    });
}

/// A fastjson body that decodes must encode to something that decodes again.
fn body_round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(data: &[u8]) -> bool {
    let Ok(v) = protocol::body::decode::<T>(data) else {
        return false;
    };
    let again = protocol::body::encode(&v);
    if let Err(e) = protocol::body::decode::<T>(&again) {
        panic!(
            "re-encoded body does not decode: {e}: {}",
            String::from_utf8_lossy(&again)
        );
    }
    true
}

#[test]
fn fastjson_bodies() {
    let seeds = vec![
        br#"{"clientID":"c@1","consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"T","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG","classFilterMode":false}],"unitMode":false}],"producerDataSet":[{"groupName":"p"}]}"#.to_vec(),
        br#"{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":2},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}},"filterServerList":[]}"#.to_vec(),
        br#"{"consumerGroup":"g","clientId":"c","onlyThisBroker":false,"mqSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}"#.to_vec(),
        br#"{"groupName":"g","retryQueueNums":1,"retryMaxTimes":16,"consumeEnable":true,"brokerId":0,"whichBrokerWhenConsumeSlowly":1}"#.to_vec(),
        br#"{"dataVersion":{"counter":1,"timestamp":2},"subscriptionGroupTable":{"g":{"groupName":"g"}}}"#.to_vec(),
        br#"{"table":{"a":"b"}}"#.to_vec(),
        br#"{"consumerIdList":["a","b"]}"#.to_vec(),
    ];
    driver::run("fastjson_bodies", seeds, 16 * 1024, |data| {
        body_round_trip::<HeartbeatData>(data)
            | body_round_trip::<RegisterBrokerBody>(data)
            | body_round_trip::<TopicConfigSerializeWrapper>(data)
            | body_round_trip::<SubscriptionGroupConfig>(data)
            | body_round_trip::<SubscriptionGroupTable>(data)
            | body_round_trip::<LockBatchRequestBody>(data)
            | body_round_trip::<LockBatchResponseBody>(data)
            | body_round_trip::<UnlockBatchRequestBody>(data)
            | body_round_trip::<KvTable>(data)
            | body_round_trip::<ConsumerListBody>(data)
    });
}

#[test]
fn compressed_register_body() {
    let mut body = RegisterBrokerBody::default();
    for i in 0..4 {
        let mut t = protocol::body::TopicConfig::new(format!("T{i}"));
        t.read_queue_nums = i;
        body.topic_config_serialize_wrapper
            .topic_config_table
            .insert(t.topic_name.clone(), t);
    }
    body.filter_server_list.push("127.0.0.1:1".into());
    let seeds = vec![
        body.encode(true),
        RegisterBrokerBody::default().encode(true),
    ];
    driver::run("compressed_register_body", seeds, 64 * 1024, |data| {
        match RegisterBrokerBody::decode_with_limit(data, true, 1 << 20) {
            Ok(decoded) => {
                let again =
                    RegisterBrokerBody::decode_with_limit(&decoded.encode(true), true, 1 << 22)
                        .expect("re-encoded register body decodes");
                assert_eq!(
                    again
                        .topic_config_serialize_wrapper
                        .topic_config_table
                        .len(),
                    decoded
                        .topic_config_serialize_wrapper
                        .topic_config_table
                        .len()
                );
                true
            }
            Err(_) => false,
        }
    });
}

/// A stored record's properties as the SQL92 pull filter decodes them (straight from the
/// bytes, only the selector's names): the same result as the general text decoder.
#[test]
fn sql92_properties() {
    let filter = broker::services::filter::sql92::Sql92Filter::compile(
        "a > 5 AND b = 'x' OR c IN ('p','q') OR TAGS IS NULL",
    )
    .unwrap();
    let seeds = vec![
        b"a\x016\x02b\x01x\x02TAGS\x01T".to_vec(),
        b"\x01\x02\x01a\x01\x01\x02c\x01p\x01q\x02a\x019".to_vec(),
    ];
    driver::run("sql92_properties", seeds, 1024, |data| {
        let raw = filter.slots_from_raw(data);
        match std::str::from_utf8(data) {
            Ok(text) => {
                let want = filter.evaluate_slots(&filter.slots_from_text(text));
                assert_eq!(raw.map(|s| filter.evaluate_slots(&s)), Some(want));
                true
            }
            Err(_) => raw.is_some(),
        }
    });
}

/// A selector built from `data` by grammar rules, iteratively (the generator itself must
/// not be what overflows): each byte pair picks a rule and a repeat count, wrapping or
/// chaining the expression so far, so inputs reach thousands of levels and terms.
fn selector_from(data: &[u8]) -> String {
    const ATOMS: [&str; 10] = [
        "a = 1",
        "b > 2.5",
        "TAGS IN ('x','y')",
        "c IS NULL",
        "a BETWEEN 1 AND 5",
        "NOT d",
        "e <> 'z'",
        "a",
        "-a > -1",
        "TRUE",
    ];
    let mut expr = ATOMS[0].to_owned();
    for pair in data.chunks(2) {
        let n = usize::from(pair.get(1).copied().unwrap_or(1)).max(1);
        let atom = ATOMS[n % ATOMS.len()];
        expr = match pair[0] % 11 {
            0 => atom.to_owned(),
            1 => format!("{}{expr}{}", "(".repeat(n * 8), ")".repeat(n * 8)),
            2 => format!("{}({expr})", "NOT ".repeat(n * 8)),
            3 => format!("{}({expr}) > 1", "- ".repeat(n * 8)),
            4 => vec![format!("({expr})"); n.min(64)].join(" AND "),
            5 => vec![format!("({expr})"); n.min(64)].join(" OR "),
            6 => format!("{expr} AND {atom}"),
            7 => format!("({expr}){}", " = TRUE".repeat(n * 8)),
            8 => format!("({expr}){}", " IS NULL".repeat(n * 8)),
            9 => format!("a IN ({})", vec!["'v'"; n * 16].join(",")),
            // A stray token: most of these do not parse, which is the point.
            _ => format!(
                "{expr} {}",
                ["(", ")", "AND", "NOT", "BETWEEN", "'", ","][n % 7]
            ),
        };
        if expr.len() > 256 * 1024 {
            break;
        }
    }
    expr
}

/// SQL92 selectors as clients send them, deep and wide: whatever compiles within the
/// default budget evaluates, clones, compares and drops on the test thread's stack;
/// whatever does not is a clean error. A stack overflow aborts the run (a finding).
#[test]
fn sql92_selectors() {
    use broker::services::filter::sql92::{DecodedProperties, Sql92Filter, Sql92Limits};
    let props = [
        DecodedProperties::parse("a\u{1}3\u{2}b\u{1}9\u{2}TAGS\u{1}x"),
        DecodedProperties::parse("c\u{1}\u{2}d\u{1}true\u{2}e\u{1}z"),
        DecodedProperties::default(),
    ];
    let limits = Sql92Limits::default();
    let seeds = vec![
        b"\x01\x7d".to_vec(),
        b"\x02\x7d".to_vec(),
        b"\x04\x40\x04\x40".to_vec(),
        b"\x07\x20\x08\x20".to_vec(),
        b"\x09\xff\x05\x10\x01\x03".to_vec(),
    ];
    driver::run("sql92_selectors", seeds, 64, |data| {
        let text = selector_from(data);
        // The raw bytes as a selector too.
        let _ = Sql92Filter::compile_within(&String::from_utf8_lossy(data), &limits);
        match Sql92Filter::compile_within(&text, &limits) {
            Ok(f) => {
                for p in &props {
                    let _ = f.evaluate(p);
                }
                let copy = f.clone();
                assert!(copy == f);
                true
            }
            Err(e) => {
                assert!(e.line >= 1 && e.column >= 1, "{e}");
                false
            }
        }
    });
}

#[test]
fn properties_config() {
    let seeds = vec![
        b"brokerName=b\nlistenPort=10911\n# c\n! d\nkey\\\n  continued=1\nmaxQueueNums=64\n"
            .to_vec(),
        b"a:b\n c = d \\u0041\nflushDiskType=SYNC_FLUSH\nwriteTimeoutMillis=9223372036854775807\n"
            .to_vec(),
    ];
    driver::run("properties_config", seeds, 8192, |data| {
        let text = String::from_utf8_lossy(data);
        let pairs = broker::config::properties::parse(&text);
        for (k, _) in &pairs {
            assert!(!k.is_empty() || pairs.iter().any(|(k, _)| k.is_empty()));
        }
        Config::from_properties(&text).is_ok()
    });
}

#[test]
fn ha_handshake() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let seeds = vec![
        b"RMQHA".to_vec(),
        vec![0; 64],
        b"\x00\x00\x00\x10broker-a\x00\x00".to_vec(),
    ];
    driver::run("ha_handshake", seeds, 4096, |data| {
        rt.block_on(async {
            let (mut master, mut slave) = tokio::io::duplex(64 * 1024);
            let input = data.to_vec();
            let feed = tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let _ = slave.write_all(&input).await;
                let _ = slave.shutdown().await;
                let mut sink = Vec::new();
                let _ = slave.read_to_end(&mut sink).await;
            });
            let accepted = tokio::time::timeout(
                Duration::from_secs(2),
                broker::services::ha::handshake::accept(
                    &mut master,
                    "broker-a",
                    "secret",
                    3,
                    (Vec::new(), protocol::message::PhysicalOffset(0)),
                ),
            )
            .await;
            drop(master);
            let _ = feed.await;
            matches!(accepted, Ok(Ok(_)))
        })
    });
}

#[test]
fn ha_slave_frames() {
    let mut seed = Vec::new();
    seed.extend_from_slice(&100i64.to_be_bytes());
    seed.extend_from_slice(&3i32.to_be_bytes());
    seed.extend_from_slice(b"abc");
    seed.extend_from_slice(&(i64::MAX - 1).to_be_bytes());
    seed.extend_from_slice(&0i32.to_be_bytes());
    driver::run("ha_slave_frames", vec![seed], 4096, |data| {
        let mut buf = BytesMut::from(data);
        let mut any = false;
        loop {
            let before = buf.len();
            match next_frame(&mut buf) {
                Ok(Some(frame)) => {
                    assert!(frame.offset.0 >= 0 && frame.end() >= frame.offset);
                    assert_eq!(before - buf.len(), 12 + frame.body.len());
                    any = true;
                }
                Ok(None) => return any,
                Err(_) => return false,
            }
        }
    });
}

/// Epoch lists decoded from `(epoch i32, start i64)` pairs.
fn epochs(data: &[u8]) -> Vec<EpochEntry> {
    data.chunks_exact(12)
        .map(|c| EpochEntry {
            epoch: i32::from_be_bytes([c[0], c[1], c[2], c[3]]),
            start_offset: PhysicalOffset(i64::from_be_bytes(
                c[4..12].try_into().unwrap_or_default(),
            )),
        })
        .collect()
}

#[test]
fn epoch_reconcile() {
    let mut seed = Vec::new();
    for (e, s) in [(1i32, 0i64), (2, 100), (3, 500)] {
        seed.extend_from_slice(&e.to_be_bytes());
        seed.extend_from_slice(&s.to_be_bytes());
    }
    seed.push(0xFF);
    seed.extend_from_slice(&seed.clone()[..24]);
    driver::run("epoch_reconcile", vec![seed], 1024, |data| {
        let (a, b) = data.split_at(
            data.iter()
                .position(|x| *x == 0xFF)
                .unwrap_or(data.len() / 2),
        );
        let b = b.get(1..).unwrap_or_default();
        let (local, remote) = (epochs(a), epochs(b));
        let local_end = local.last().map_or(PhysicalOffset(0), |e| e.start_offset);
        let remote_end = remote.last().map_or(PhysicalOffset(0), |e| e.start_offset);
        // Malformed histories (unsorted, negative offsets) may yield any point:
        // `cut_to_master` only truncates below the local end, so no invariant is claimed.
        let point = last_consistent_point(&local, local_end, &remote, remote_end);
        let well_formed = |l: &[EpochEntry]| {
            l.first().is_none_or(|e| e.start_offset.0 >= 0)
                && l.windows(2)
                    .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset <= w[1].start_offset)
        };
        if well_formed(&local) && well_formed(&remote) {
            if let Some(p) = point {
                assert!(p <= local_end || p <= remote_end, "{p:?}");
            }
            // Reconciling a history with itself keeps all of it.
            if !local.is_empty() {
                let same = last_consistent_point(&local, local_end, &local, local_end);
                assert_eq!(same, Some(local_end), "self reconcile of {local:?}");
            }
        }
        point.is_some()
    });
}

/// The request codes the stateful target sends.
const CODES: &[i32] = &[
    rq::SEND_MESSAGE_V2,
    rq::SEND_BATCH_MESSAGE,
    rq::PULL_MESSAGE,
    rq::HEART_BEAT,
    rq::UNREGISTER_CLIENT,
    rq::LOCK_BATCH_MQ,
    rq::UNLOCK_BATCH_MQ,
    rq::QUERY_CONSUMER_OFFSET,
    rq::UPDATE_CONSUMER_OFFSET,
    rq::GET_MAX_OFFSET,
    rq::GET_MIN_OFFSET,
    rq::SEARCH_OFFSET_BY_TIMESTAMP,
    rq::UPDATE_AND_CREATE_TOPIC,
    rq::DELETE_TOPIC_IN_BROKER,
    rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    rq::DELETE_SUBSCRIPTIONGROUP,
    rq::GET_TOPIC_STATS_INFO,
    rq::GET_CONSUME_STATS,
    rq::CONSUMER_SEND_MSG_BACK,
    rq::END_TRANSACTION,
    rq::QUERY_MESSAGE,
    rq::VIEW_MESSAGE_BY_ID,
    rq::GET_ALL_TOPIC_CONFIG,
    rq::GET_CONSUMER_LIST_BY_GROUP,
    rq::UPDATE_BROKER_CONFIG,
    rq::GET_BROKER_CONFIG,
    99_999,
];

/// Requests from `data`: per request a code byte, a fields length byte, the fields
/// (see [`ext_fields`]), a body length byte and the body.
fn requests(data: &[u8]) -> Vec<RemotingCommand> {
    let mut out = Vec::new();
    let mut rest = data;
    while let [code, flen, tail @ ..] = rest {
        let flen = (*flen as usize).min(tail.len());
        let (fields, tail) = tail.split_at(flen);
        let (blen, tail) = match tail {
            [b, t @ ..] => ((*b as usize * 4).min(t.len()), t),
            [] => (0, tail),
        };
        let (body, tail) = tail.split_at(blen);
        let mut cmd = RemotingCommand::bare_request(CODES[*code as usize % CODES.len()]);
        cmd.ext_fields = ext_fields(fields);
        cmd.body = body.to_vec().into();
        out.push(cmd);
        rest = tail;
        if out.len() >= 32 {
            break;
        }
    }
    out
}

#[test]
fn request_sequences_against_a_broker() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\nmaxSuspendTimeoutMillis=5\nmaxQueueNums=16\n",
        dir.path().display()
    );
    let config = Config::from_properties(&text).unwrap();
    let store = store::MessageStore::open(config.store.clone()).unwrap();
    let store: Arc<BrokerStore> = Arc::new(store);
    let broker = Broker::open(config, store, Arc::new(Metrics::new())).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let (outbound, mut pushes) = tokio::sync::mpsc::channel(1024);
    let conn = Conn {
        id: 1,
        peer,
        channel: broker::services::clients::Channel {
            id: 1,
            peer,
            outbound,
            close: tokio_util::sync::CancellationToken::new(),
        },
    };
    broker.clients.add_channel(conn.channel.clone());
    let mut seed = vec![0u8, 6, 1, b'T', 2, 1, 0, 2, 2];
    seed.extend_from_slice(b"x");
    let heartbeat = br#"{"clientID":"c@1","consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[],"unitMode":false}],"producerDataSet":[]}"#;
    let mut hb = vec![3u8, 0, (heartbeat.len() / 4) as u8];
    hb.extend_from_slice(&heartbeat[..heartbeat.len() / 4 * 4]);
    let report = driver::run("request_sequences", vec![seed, hb], 2048, |data| {
        let mut answered = false;
        for cmd in requests(data) {
            let out = rt.block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(5),
                    broker::dispatch::dispatch(&broker, &conn, cmd),
                )
                .await
            });
            let out = out.expect("every request is answered within 5 s");
            answered |= out.is_some_and(|o| o.command.code == 0);
            while pushes.try_recv().is_ok() {}
        }
        answered
    });
    // What the sequences left behind persists and loads back.
    broker.persist_all();
    assert!(broker.topics.flush_created(Duration::from_secs(10)));
    let reopened = broker::services::topics::TopicManager::open(dir.path(), &broker.config.broker);
    assert!(reopened.is_ok(), "topics.json reloads");
    assert!(report.executions > 0);
}

/// SEND_BATCH_MESSAGE bodies: validation and iteration agree, never panic, and a valid
/// body's entries re-encode to the same entries.
#[test]
fn batch_bodies() {
    use protocol::message::batch::{self, BatchEntry};
    let mut seed = Vec::new();
    for i in 0..3 {
        BatchEntry {
            flag: i,
            body: b"body",
            properties: "UNIQ_KEY\u{1}k\u{2}TAGS\u{1}t",
        }
        .encode_to(&mut seed)
        .unwrap();
    }
    driver::run("batch_bodies", vec![seed, vec![0; 20]], 4096, |data| {
        let valid = batch::validate(data);
        let entries: Vec<_> = batch::decode(data).collect();
        match valid {
            Ok(n) => {
                assert_eq!(n, entries.len());
                // MAGIC and BODYCRC are not checked, so compare what the broker keeps.
                let entries: Vec<_> = entries
                    .into_iter()
                    .map(|e| e.expect("a validated body decodes"))
                    .collect();
                let mut again = Vec::new();
                for e in &entries {
                    e.encode_to(&mut again).unwrap();
                }
                let decoded: Vec<_> = batch::decode(&again).map(Result::unwrap).collect();
                assert_eq!(decoded.len(), entries.len());
                for (a, b) in decoded.iter().zip(&entries) {
                    assert_eq!(
                        (a.flag, a.body, a.properties),
                        (b.flag, b.body, b.properties)
                    );
                }
                true
            }
            Err(_) => false,
        }
    });
}

/// HEART_BEAT through the real handler with heartbeats built from the input: many
/// groups, subscriptions and selectors. Every one is answered, and what the broker then
/// holds stays within its caps, however the heartbeats are shaped.
#[test]
fn heartbeats_against_a_broker() {
    use protocol::body::{ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, ProducerData};
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\nmaxGroupsPerConnection=40\nmaxClientGroups=60\nmaxHeartbeatGroups=32\nmaxSubscriptionsPerGroup=16\nfilterRegistryMaxBytes=262144\nmaxClientSubscriptionBytes=262144\n",
        dir.path().display()
    );
    let config = Config::from_properties(&text).unwrap();
    let store = store::MessageStore::open(config.store.clone()).unwrap();
    let store: Arc<BrokerStore> = Arc::new(store);
    let broker = Broker::open(config, store, Arc::new(Metrics::new())).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (outbound, mut pushes) = tokio::sync::mpsc::channel(1024);
    let conns: Vec<Conn> = (1..=3)
        .map(|id| {
            let peer: SocketAddr = format!("127.0.0.{id}:4000{id}").parse().unwrap();
            let conn = Conn {
                id,
                peer,
                channel: broker::services::clients::Channel {
                    id,
                    peer,
                    outbound: outbound.clone(),
                    close: tokio_util::sync::CancellationToken::new(),
                },
            };
            broker.clients.add_channel(conn.channel.clone());
            conn
        })
        .collect();
    const SELECTORS: [&str; 6] = [
        "a > 1",
        "(b = 'x') OR NOT c",
        "*",
        "A || B",
        "a >",
        "x IN ('p','q')",
    ];
    let heartbeat = |data: &[u8]| -> (usize, RemotingCommand) {
        let (conn, groups) = (
            data.first().copied().unwrap_or(0),
            data.get(1).copied().unwrap_or(1),
        );
        let consumers = (0..usize::from(groups % 48))
            .map(|g| {
                let b = data.get(2 + g).copied().unwrap_or(0);
                ConsumerData {
                    group_name: format!("g{}", b % 80),
                    consume_type: ConsumeType::ConsumePassively,
                    message_model: MessageModel::Clustering,
                    consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                    subscription_data_set: (0..usize::from(b % 20))
                        .map(|t| protocol::body::SubscriptionData {
                            class_filter_mode: false,
                            topic: format!("T{t}"),
                            sub_string: SELECTORS[(t + usize::from(b)) % SELECTORS.len()]
                                .repeat(usize::from(b / 16) + 1),
                            tags_set: Default::default(),
                            code_set: Default::default(),
                            sub_version: i64::from(b),
                            expression_type: if t % 2 == 0 { "SQL92" } else { "TAG" }.into(),
                        })
                        .collect(),
                    unit_mode: false,
                }
            })
            .collect();
        let producers = (0..usize::from(groups / 48 % 8))
            .map(|p| ProducerData {
                group_name: format!("p{p}"),
            })
            .collect();
        let body = HeartbeatData {
            client_id: format!("c@{conn}"),
            producer_data_set: producers,
            consumer_data_set: consumers,
        };
        (
            usize::from(conn) % 4,
            RemotingCommand::bare_request(rq::HEART_BEAT).with_body(protocol::body::encode(&body)),
        )
    };
    driver::run(
        "heartbeats",
        vec![vec![0, 10, 1, 2, 3], vec![1, 47, 255, 7]],
        64,
        |data| {
            let (conn, cmd) = heartbeat(data);
            if conn == 3 {
                // A connection leaving.
                let gone = broker.clients.remove_channel(conns[0].id);
                broker::services::membership::groups_left(&broker, &gone);
                broker.clients.add_channel(conns[0].channel.clone());
                return true;
            }
            let out = rt.block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(5),
                    broker::dispatch::dispatch(&broker, &conns[conn], cmd),
                )
                .await
            });
            let answered = out.expect("every heartbeat is answered within 5 s");
            while pushes.try_recv().is_ok() {}
            assert!(broker.clients.group_count() <= 60);
            assert!(broker.clients.subscription_bytes() <= 262_144);
            assert!(broker.filters.usage().1 <= 262_144);
            answered.is_some_and(|o| o.command.code == 0)
        },
    );
}
