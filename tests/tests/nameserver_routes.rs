//! Registration and route queries against a real rmq-nameserver process.
#![allow(clippy::unwrap_used)]

use e2e::broker::FakeBroker;
use e2e::nameserver::Options;
use e2e::{Client, NameServer};
use protocol::body::{self, ClusterInfo, DataVersion, TopicList, TopicRouteData};
use protocol::code::{request, response};
use protocol::header::{
    AddWritePermOfBrokerRequestHeader, DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader, GetTopicsByClusterRequestHeader, QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader, RegisterBrokerResponseHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
use protocol::{RemotingCommand, SerializeType};

fn route_request(topic: &str, version: i32, accept_standard: Option<bool>) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(
        request::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: accept_standard,
        },
    );
    cmd.version = version;
    cmd
}

async fn route(client: &Client, topic: &str) -> Option<TopicRouteData> {
    let r = client
        .request(route_request(topic, 409, None))
        .await
        .unwrap();
    match r.code {
        response::SUCCESS => Some(TopicRouteData::decode(&r.body).unwrap()),
        response::TOPIC_NOT_EXIST => None,
        other => panic!("unexpected route response {other}: {:?}", r.remark),
    }
}

#[tokio::test]
async fn master_and_slave_register_and_routes_come_in_both_encodings() {
    let ns = NameServer::start(Options::default());
    let master_conn = Client::connect(ns.port).await.unwrap();
    let slave_conn = Client::connect(ns.port).await.unwrap();
    let admin = Client::connect(ns.port).await.unwrap();

    let master =
        FakeBroker::new("DefaultCluster", "broker-a", "127.0.0.1:10911", 0).topic("TopicTest", 4);
    let r = master_conn.request(master.register(false)).await.unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let h: RegisterBrokerResponseHeader = r.header().unwrap();
    assert_eq!((h.master_addr, h.ha_server_addr), (None, None));

    // The slave reports different queue numbers: only the master's count.
    let slave =
        FakeBroker::new("DefaultCluster", "broker-a", "127.0.0.1:20911", 1).topic("TopicTest", 8);
    let r = slave_conn.request(slave.register(false)).await.unwrap();
    assert_eq!(r.code, response::SUCCESS);
    let h: RegisterBrokerResponseHeader = r.header().unwrap();
    assert_eq!(h.master_addr.as_deref(), Some("127.0.0.1:10911"));
    assert_eq!(h.ha_server_addr, Some(master.ha_addr()));

    // 4.9.4+ clients: standard JSON.
    let r = admin
        .request(route_request("TopicTest", 409, None))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS);
    let text = std::str::from_utf8(&r.body).unwrap();
    assert!(
        text.contains(r#""brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:20911"}"#),
        "{text}"
    );
    assert!(serde_json::from_slice::<serde_json::Value>(&r.body).is_ok());
    let standard = TopicRouteData::decode(&r.body).unwrap();
    assert_eq!(standard.queue_datas.len(), 1);
    assert_eq!(standard.queue_datas[0].write_queue_nums, 4);
    assert_eq!(standard.queue_datas[0].perm, 6);

    // Older clients: fastjson's unquoted numeric keys.
    let r = admin
        .request(route_request("TopicTest", 317, None))
        .await
        .unwrap();
    let text = std::str::from_utf8(&r.body).unwrap();
    assert!(
        text.contains(r#""brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:20911"}"#),
        "{text}"
    );
    assert!(serde_json::from_slice::<serde_json::Value>(&r.body).is_err());
    assert_eq!(TopicRouteData::decode(&r.body).unwrap(), standard);

    assert!(!text.contains("enableActingMaster"));
    // RocketMQ 5 clients (version >= 413) also get the 5.x BrokerData property.
    let r = admin
        .request(route_request("TopicTest", 413, None))
        .await
        .unwrap();
    let text = std::str::from_utf8(&r.body).unwrap();
    assert!(text.contains(r#""enableActingMaster":false"#), "{text}");

    // acceptStandardJsonOnly overrides an old version.
    let r = admin
        .request(route_request("TopicTest", 317, Some(true)))
        .await
        .unwrap();
    assert!(std::str::from_utf8(&r.body).unwrap().contains(r#"{"0":"#));

    let r = admin
        .request(route_request("NoSuchTopic", 409, None))
        .await
        .unwrap();
    assert_eq!(r.code, response::TOPIC_NOT_EXIST);
    assert!(r.remark.unwrap().contains("NoSuchTopic"));

    // Cluster info keeps fastjson's default (unquoted ids).
    let r = admin
        .request(RemotingCommand::bare_request(
            request::GET_BROKER_CLUSTER_INFO,
        ))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS);
    assert!(
        std::str::from_utf8(&r.body)
            .unwrap()
            .contains(r#"{0:"127.0.0.1:10911""#)
    );
    let info = ClusterInfo::decode(&r.body).unwrap();
    assert!(info.cluster_addr_table["DefaultCluster"].contains("broker-a"));
    assert_eq!(info.broker_addr_table["broker-a"].broker_addrs.len(), 2);
}

#[tokio::test]
async fn compressed_registration_crc_and_data_version() {
    let ns = NameServer::start(Options::default());
    let conn = Client::connect(ns.port).await.unwrap();
    let mut broker = FakeBroker::new("C1", "broker-z", "127.0.0.1:30911", 0)
        .topic("Zipped1", 2)
        .topic("Zipped2", 3);
    let r = conn.request(broker.register(true)).await.unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    assert_eq!(
        route(&conn, "Zipped2").await.unwrap().queue_datas[0].read_queue_nums,
        3
    );

    let mut bad = broker.register(false);
    bad.ext_fields.insert("bodyCrc32", "12345");
    let r = conn.request(bad).await.unwrap();
    assert_eq!(r.code, response::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("crc32 not match"));

    let query = |version: DataVersion| {
        RemotingCommand::request(
            request::QUERY_DATA_VERSION,
            &QueryDataVersionRequestHeader {
                broker_name: "broker-z".into(),
                broker_addr: "127.0.0.1:30911".into(),
                cluster_name: "C1".into(),
                broker_id: 0,
            },
        )
        .with_body(body::encode(&version))
    };
    let r = conn.request(query(broker.data_version)).await.unwrap();
    assert_eq!(r.code, response::SUCCESS);
    let h: QueryDataVersionResponseHeader = r.header().unwrap();
    assert!(!h.changed);
    assert_eq!(
        body::decode::<DataVersion>(&r.body).unwrap(),
        broker.data_version
    );
    let newer = broker.data_version.next(1_800_000_000_000);
    let h: QueryDataVersionResponseHeader =
        conn.request(query(newer)).await.unwrap().header().unwrap();
    assert!(h.changed);

    // A new DataVersion makes the master's queue data change.
    broker.data_version = newer;
    broker.topics[0].write_queue_nums = 16;
    conn.request(broker.register(false)).await.unwrap();
    let r = route(&conn, "Zipped1").await.unwrap();
    assert_eq!(r.queue_datas[0].write_queue_nums, 16);
}

#[tokio::test]
async fn topic_lists_permissions_and_delete() {
    let ns = NameServer::start(Options::default());
    let conn = Client::connect(ns.port).await.unwrap();
    let a = FakeBroker::new("CA", "broker-a", "127.0.0.1:11911", 0)
        .topic("T1", 4)
        .topic("T2", 4);
    let b = FakeBroker::new("CB", "broker-b", "127.0.0.1:12911", 0)
        .topic("T2", 4)
        .topic("T3", 4);
    conn.request(a.register(false)).await.unwrap();
    conn.request(b.register(false)).await.unwrap();

    let list = |r: RemotingCommand| {
        assert_eq!(r.code, response::SUCCESS);
        body::decode::<TopicList>(&r.body)
            .unwrap()
            .topic_list
            .into_iter()
            .collect::<Vec<_>>()
    };
    let all = conn
        .request(RemotingCommand::bare_request(
            request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        ))
        .await
        .unwrap();
    assert_eq!(list(all), ["T1", "T2", "T3"]);
    let by_cluster = conn
        .request(RemotingCommand::request(
            request::GET_TOPICS_BY_CLUSTER,
            &GetTopicsByClusterRequestHeader {
                cluster: "CB".into(),
            },
        ))
        .await
        .unwrap();
    assert_eq!(list(by_cluster), ["T2", "T3"]);
    let system = conn
        .request(RemotingCommand::bare_request(
            request::GET_SYSTEM_TOPIC_LIST_FROM_NS,
        ))
        .await
        .unwrap();
    assert_eq!(list(system), ["CA", "CB", "broker-a", "broker-b"]);
    for code in [
        request::GET_UNIT_TOPIC_LIST,
        request::GET_HAS_UNIT_SUB_TOPIC_LIST,
        request::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    ] {
        let r = conn
            .request(RemotingCommand::bare_request(code))
            .await
            .unwrap();
        assert!(list(r).is_empty());
    }

    let r = conn
        .request(RemotingCommand::request(
            request::WIPE_WRITE_PERM_OF_BROKER,
            &WipeWritePermOfBrokerRequestHeader {
                broker_name: "broker-a".into(),
            },
        ))
        .await
        .unwrap();
    let h: WipeWritePermOfBrokerResponseHeader = r.header().unwrap();
    assert_eq!(h.wipe_topic_count, 2);
    let t2 = route(&conn, "T2").await.unwrap();
    let perm_of = |r: &TopicRouteData, name: &str| {
        r.queue_datas
            .iter()
            .find(|q| q.broker_name == name)
            .unwrap()
            .perm
    };
    assert_eq!((perm_of(&t2, "broker-a"), perm_of(&t2, "broker-b")), (4, 6));
    let r = conn
        .request(RemotingCommand::request(
            request::ADD_WRITE_PERM_OF_BROKER,
            &AddWritePermOfBrokerRequestHeader {
                broker_name: "broker-a".into(),
            },
        ))
        .await
        .unwrap();
    assert_eq!(r.ext_fields.get("addTopicCount"), Some("2"));
    assert_eq!(perm_of(&route(&conn, "T2").await.unwrap(), "broker-a"), 6);

    let delete = |topic: &str, cluster: Option<&str>| {
        RemotingCommand::request(
            request::DELETE_TOPIC_IN_NAMESRV,
            &DeleteTopicFromNamesrvRequestHeader {
                topic: topic.into(),
                cluster_name: cluster.map(str::to_owned),
            },
        )
    };
    assert_eq!(
        conn.request(delete("T2", Some("CA"))).await.unwrap().code,
        response::SUCCESS
    );
    let t2 = route(&conn, "T2").await.unwrap();
    assert_eq!(t2.queue_datas.len(), 1);
    assert_eq!(t2.queue_datas[0].broker_name, "broker-b");
    conn.request(delete("T2", None)).await.unwrap();
    assert!(route(&conn, "T2").await.is_none());

    // Unregistering broker-a removes its only topic.
    conn.request(a.unregister()).await.unwrap();
    assert!(route(&conn, "T1").await.is_none());
    assert!(route(&conn, "T3").await.is_some());
}

#[tokio::test]
async fn pipelined_requests_are_all_answered_and_binary_headers_mirrored() {
    let ns = NameServer::start(Options::default());
    let conn = Client::connect(ns.port).await.unwrap();
    let broker = FakeBroker::new("C", "b", "127.0.0.1:13911", 0).topic("P", 2);
    conn.request(broker.register(false)).await.unwrap();

    let mut batch = Vec::new();
    for i in 0..60 {
        batch.push(match i % 3 {
            0 => route_request("P", 409, None),
            1 => route_request("Missing", 409, None),
            _ => RemotingCommand::bare_request(5000 + i),
        });
    }
    let responses = conn.pipeline(batch).await.unwrap();
    assert_eq!(responses.len(), 60);
    for (i, r) in responses.iter().enumerate() {
        let expected = match i % 3 {
            0 => response::SUCCESS,
            1 => response::TOPIC_NOT_EXIST,
            _ => response::REQUEST_CODE_NOT_SUPPORTED,
        };
        assert_eq!(r.code, expected, "response {i}: {:?}", r.remark);
        assert!(r.is_response());
    }
    assert_eq!(conn.pending_count(), 0);

    let binary = route_request("P", 409, None).with_serialize_type(SerializeType::RocketMq);
    let r = conn.request(binary).await.unwrap();
    assert_eq!(r.code, response::SUCCESS);
    assert_eq!(r.serialize_type, SerializeType::RocketMq);
}
