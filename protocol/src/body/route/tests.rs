use super::*;

fn sample() -> TopicRouteData {
    TopicRouteData {
        order_topic_conf: None,
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_sys_flag: 0,
        }],
        broker_datas: vec![BrokerData {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_addrs: [
                (0, "192.168.0.10:10911".into()),
                (1, "192.168.0.11:10911".into()),
            ]
            .into_iter()
            .collect(),
            enable_acting_master: None,
            grpc_addrs: BTreeMap::new(),
        }],
        filter_server_table: Default::default(),
    }
}

/// The standard-JSON route a 4.9 nameserver answers, byte for byte.
const GOLDEN_STANDARD: &str = r#"{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.10:10911","1":"192.168.0.11:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;

#[test]
fn golden_standard_encoding() {
    let bytes = sample().encode(RouteEncoding::Standard);
    assert_eq!(std::str::from_utf8(&bytes).unwrap(), GOLDEN_STANDARD);
    assert_eq!(
        TopicRouteData::decode(GOLDEN_STANDARD.as_bytes()).unwrap(),
        sample()
    );
}

#[test]
fn golden_legacy_encoding() {
    let legacy = GOLDEN_STANDARD
        .replace(r#"{"0":"#, "{0:")
        .replace(r#","1":"#, ",1:");
    let bytes = sample().encode(RouteEncoding::Legacy);
    assert_eq!(std::str::from_utf8(&bytes).unwrap(), legacy);
    assert!(legacy.contains(r#""brokerAddrs":{0:"192.168.0.10:10911",1:"192.168.0.11:10911"}"#));
    assert_eq!(TopicRouteData::decode(legacy.as_bytes()).unwrap(), sample());
}

#[test]
fn encoding_choice_follows_version_and_flag() {
    assert_eq!(
        RouteEncoding::for_request(409, None),
        RouteEncoding::Standard
    );
    assert_eq!(
        RouteEncoding::for_request(401, Some(false)),
        RouteEncoding::Standard
    );
    assert_eq!(RouteEncoding::for_request(400, None), RouteEncoding::Legacy);
    assert_eq!(
        RouteEncoding::for_request(317, Some(true)),
        RouteEncoding::Standard
    );
    assert_eq!(
        RouteEncoding::for_request(333, Some(false)),
        RouteEncoding::Legacy
    );
}

#[test]
fn order_topic_conf_and_old_field_name() {
    let mut route = sample();
    route.order_topic_conf = Some("broker-a:4".into());
    let text = String::from_utf8(route.encode(RouteEncoding::Legacy)).unwrap();
    assert!(text.starts_with(r#"{"brokerDatas""#));
    assert!(text.contains(r#""orderTopicConf":"broker-a:4""#));
    let old = r#"{"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":1,"topicSynFlag":3,"writeQueueNums":1}],"brokerDatas":[]}"#;
    let decoded = TopicRouteData::decode(old.as_bytes()).unwrap();
    assert_eq!(decoded.queue_datas[0].topic_sys_flag, 3);
}

#[test]
fn v5_fields_are_added_only_on_request() {
    let mut route = sample();
    route.fill_v5_fields();
    let text = String::from_utf8(route.encode(RouteEncoding::Standard)).unwrap();
    assert!(
        text.contains(r#""cluster":"DefaultCluster","enableActingMaster":false}"#),
        "{text}"
    );
    assert_eq!(TopicRouteData::decode(text.as_bytes()).unwrap(), route);
    let mut info = ClusterInfo::default();
    info.broker_addr_table
        .insert("broker-a".into(), sample().broker_datas.remove(0));
    info.fill_v5_fields();
    assert!(
        String::from_utf8(info.encode())
            .unwrap()
            .contains(r#""enableActingMaster":false"#)
    );
}

#[test]
fn grpc_addrs_are_omitted_when_empty_and_quoted_in_both_encodings() {
    // Empty: byte-identical to 4.9 (the golden tests above hold the same sample).
    for encoding in [RouteEncoding::Standard, RouteEncoding::Legacy] {
        let text = String::from_utf8(sample().encode(encoding)).unwrap();
        assert!(!text.contains("grpcAddrs"), "{text}");
    }
    let mut route = sample();
    route.broker_datas[0].grpc_addrs = [(0, "192.168.0.10:8081".to_owned())].into();
    let standard = String::from_utf8(route.encode(RouteEncoding::Standard)).unwrap();
    let with_grpc = GOLDEN_STANDARD.replace(
        r#""cluster":"DefaultCluster"}"#,
        r#""cluster":"DefaultCluster","grpcAddrs":{"0":"192.168.0.10:8081"}}"#,
    );
    assert_eq!(standard, with_grpc);
    // The legacy encoding unquotes `brokerAddrs` keys only: `grpcAddrs` stays
    // standard JSON whatever a client's parser makes of unknown properties.
    let legacy = String::from_utf8(route.encode(RouteEncoding::Legacy)).unwrap();
    assert!(
        legacy.contains(r#""brokerAddrs":{0:"192.168.0.10:10911",1:"#),
        "{legacy}"
    );
    assert!(
        legacy.contains(r#""grpcAddrs":{"0":"192.168.0.10:8081"}"#),
        "{legacy}"
    );
    for text in [standard, legacy] {
        assert_eq!(TopicRouteData::decode(text.as_bytes()).unwrap(), route);
    }
    // A 4.9-shaped route (no such property, `null` maps) still parses.
    let old = r#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"b","cluster":"c"}],"filterServerTable":{},"queueDatas":[]}"#;
    let decoded = TopicRouteData::decode(old.as_bytes()).unwrap();
    assert!(decoded.broker_datas[0].grpc_addrs.is_empty());
    let nulls = r#"{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"b","grpcAddrs":null}],"queueDatas":[]}"#;
    assert!(
        TopicRouteData::decode(nulls.as_bytes())
            .unwrap()
            .broker_datas[0]
            .grpc_addrs
            .is_empty()
    );
}

#[test]
fn cluster_info_uses_unquoted_ids() {
    let mut info = ClusterInfo::default();
    let bd = sample().broker_datas.remove(0);
    info.broker_addr_table.insert("broker-a".into(), bd);
    info.cluster_addr_table.insert(
        "DefaultCluster".into(),
        ["broker-a".to_string()].into_iter().collect(),
    );
    let text = String::from_utf8(info.encode()).unwrap();
    assert_eq!(
        text,
        r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.0.10:10911",1:"192.168.0.11:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#
    );
    assert_eq!(ClusterInfo::decode(text.as_bytes()).unwrap(), info);
}

mod props {
    use proptest::prelude::*;

    use super::super::*;

    fn arb_route() -> impl Strategy<Value = TopicRouteData> {
        let qd = ("[a-z-]{1,8}", 0..64i32, 0..64i32, 0..16i32, 0..4i32).prop_map(
            |(broker_name, read_queue_nums, write_queue_nums, perm, topic_sys_flag)| QueueData {
                broker_name,
                read_queue_nums,
                write_queue_nums,
                perm,
                topic_sys_flag,
            },
        );
        let bd = (
            "[A-Za-z]{1,8}",
            "[a-z-]{1,8}",
            prop::collection::btree_map(0..4i64, "[0-9.:]{1,21}", 0..3),
        )
            .prop_map(|(cluster, broker_name, broker_addrs)| BrokerData {
                cluster,
                broker_name,
                broker_addrs,
                enable_acting_master: None,
                grpc_addrs: BTreeMap::new(),
            });
        (
            prop::option::of("[a-z:;0-9-]{0,12}"),
            prop::collection::vec(qd, 0..4),
            prop::collection::vec(bd, 0..4),
        )
            .prop_map(
                |(order_topic_conf, queue_datas, broker_datas)| TopicRouteData {
                    order_topic_conf,
                    queue_datas,
                    broker_datas,
                    filter_server_table: Default::default(),
                },
            )
    }

    proptest! {
        #[test]
        fn both_encodings_round_trip(route in arb_route()) {
            for enc in [RouteEncoding::Standard, RouteEncoding::Legacy] {
                let bytes = route.encode(enc);
                prop_assert_eq!(&TopicRouteData::decode(&bytes).unwrap(), &route);
            }
        }

        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = TopicRouteData::decode(&bytes);
            let _ = ClusterInfo::decode(&bytes);
        }
    }
}
