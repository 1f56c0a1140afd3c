//! Round trips and client-dialect parsing of the smaller bodies.

use proptest::prelude::*;

use super::*;

#[test]
fn heartbeat_from_java_text() {
    let java = r#"{"clientID":"10.0.0.5@12345#1234567890","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"g1","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"TopicTest"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"pg1"}]}"#;
    let hb: HeartbeatData = decode(java.as_bytes()).unwrap();
    assert_eq!(hb.client_id, "10.0.0.5@12345#1234567890");
    assert_eq!(hb.producer_data_set.len(), 2);
    let c = &hb.consumer_data_set[0];
    assert_eq!(c.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(c.message_model, MessageModel::Clustering);
    assert_eq!(
        c.subscription_data_set[0].code_set.iter().next(),
        Some(&2598919)
    );
    // Re-encoding yields the same text: properties sorted, enums by name.
    assert_eq!(String::from_utf8(encode(&hb)).unwrap(), java);
}

#[test]
fn heartbeat_from_cpp_client() {
    // Ordinals for enums, subVersion as a string, optional properties omitted.
    let cpp = r#"{"clientID":"1.2.3.4@99","consumerDataSet":[{"consumeFromWhere":4,"consumeType":0,"groupName":"g","messageModel":0,"subscriptionDataSet":[{"subString":"*","subVersion":"1700000000001","topic":"T"}]}],"producerDataSet":[]}"#;
    let hb: HeartbeatData = decode(cpp.as_bytes()).unwrap();
    let c = &hb.consumer_data_set[0];
    assert_eq!(
        c.consume_from_where,
        ConsumeFromWhere::ConsumeFromFirstOffset
    );
    assert_eq!(c.consume_type, ConsumeType::ConsumeActively);
    assert_eq!(c.message_model, MessageModel::Broadcasting);
    let s = &c.subscription_data_set[0];
    assert_eq!(
        (s.sub_version, s.expression_type.as_str()),
        (1_700_000_000_001, "TAG")
    );
    assert!(s.tags_set.is_empty() && !c.unit_mode);
    assert!(decode::<HeartbeatData>(br#"{"consumerDataSet":[{"groupName":"g","consumeType":7,"messageModel":0,"consumeFromWhere":0}]}"#).is_err());
}

#[test]
fn small_bodies_match_reference_shapes() {
    let mut kv = KvTable::default();
    kv.table.insert("k".into(), "v".into());
    assert_eq!(encode(&kv), br#"{"table":{"k":"v"}}"#);
    let list = TopicList {
        topic_list: ["b".to_string(), "a".to_string()].into_iter().collect(),
        broker_addr: None,
    };
    assert_eq!(encode(&list), br#"{"topicList":["a","b"]}"#);
    let consumers = ConsumerListBody {
        consumer_id_list: vec!["c1".into()],
    };
    assert_eq!(encode(&consumers), br#"{"consumerIdList":["c1"]}"#);
    let mq = MessageQueue {
        topic: "t".into(),
        broker_name: "b".into(),
        queue_id: 0,
    };
    assert_eq!(
        encode(&mq),
        br#"{"brokerName":"b","queueId":0,"topic":"t"}"#
    );
    let lock: LockBatchRequestBody = decode(
        br#"{"clientId":"c","consumerGroup":"g","mqSet":[{"brokerName":"b","queueId":0,"topic":"t"}]}"#,
    )
    .unwrap();
    assert!(lock.mq_set.contains(&mq));
    let resp = LockBatchResponseBody {
        lock_ok_mq_set: lock.mq_set.clone(),
    };
    assert_eq!(
        encode(&resp),
        br#"{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"t"}]}"#
    );
    let dv: DataVersion = decode(br#"{"counter":"7","timestamp":1}"#).unwrap();
    assert_eq!(
        dv,
        DataVersion {
            timestamp: 1,
            counter: 7
        }
    );
    assert_eq!(
        dv.next(5),
        DataVersion {
            timestamp: 5,
            counter: 8
        }
    );
}

#[test]
fn wrapper_with_nulls_and_defaults() {
    let w: TopicConfigSerializeWrapper =
        decode(br#"{"topicConfigTable":{"T":{"topicName":"T"}},"dataVersion":null}"#).unwrap();
    let t = &w.topic_config_table["T"];
    assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (16, 16, 6));
    assert_eq!(w.data_version, DataVersion::default());
}

proptest! {
    #[test]
    fn kv_and_lists_round_trip(
        table in prop::collection::btree_map(".{0,8}", ".{0,8}", 0..5),
        topics in prop::collection::btree_set(".{0,8}", 0..5),
        addr in prop::option::of("[0-9.:]{1,21}"),
    ) {
        let kv = KvTable { table };
        prop_assert_eq!(&decode::<KvTable>(&encode(&kv)).unwrap(), &kv);
        let list = TopicList { topic_list: topics, broker_addr: addr };
        prop_assert_eq!(&decode::<TopicList>(&encode(&list)).unwrap(), &list);
    }

    #[test]
    fn heartbeat_round_trips(
        client_id in ".{0,12}",
        groups in prop::collection::vec(("[a-z]{1,6}", 0..2u64, 0..2u64, 0..6u64, any::<i64>(), any::<bool>()), 0..3),
    ) {
        let hb = HeartbeatData {
            client_id,
            producer_data_set: vec![ProducerData { group_name: "p".into() }],
            consumer_data_set: groups.into_iter().map(|(g, ct, mm, cfw, ver, unit)| ConsumerData {
                group_name: g.clone(),
                consume_type: ConsumeType::from_ordinal(ct).unwrap(),
                message_model: MessageModel::from_ordinal(mm).unwrap(),
                consume_from_where: ConsumeFromWhere::from_ordinal(cfw).unwrap(),
                subscription_data_set: vec![SubscriptionData {
                    class_filter_mode: false,
                    topic: g,
                    sub_string: "*".into(),
                    tags_set: Default::default(),
                    code_set: Default::default(),
                    sub_version: ver,
                    expression_type: "TAG".into(),
                }],
                unit_mode: unit,
            }).collect(),
        };
        prop_assert_eq!(&decode::<HeartbeatData>(&encode(&hb)).unwrap(), &hb);
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode::<HeartbeatData>(&bytes);
        let _ = decode::<LockBatchRequestBody>(&bytes);
        let _ = decode::<TopicConfigSerializeWrapper>(&bytes);
    }
}
