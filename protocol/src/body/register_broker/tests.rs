use proptest::prelude::*;

use super::*;
use crate::body::TopicFilterType;

fn sample() -> RegisterBrokerBody {
    let mut body = RegisterBrokerBody::default();
    let wrapper = &mut body.topic_config_serialize_wrapper;
    wrapper.data_version = DataVersion {
        timestamp: 1_700_000_000_000,
        counter: 3,
    };
    let mut t = TopicConfig::new("TopicTest");
    t.read_queue_nums = 4;
    t.write_queue_nums = 4;
    wrapper.topic_config_table.insert(t.topic_name.clone(), t);
    body
}

#[test]
fn plain_matches_reference_layout() {
    let text = String::from_utf8(sample().encode(false)).unwrap();
    assert_eq!(
        text,
        r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}"#
    );
    assert_eq!(
        RegisterBrokerBody::decode(text.as_bytes(), false).unwrap(),
        sample()
    );
}

#[test]
fn compressed_layout_is_length_prefixed_inside_zlib() {
    let bytes = sample().encode(true);
    let mut plain = Vec::new();
    ZlibDecoder::new(&bytes[..])
        .read_to_end(&mut plain)
        .unwrap();
    let dv = br#"{"counter":3,"timestamp":1700000000000}"#;
    let mut expected = Vec::new();
    expected.extend_from_slice(&(dv.len() as i32).to_be_bytes());
    expected.extend_from_slice(dv);
    expected.extend_from_slice(&1i32.to_be_bytes());
    let line = b"TopicTest 4 4 6 SINGLE_TAG";
    expected.extend_from_slice(&(line.len() as i32).to_be_bytes());
    expected.extend_from_slice(line);
    expected.extend_from_slice(&2i32.to_be_bytes());
    expected.extend_from_slice(b"[]");
    assert_eq!(plain, expected);
    assert_eq!(RegisterBrokerBody::decode(&bytes, true).unwrap(), sample());
}

#[test]
fn compressed_drops_sys_flag_and_order_like_java() {
    let mut body = sample();
    let t = body
        .topic_config_serialize_wrapper
        .topic_config_table
        .get_mut("TopicTest")
        .unwrap();
    t.order = true;
    t.topic_sys_flag = 1;
    t.topic_filter_type = TopicFilterType::MultiTag;
    let back = RegisterBrokerBody::decode(&body.encode(true), true).unwrap();
    let t = &back.topic_config_serialize_wrapper.topic_config_table["TopicTest"];
    assert_eq!((t.order, t.topic_sys_flag), (false, 0));
    assert_eq!(t.topic_filter_type, TopicFilterType::MultiTag);
}

#[test]
fn inflate_is_capped() {
    // 1 MiB of zeros compresses to ~1 KiB.
    let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
    enc.write_all(&vec![0u8; 1 << 20]).unwrap();
    let bomb = enc.finish().unwrap();
    assert!(matches!(
        RegisterBrokerBody::decode_with_limit(&bomb, true, 64 * 1024),
        Err(BodyError::InflatedTooLarge(_))
    ));
}

#[test]
fn corrupt_compressed_bodies_are_errors() {
    let deflate = |plain: &[u8]| {
        let mut enc = ZlibEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(plain).unwrap();
        enc.finish().unwrap()
    };
    assert!(RegisterBrokerBody::decode(b"not zlib", true).is_err());
    assert!(RegisterBrokerBody::decode(&deflate(&i32::MAX.to_be_bytes()), true).is_err());
    assert!(RegisterBrokerBody::decode(&deflate(&(-1i32).to_be_bytes()), true).is_err());
    let mut huge_count = Vec::new();
    huge_count.extend_from_slice(&2i32.to_be_bytes());
    huge_count.extend_from_slice(b"{}");
    huge_count.extend_from_slice(&i32::MAX.to_be_bytes());
    assert!(RegisterBrokerBody::decode(&deflate(&huge_count), true).is_err());
}

fn arb_body() -> impl Strategy<Value = RegisterBrokerBody> {
    let topic = (
        "[A-Za-z0-9_%-]{1,12}",
        0..64i32,
        0..64i32,
        0..8i32,
        any::<bool>(),
    )
        .prop_map(|(name, r, w, perm, multi)| {
            let mut t = TopicConfig::new(name);
            t.read_queue_nums = r;
            t.write_queue_nums = w;
            t.perm = perm;
            if multi {
                t.topic_filter_type = TopicFilterType::MultiTag;
            }
            t
        });
    (
        prop::collection::vec(topic, 0..6),
        any::<i64>(),
        any::<i64>(),
        prop::collection::vec("[0-9.:]{1,12}", 0..3),
    )
        .prop_map(|(topics, timestamp, counter, filter_server_list)| {
            let mut body = RegisterBrokerBody {
                filter_server_list,
                ..Default::default()
            };
            let w = &mut body.topic_config_serialize_wrapper;
            w.data_version = DataVersion { timestamp, counter };
            for t in topics {
                w.topic_config_table.insert(t.topic_name.clone(), t);
            }
            body
        })
}

proptest! {
    #[test]
    fn both_forms_round_trip(body in arb_body()) {
        prop_assert_eq!(&RegisterBrokerBody::decode(&body.encode(false), false).unwrap(), &body);
        prop_assert_eq!(&RegisterBrokerBody::decode(&body.encode(true), true).unwrap(), &body);
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300), compressed in any::<bool>()) {
        let _ = RegisterBrokerBody::decode(&bytes, compressed);
    }
}
