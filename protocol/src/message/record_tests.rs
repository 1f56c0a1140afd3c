use std::net::SocketAddr;

use proptest::prelude::*;

use super::*;

fn v4(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn sample<'a>(body: &'a [u8], topic: &'a str, props: &'a str) -> MessageRecord<'a> {
    MessageRecord {
        queue_id: 3,
        flag: 7,
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_123,
        born_host: v4("192.168.1.10:54321"),
        reconsume_times: 2,
        prepared_transaction_offset: PhysicalOffset(0),
        body,
        body_crc: None,
        topic,
        properties: props,
    }
}

fn stamp() -> StoreStamp {
    StoreStamp {
        queue_offset: QueueOffset(42),
        physical_offset: PhysicalOffset(1_073_741_824),
        store_timestamp: 1_700_000_000_456,
        store_host: v4("10.0.0.1:10911"),
    }
}

/// The record written out field by field from `CommitLog.MessageExtEncoder`'s field order.
#[test]
fn layout_matches_reference_table() {
    let rec = sample(b"hi", "T", "K\u{1}V");
    let bytes = rec.encode_to_vec(&stamp()).unwrap();

    let mut want = Vec::new();
    want.extend_from_slice(&(91 + 2 + 1 + 3i32).to_be_bytes());
    want.extend_from_slice(&[0xDA, 0xA3, 0x20, 0xA7]);
    want.extend_from_slice(&((crc32fast::hash(b"hi") & 0x7FFF_FFFF) as i32).to_be_bytes());
    want.extend_from_slice(&3i32.to_be_bytes());
    want.extend_from_slice(&7i32.to_be_bytes());
    want.extend_from_slice(&42i64.to_be_bytes());
    want.extend_from_slice(&1_073_741_824i64.to_be_bytes());
    want.extend_from_slice(&0i32.to_be_bytes());
    want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
    want.extend_from_slice(&[192, 168, 1, 10, 0, 0, 0xD4, 0x31]);
    want.extend_from_slice(&1_700_000_000_456i64.to_be_bytes());
    want.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0x2A, 0x9F]);
    want.extend_from_slice(&2i32.to_be_bytes());
    want.extend_from_slice(&0i64.to_be_bytes());
    want.extend_from_slice(&[0, 0, 0, 2, b'h', b'i']);
    want.extend_from_slice(&[1, b'T']);
    want.extend_from_slice(&[0, 3, b'K', 1, b'V']);
    assert_eq!(bytes, want);
    assert_eq!(
        &bytes[84..88],
        &[0, 0, 0, 2],
        "body length at 84 for IPv4 hosts"
    );
    assert_eq!(record_len(MessageSysFlag(0), 2, 1, 3), bytes.len());
}

#[test]
fn round_trip_all_host_families() {
    let hosts = [v4("1.2.3.4:1"), "[fe80::1:2]:65535".parse().unwrap()];
    for born in hosts {
        for store in hosts {
            let mut rec = sample(b"body bytes", "TopicA", "TAGS\u{1}a\u{2}KEYS\u{1}k1 k2");
            rec.sys_flag = MessageSysFlag(MessageSysFlag::TRANSACTION_COMMIT_TYPE)
                .with_host_families(&born, &store);
            rec.born_host = born;
            rec.prepared_transaction_offset = PhysicalOffset(99);
            let st = StoreStamp {
                store_host: store,
                ..stamp()
            };
            let bytes = rec.encode_to_vec(&st).unwrap();
            assert_eq!(
                bytes.len(),
                91 + 10 + 6 + 17 + 12 * (born.is_ipv6() as usize + store.is_ipv6() as usize)
            );
            let view = decode(&bytes, true).unwrap();
            assert_eq!(view.total_size(), bytes.len());
            assert_eq!(
                view.to_message_record(),
                MessageRecord {
                    body_crc: Some(body_crc(rec.body)),
                    ..rec
                }
            );
            assert_eq!(view.store_stamp(), st);
            assert_eq!(view.store_host_bytes().len(), rec.sys_flag.store_host_len());
            assert_eq!(view.topic(), "TopicA");
            let head = peek_head(&bytes).unwrap();
            assert_eq!(head.total_size as usize, bytes.len());
            assert_eq!(head.magic, MESSAGE_MAGIC_CODE);
            assert_eq!(head.physical_offset, st.physical_offset);
            assert_eq!(head.store_timestamp, st.store_timestamp);
            let layout = RecordLayout::of(rec.sys_flag);
            assert_eq!(read_i32(&bytes, layout.body_len()) as usize, rec.body.len());
            assert_eq!(&bytes[layout.body()..][..rec.body.len()], rec.body);
            // A head cut anywhere before its STORETIMESTAMP ends is refused, not read.
            for cut in 0..layout.store_timestamp() + 8 {
                assert_eq!(peek_head(&bytes[..cut]), None, "cut at {cut}");
            }
            assert!(layout.store_timestamp() + 8 <= MAX_HEAD_LEN);
        }
    }
}

#[test]
fn encoder_rejects_bad_input_without_writing() {
    let st = stamp();
    let long_topic = "t".repeat(128);
    assert_eq!(
        sample(b"", &long_topic, "").encode_to_vec(&st),
        Err(EncodeError::TopicTooLong(128))
    );
    let long_props = "p".repeat(32768);
    assert_eq!(
        sample(b"", "T", &long_props).encode_to_vec(&st),
        Err(EncodeError::PropertiesTooLong(32768))
    );
    let mut rec = sample(b"", "T", "");
    rec.born_host = "[::1]:1".parse().unwrap();
    assert!(matches!(
        rec.encode_to_vec(&st),
        Err(EncodeError::HostFamilyMismatch { which: "born", .. })
    ));
    let rec = sample(b"x", "T", "");
    let mut out = vec![0xEE; rec.encoded_len() + 1];
    assert_eq!(
        rec.encode_into(&st, &mut out),
        Err(EncodeError::BufferSize {
            expected: rec.encoded_len(),
            actual: rec.encoded_len() + 1
        })
    );
    assert!(out.iter().all(|b| *b == 0xEE));
}

#[test]
fn decode_outcomes() {
    let rec = sample(b"payload", "T", "A\u{1}B");
    let bytes = rec.encode_to_vec(&stamp()).unwrap();

    for cut in 0..bytes.len() {
        let err = decode(&bytes[..cut], false).unwrap_err();
        assert!(
            matches!(err, RecordError::Truncated { .. }),
            "prefix {cut}: {err:?}"
        );
    }

    let mut blank = vec![0u8; 64];
    blank[..4].copy_from_slice(&4096i32.to_be_bytes());
    blank[4..8].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
    assert_eq!(decode(&blank, true), Err(RecordError::Blank { size: 4096 }));
    assert_eq!(
        decode(&blank[..8], true),
        Err(RecordError::Blank { size: 4096 })
    );

    assert_eq!(decode(&[0; 100], true), Err(RecordError::Unwritten));
    assert_eq!(decode(&[0; 5], true), Err(RecordError::Unwritten));

    let mut bad = bytes.clone();
    bad[4] ^= 1;
    assert!(matches!(decode(&bad, false), Err(RecordError::BadMagic(_))));

    let mut bad = bytes.clone();
    let last_body_byte = 88 + 6;
    bad[last_body_byte] ^= 0x20;
    assert!(decode(&bad, false).is_ok());
    assert!(matches!(
        decode(&bad, true),
        Err(RecordError::BadCrc { .. })
    ));

    // Body length one larger than written: lengths no longer add up.
    let mut bad = bytes.clone();
    bad[87] += 1;
    assert!(matches!(
        decode(&bad, false),
        Err(RecordError::InconsistentLength { .. })
    ));
    let mut bad = bytes.clone();
    bad[84] = 0x80;
    assert!(matches!(
        decode(&bad, false),
        Err(RecordError::InvalidField {
            field: "bodyLength",
            ..
        })
    ));

    let mut bad = bytes.clone();
    bad[..4].copy_from_slice(&10i32.to_be_bytes());
    assert!(matches!(
        decode(&bad, false),
        Err(RecordError::InvalidField {
            field: "totalSize",
            ..
        })
    ));

    // Extra bytes after the record are the next record's business.
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes);
    let views: Vec<_> = records(&two, true).collect::<Result<_, _>>().unwrap();
    assert_eq!(views.len(), 2);
    assert_eq!(views[1].body(), b"payload");
    let mut tail = bytes.clone();
    tail.extend_from_slice(&[0; 3]);
    let mut it = records(&tail, true);
    assert!(it.next().unwrap().is_ok());
    assert!(matches!(
        it.next(),
        Some(Err(RecordError::Truncated { .. }))
    ));
    assert!(it.next().is_none());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), crc: bool) {
        if let Ok(v) = decode(&bytes, crc) {
            prop_assert!(v.total_size() <= bytes.len());
            let _ = (v.body(), v.born_host(), v.store_host(), v.reconsume_times());
        }
        let _ = records(&bytes, crc).count();
    }

    #[test]
    fn random_records_with_valid_magic_never_panic(
        total in 0i32..400,
        tail in proptest::collection::vec(any::<u8>(), 0..400),
        crc: bool,
    ) {
        let mut bytes = total.to_be_bytes().to_vec();
        bytes.extend_from_slice(&MESSAGE_MAGIC_CODE.to_be_bytes());
        bytes.extend_from_slice(&tail);
        if let Ok(v) = decode(&bytes, crc) {
            let _ = (v.body(), v.born_host(), v.store_host(), v.reconsume_times(), v.store_timestamp());
        }
    }

    #[test]
    fn corrupted_records_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..64),
        pos in any::<prop::sample::Index>(),
        val: u8,
    ) {
        let rec = sample(&body, "T", "K\u{1}V");
        let mut bytes = rec.encode_to_vec(&stamp()).unwrap();
        let i = pos.index(bytes.len());
        bytes[i] = val;
        if let Ok(v) = decode(&bytes, false) {
            let _ = (v.body(), v.born_host(), v.store_host(), v.prepared_transaction_offset());
        }
    }

    #[test]
    fn encode_decode_round_trip(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        topic in "[%|a-zA-Z0-9_-]{0,127}",
        props in "\\PC{0,64}",
        queue_id: i32, flag: i32, sys in 0i32..0x800, born_ts: i64, store_ts: i64,
        reconsume: i32, qo: i64, po: i64, pto: i64,
        born6: bool, store6: bool, port: u16,
    ) {
        let born: SocketAddr = if born6 { format!("[2001:db8::7]:{port}") } else { format!("9.8.7.6:{port}") }.parse().unwrap();
        let store: SocketAddr = if store6 { "[::2]:10911".parse().unwrap() } else { v4("127.0.0.1:10911") };
        let rec = MessageRecord {
            queue_id, flag,
            sys_flag: MessageSysFlag(sys).with_host_families(&born, &store),
            born_timestamp: born_ts, born_host: born, reconsume_times: reconsume,
            prepared_transaction_offset: PhysicalOffset(pto),
            body: &body, body_crc: None, topic: &topic, properties: &props,
        };
        let st = StoreStamp { queue_offset: QueueOffset(qo), physical_offset: PhysicalOffset(po), store_timestamp: store_ts, store_host: store };
        let bytes = rec.encode_to_vec(&st).unwrap();
        prop_assert_eq!(bytes.len(), rec.encoded_len());
        let v = decode(&bytes, true).unwrap();
        prop_assert_eq!(v.to_message_record(), MessageRecord { body_crc: Some(body_crc(&body)), ..rec });
        prop_assert_eq!(v.store_stamp(), st);
        prop_assert_eq!(properties_of(&bytes), Ok(props.as_bytes()));
    }
}
