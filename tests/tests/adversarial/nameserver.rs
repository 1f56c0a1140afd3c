//! The nameserver's tables against an anonymous peer. With `aclEnable=false` (the
//! default, as in RocketMQ 4.9) anyone reaching port 9876 may send REGISTER_BROKER and
//! PUT_KV_CONFIG; before the table limits, thousands of fake brokers, their topics and
//! their master epochs, or KV entries, grew the process without bound and stayed. Each
//! table is now capped (a refusal names the key), a broker registered before the attack
//! keeps its routes, and what the attacker registered goes with its connection.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use e2e::broker::FakeBroker;
use e2e::nameserver::Options;
use e2e::wait::eventually;
use e2e::{Client, NameServer};
use protocol::RemotingCommand;
use protocol::body::TopicRouteData;
use protocol::code::{request, response};
use protocol::header::{
    GetKVConfigRequestHeader, GetRouteInfoRequestHeader, PutKVConfigRequestHeader,
};

use crate::common::metric;

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const VICTIM_ADDR: &str = "127.0.0.1:30911";

fn route(topic: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    )
}

async fn refusals(ns: &NameServer, key: &str) -> f64 {
    metric(
        ns.http_port,
        &format!("rmq_namesrv_limit_refusals_total{{limit=\"{key}\"}}"),
    )
    .await
}

fn rss_kib(ns: &NameServer) -> u64 {
    ns.anon_rss_kib().expect("RssAnon of the nameserver")
}

/// The nameserver lives and a client that took no part in the attack gets the victim
/// broker's route for `topic`.
async fn victim_route_is_served(ns: &mut NameServer, topic: &str) {
    assert!(ns.running(), "the nameserver died; log:\n{}", ns.log());
    let c = Client::connect(ns.port)
        .await
        .expect("a fresh client connects");
    let r = c.request(route(topic)).await.expect("route answered");
    assert_eq!(
        r.code,
        response::SUCCESS,
        "route of {topic}: {:?}",
        r.remark
    );
    let data = TopicRouteData::decode(&r.body).expect("route decodes");
    let addrs: Vec<&String> = data
        .broker_datas
        .iter()
        .flat_map(|b| b.broker_addrs.values())
        .collect();
    assert_eq!(addrs, [VICTIM_ADDR], "route of {topic}");
}

/// Sends `requests` over `c` in batches and returns the remarks of the refused ones,
/// checking that each refusal is SYSTEM_ERROR.
async fn send_all(c: &Client, requests: Vec<RemotingCommand>) -> Vec<String> {
    let mut refused = Vec::new();
    let mut requests = requests.into_iter().peekable();
    while requests.peek().is_some() {
        let batch: Vec<_> = requests.by_ref().take(50).collect();
        for r in c.pipeline(batch).await.expect("attack requests answered") {
            if r.code != response::SUCCESS {
                assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
                refused.push(r.remark.unwrap_or_default());
            }
        }
    }
    refused
}

fn all_name(remarks: &[String], key: &str) {
    for remark in remarks {
        assert!(
            remark.contains(key),
            "remark {remark:?} does not name {key}"
        );
    }
}

/// 2,000 fake brokers from one anonymous connection: half report 100 topics of
/// 200-character names each (200,000 topics before the caps), the rest carry master
/// epochs, too many filter servers or over-long names. Every table stays within its cap,
/// the refusals name the keys and are counted, memory stays within 64 MiB of the
/// baseline, the broker registered before the attack re-registers and is routed, and
/// the attacker's entries go with its connection (its master epochs after
/// `masterEpochRetentionMillis`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_brokers_cannot_grow_the_route_table_without_bound() {
    let mut ns = NameServer::start(
        Options::default()
            .config("maxBrokers", 64)
            .config("maxRouteTopics", 2001)
            .config("maxQueueDatas", 4000)
            .config("maxMasterEpochs", 32)
            .config("maxFilterServersPerBroker", 4)
            .config("masterEpochRetentionMillis", 2000)
            .config("scanNotActiveBrokerIntervalMillis", 200),
    );
    let victim = Client::connect(ns.port).await.expect("victim connects");
    let broker =
        FakeBroker::new("DefaultCluster", "victim", VICTIM_ADDR, 0).topic("VictimTopic", 4);
    let r = victim
        .request(broker.register(false))
        .await
        .expect("victim registers");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let baseline = rss_kib(&ns);

    let attacker = Client::connect_from(ATTACKER, ns.port)
        .await
        .expect("attacker connects");
    let pad = "x".repeat(180);
    // Phase 1: brokers with topics of their own.
    let with_topics = (0..1000)
        .map(|i| {
            let mut b = FakeBroker::new(
                "Evil",
                &format!("evil-{i}"),
                &format!("10.9.{}.{}:10911", i / 250, i % 250),
                0,
            );
            for t in 0..100 {
                b = b.topic(&format!("T{i:04}_{t:03}_{pad}"), 8);
            }
            b.register(i % 2 == 0)
        })
        .collect();
    let refused = send_all(&attacker, with_topics).await;
    assert!(refused.len() >= 980, "only {} refused", refused.len());
    all_name(&refused, "maxRouteTopics");
    assert_eq!(refusals(&ns, "maxRouteTopics").await, refused.len() as f64);
    // The victim's topic and 20 brokers of 100: full.
    assert_eq!(metric(ns.http_port, "rmq_namesrv_topics").await, 2001.0);

    // Phase 2: master epochs, then plain brokers, filter servers and bad names.
    let epochs = (0..300)
        .map(|i| {
            FakeBroker::new(
                "Evil",
                &format!("epoch-{i}"),
                &format!("10.8.{}.{}:10911", i / 250, i % 250),
                0,
            )
            .epoch(1)
            .register(false)
        })
        .collect();
    let refused = send_all(&attacker, epochs).await;
    all_name(&refused, "maxMasterEpochs");
    assert!(refused.len() >= 268, "only {} refused", refused.len());
    assert_eq!(
        metric(ns.http_port, "rmq_namesrv_master_epochs").await,
        32.0
    );
    let plain = (0..700)
        .map(|i| {
            FakeBroker::new(
                "Evil",
                &format!("plain-{i}"),
                &format!("10.7.{}.{}:10911", i / 250, i % 250),
                1,
            )
            .register(false)
        })
        .collect();
    let refused = send_all(&attacker, plain).await;
    all_name(&refused, "maxBrokers");
    assert!(!refused.is_empty());
    assert_eq!(metric(ns.http_port, "rmq_namesrv_live_brokers").await, 64.0);
    let mut odd = vec![
        FakeBroker::new("Evil", &"n".repeat(300), "10.6.0.1:10911", 0).register(false),
        FakeBroker::new("Evil cluster", "odd", "10.6.0.2:10911", 0).register(false),
    ];
    let mut body = FakeBroker::new("Evil", "filters", "10.6.0.3:10911", 0).body();
    body.filter_server_list = (0..1000).map(|i| format!("10.5.0.{i}:1")).collect();
    let mut filters = FakeBroker::new("Evil", "filters", "10.6.0.3:10911", 0).register(false);
    // bodyCrc32 0: no check, as for a broker that sends none.
    filters.ext_fields.insert("bodyCrc32", "0");
    odd.push(filters.with_body(body.encode(false)));
    let refused = send_all(&attacker, odd).await;
    assert_eq!(refused.len(), 3);
    all_name(&refused[..2], "maxNameLength");
    all_name(&refused[2..], "maxFilterServersPerBroker");
    assert!(refusals(&ns, "maxBrokers").await >= 1.0);
    assert!(refusals(&ns, "maxMasterEpochs").await >= 268.0);

    let grown_kib = rss_kib(&ns).saturating_sub(baseline);
    // The capped tables hold under 2 MiB; the rest is decode buffers the allocator kept.
    // Before the caps this attack added ~200,000 topics of 200 bytes, over 100 MiB.
    assert!(
        grown_kib < 64 * 1024,
        "resident memory grew {grown_kib} KiB"
    );

    // The victim, registered first, re-registers (a new topic of its own is left out
    // while the table is full, its routes stay) and is routed.
    let v2 = FakeBroker {
        data_version: protocol::body::DataVersion {
            timestamp: 1_700_000_000_001,
            counter: 2,
        },
        ..broker.clone().topic("VictimNew", 4)
    };
    let r = victim
        .request(v2.register(false))
        .await
        .expect("victim re-registers");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    assert!(
        r.remark
            .as_deref()
            .is_some_and(|m| m.contains("maxRouteTopics")),
        "{:?}",
        r.remark
    );
    victim_route_is_served(&mut ns, "VictimTopic").await;

    // The attacker leaves: its brokers, names, topics and filter servers go at once, its
    // master epochs after the retention.
    attacker.close().await;
    eventually(
        Duration::from_secs(20),
        "the attacker's entries dropped",
        || async {
            metric(ns.http_port, "rmq_namesrv_live_brokers").await == 1.0
                && metric(ns.http_port, "rmq_namesrv_broker_names").await == 1.0
                && metric(ns.http_port, "rmq_namesrv_topics").await == 1.0
                && metric(ns.http_port, "rmq_namesrv_queue_datas").await == 1.0
                && metric(ns.http_port, "rmq_namesrv_master_epochs").await == 0.0
        },
    )
    .await;
    let r = victim
        .request(v2.register(false))
        .await
        .expect("victim re-registers");
    assert_eq!((r.code, r.remark.clone()), (response::SUCCESS, None));
    victim_route_is_served(&mut ns, "VictimNew").await;
}

fn put_kv(namespace: &str, key: &str, value: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::PUT_KV_CONFIG,
        &PutKVConfigRequestHeader {
            namespace: namespace.into(),
            key: key.into(),
            value: value.into(),
        },
    )
}

fn get_kv(namespace: &str, key: &str) -> RemotingCommand {
    RemotingCommand::request(
        request::GET_KV_CONFIG,
        &GetKVConfigRequestHeader {
            namespace: namespace.into(),
            key: key.into(),
        },
    )
}

/// 3,000 PUT_KV_CONFIG of 1 KiB values in fresh namespaces, then over-long keys and
/// values: the KV table stays within `maxKvEntries` / `maxKvBytes`, the refusals name
/// the keys, memory stays within 32 MiB of the baseline, and an ordered-topic entry put
/// before the attack is still read and still reaches a registering broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_puts_cannot_grow_the_kv_table_without_bound() {
    let mut ns = NameServer::start(
        Options::default()
            .config("maxKvEntries", 100)
            .config("maxKvBytes", 64 * 1024)
            .config("maxKvKeyLength", 64)
            .config("maxKvValueLength", 4096),
    );
    let victim = Client::connect(ns.port).await.expect("victim connects");
    let r = victim
        .request(put_kv("ORDER_TOPIC_CONFIG", "VictimTopic", "victim:4"))
        .await
        .expect("victim put");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let baseline = rss_kib(&ns);

    let attacker = Client::connect_from(ATTACKER, ns.port)
        .await
        .expect("attacker connects");
    let value = "v".repeat(1024);
    let puts = (0..3000)
        .map(|i| put_kv(&format!("ns-{i}"), &format!("k-{i}"), &value))
        .collect();
    let refused = send_all(&attacker, puts).await;
    assert!(refused.len() >= 2900, "only {} refused", refused.len());
    for remark in &refused {
        assert!(
            remark.contains("maxKvBytes") || remark.contains("maxKvEntries"),
            "{remark}"
        );
    }
    let small = (0..200)
        .map(|i| put_kv("tiny", &format!("k{i}"), "v"))
        .collect();
    let refused = send_all(&attacker, small).await;
    assert!(!refused.is_empty());
    all_name(&refused, "maxKvEntries");
    let oversized = vec![
        put_kv(&"n".repeat(65), "k", "v"),
        put_kv("ns", &"k".repeat(65), "v"),
        put_kv("ns", "k", &"v".repeat(4097)),
    ];
    let refused = send_all(&attacker, oversized).await;
    assert_eq!(refused.len(), 3);
    all_name(&refused[..2], "maxKvKeyLength");
    all_name(&refused[2..], "maxKvValueLength");

    assert!(metric(ns.http_port, "rmq_namesrv_kv_entries").await <= 100.0);
    assert!(metric(ns.http_port, "rmq_namesrv_kv_bytes").await <= 65536.0);
    assert!(refusals(&ns, "maxKvBytes").await >= 1.0);
    assert!(refusals(&ns, "maxKvEntries").await >= 1.0);
    assert_eq!(refusals(&ns, "maxKvValueLength").await, 1.0);
    let file = std::fs::metadata(ns.data_dir().join("kvConfig.json")).expect("kv file");
    assert!(
        file.len() <= 80 * 1024,
        "kvConfig.json is {} bytes",
        file.len()
    );
    let grown_kib = rss_kib(&ns).saturating_sub(baseline);
    // 64 KiB of entries and the copies a put persists; 3 MiB of values without the caps.
    assert!(
        grown_kib < 32 * 1024,
        "resident memory grew {grown_kib} KiB"
    );

    assert!(ns.running(), "the nameserver died; log:\n{}", ns.log());
    let reader = Client::connect(ns.port)
        .await
        .expect("a fresh client connects");
    let r = reader
        .request(get_kv("ORDER_TOPIC_CONFIG", "VictimTopic"))
        .await
        .expect("get");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.ext_fields.get("value"), Some("victim:4"));
    let broker =
        FakeBroker::new("DefaultCluster", "victim", VICTIM_ADDR, 0).topic("VictimTopic", 4);
    let r = reader
        .request(broker.register(false))
        .await
        .expect("victim registers");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    assert!(String::from_utf8_lossy(&r.body).contains("victim:4"));
    victim_route_is_served(&mut ns, "VictimTopic").await;
}
