use bytes::{BufMut, BytesMut};
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder};

use super::*;
use crate::{ExtFields, LanguageCode};

fn sample(serialize_type: SerializeType) -> RemotingCommand {
    RemotingCommand {
        code: 310,
        language: LanguageCode::Java,
        version: 409,
        opaque: 42,
        flag: 0,
        remark: Some("hé".into()),
        ext_fields: [("a", "group"), ("b", "topic"), ("e", "3")]
            .into_iter()
            .collect(),
        body: bytes::Bytes::from_static(b"hello"),
        serialize_type,
    }
}

#[test]
fn round_trip_both_serializations() {
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        let cmd = sample(st);
        let mut buf = BytesMut::new();
        RemotingCodec::default().encode(&cmd, &mut buf).unwrap();
        let back = RemotingCodec::default().decode(&mut buf).unwrap().unwrap();
        assert_eq!(back, cmd);
        assert!(buf.is_empty());
    }
}

/// Decoding copies no extFields value: a send header's string fields, read as
/// `SharedStr`, point into the received buffer (escaped JSON strings excepted).
#[test]
fn send_header_strings_share_the_frame() {
    use crate::header::{SendMessageRequestHeader, SendMessageRequestHeaderV2};
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        let v2 = SendMessageRequestHeaderV2 {
            a: "a-producer-group-longer-than-inline".into(),
            b: "TopicTest".into(),
            c: "TBW102".into(),
            i: Some("KEYS\u{1}k1\u{2}WAIT\u{1}true".into()),
            ..Default::default()
        };
        let cmd = RemotingCommand::request(310, &v2).with_serialize_type(st);
        let mut buf = BytesMut::new();
        RemotingCodec::default().encode(&cmd, &mut buf).unwrap();
        let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
        let back = RemotingCodec::default().decode(&mut buf).unwrap().unwrap();
        let h = SendMessageRequestHeader::read_for_code(back.code, &back.ext_fields).unwrap();
        for field in [&h.producer_group, &h.topic, &h.default_topic] {
            assert!(
                range.contains(&(field.as_ptr() as usize)),
                "{st:?} copied {field}"
            );
        }
        let properties = h.properties.unwrap();
        assert_eq!(properties, "KEYS\u{1}k1\u{2}WAIT\u{1}true");
        // JSON escapes the separators, so that value had to be rebuilt.
        assert_eq!(
            range.contains(&(properties.as_ptr() as usize)),
            st == SerializeType::RocketMq
        );
    }
}

#[test]
fn json_header_golden_bytes() {
    let mut cmd = sample(SerializeType::Json);
    cmd.remark = None;
    cmd.body = bytes::Bytes::new();
    let bytes = encode_to_vec(&cmd).unwrap();
    let header = br#"{"code":310,"extFields":{"a":"group","b":"topic","e":"3"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":409}"#;
    let mut expected = Vec::new();
    expected.put_i32(4 + header.len() as i32);
    expected.put_i32(header.len() as i32);
    expected.extend_from_slice(header);
    assert_eq!(bytes, expected);
}

#[test]
fn binary_header_golden_bytes() {
    let mut cmd = sample(SerializeType::RocketMq);
    cmd.remark = None;
    cmd.body = bytes::Bytes::from_static(b"xy");
    cmd.ext_fields = [("b", "T")].into_iter().collect();
    let bytes = encode_to_vec(&cmd).unwrap();
    #[rustfmt::skip]
    let header: &[u8] = &[
        0x01, 0x36,             // code 310
        0x00,                   // JAVA
        0x01, 0x99,             // version 409
        0, 0, 0, 42,            // opaque
        0, 0, 0, 0,             // flag
        0, 0, 0, 0,             // remark length
        0, 0, 0, 8,             // extFields length
        0, 1, b'b', 0, 0, 0, 1, b'T',
    ];
    let mut expected = Vec::new();
    expected.put_i32(4 + header.len() as i32 + 2);
    expected.put_u32(0x0100_0000 | header.len() as u32);
    expected.extend_from_slice(header);
    expected.extend_from_slice(b"xy");
    assert_eq!(bytes, expected);
}

fn frame(header: &[u8], kind: u8) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_i32(4 + header.len() as i32);
    b.put_u32(((kind as u32) << 24) | header.len() as u32);
    b.put_slice(header);
    b
}

#[test]
fn lenient_json_from_other_clients() {
    // C++: numbers and booleans as extField values; rust client: null remark/extFields;
    // unknown properties ignored; duplicate keys keep the last value.
    let cpp = br#"{"code":310,"language":"CPP","version":333,"opaque":7,"flag":0,"remark":"","extFields":{"e":0,"k":true,"x":null,"s":"v","e":5},"unknown":[1,{"a":2}]}"#;
    let cmd = RemotingCodec::default()
        .decode(&mut frame(cpp, 0))
        .unwrap()
        .unwrap();
    assert_eq!(cmd.language, LanguageCode::Cpp);
    assert_eq!(cmd.ext_fields.get("e"), Some("5"));
    assert_eq!(cmd.ext_fields.get("k"), Some("true"));
    assert_eq!(cmd.ext_fields.get("x"), None);
    assert_eq!(cmd.remark.as_deref(), Some(""));

    let rust = br#"{"code":105,"language":"RUST","version":413,"opaque":1,"flag":0,"remark":null,"extFields":null}"#;
    let cmd = RemotingCodec::default()
        .decode(&mut frame(rust, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        (cmd.code, cmd.remark, cmd.ext_fields),
        (105, None, ExtFields::new())
    );

    let ordinal = br#"{"code":1,"language":9,"code":2}"#;
    let cmd = RemotingCodec::default()
        .decode(&mut frame(ordinal, 0))
        .unwrap()
        .unwrap();
    assert_eq!((cmd.code, cmd.language), (2, LanguageCode::Go));
}

#[test]
fn binary_duplicate_keys_last_wins_and_empty_values_dropped() {
    let mut h = BytesMut::new();
    h.put_i16(34);
    h.put_u8(0);
    h.put_i16(409);
    h.put_i32(1);
    h.put_i32(0);
    h.put_i32(0);
    let mut ext = BytesMut::new();
    for (k, v) in [("k", "1"), ("k", "2"), ("z", "")] {
        ext.put_i16(k.len() as i16);
        ext.put_slice(k.as_bytes());
        ext.put_i32(v.len() as i32);
        ext.put_slice(v.as_bytes());
    }
    h.put_i32(ext.len() as i32);
    h.put_slice(&ext);
    let cmd = RemotingCodec::default()
        .decode(&mut frame(&h, 1))
        .unwrap()
        .unwrap();
    assert_eq!(cmd.ext_fields.get("k"), Some("2"));
    assert!(!cmd.ext_fields.contains_key("z"));
}

#[test]
fn partial_frames_wait_and_pipelined_frames_split() {
    let mut all = BytesMut::new();
    let mut codec = RemotingCodec::default();
    for opaque in 0..3 {
        let mut c = sample(SerializeType::Json);
        c.opaque = opaque;
        codec.encode(&c, &mut all).unwrap();
    }
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for chunk in all.chunks(7) {
        buf.extend_from_slice(chunk);
        while let Some(c) = codec.decode(&mut buf).unwrap() {
            got.push(c.opaque);
        }
    }
    assert_eq!(got, vec![0, 1, 2]);
}

#[test]
fn hostile_lengths_are_rejected_before_allocating() {
    let mut codec = RemotingCodec::new(1024);
    let mut b = BytesMut::from(&i32::MAX.to_be_bytes()[..]);
    assert!(matches!(
        codec.decode(&mut b),
        Err(ProtocolError::FrameTooLarge { .. })
    ));
    assert!(b.capacity() < 1024);
    let mut b = BytesMut::from(&(-5i32).to_be_bytes()[..]);
    assert!(matches!(
        codec.decode(&mut b),
        Err(ProtocolError::FrameTooSmall(-5))
    ));
    // header length larger than the frame
    let mut b = BytesMut::new();
    b.put_i32(8);
    b.put_u32(100);
    b.put_u32(0);
    assert!(matches!(
        codec.decode(&mut b),
        Err(ProtocolError::BadHeaderLength { .. })
    ));
    // unknown serialize type
    assert!(matches!(
        codec.decode(&mut frame(b"{}", 7)),
        Err(ProtocolError::UnknownSerializeType(7))
    ));
    // garbage JSON
    assert!(matches!(
        codec.decode(&mut frame(b"{\"code\":", 0)),
        Err(ProtocolError::Json(_))
    ));
    // binary string length beyond the header
    let mut h = BytesMut::from(&[0u8; 13][..]);
    h.put_i32(1_000_000);
    assert!(matches!(
        codec.decode(&mut frame(&h, 1)),
        Err(ProtocolError::Binary(_))
    ));
}

#[test]
fn encoder_refuses_frames_over_the_cap() {
    let mut cmd = sample(SerializeType::Json);
    cmd.body = bytes::Bytes::from(vec![0u8; 2048]);
    let mut buf = BytesMut::new();
    assert!(RemotingCodec::new(1024).encode(&cmd, &mut buf).is_err());
    assert!(buf.is_empty());
}

fn arb_command() -> impl Strategy<Value = RemotingCommand> {
    (
        any::<i16>(),
        0u8..13,
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        proptest::option::of("\\PC{0,20}"),
        proptest::collection::hash_map("[a-zA-Z]{1,8}", "\\PC{1,20}", 0..8),
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
    )
        .prop_map(
            |(code, lang, version, opaque, flag, remark, ext, body, json)| {
                RemotingCommand {
                    code: code as i32,
                    language: LanguageCode::from_code(lang),
                    version: version as i32,
                    opaque,
                    flag,
                    // The binary form cannot tell an empty remark from none.
                    remark: remark.filter(|r| json || !r.is_empty()),
                    ext_fields: ext.into_iter().collect(),
                    body: body.into(),
                    serialize_type: if json {
                        SerializeType::Json
                    } else {
                        SerializeType::RocketMq
                    },
                }
            },
        )
}

proptest! {
    #[test]
    fn encode_decode_round_trip(cmd in arb_command()) {
        let mut buf = BytesMut::new();
        RemotingCodec::default().encode(&cmd, &mut buf).unwrap();
        let back = RemotingCodec::default().decode(&mut buf).unwrap().unwrap();
        prop_assert_eq!(back, cmd);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut codec = RemotingCodec::new(4096);
        let mut buf = BytesMut::from(&data[..]);
        while let Ok(Some(_)) = codec.decode(&mut buf) {}
    }

    #[test]
    fn arbitrary_headers_never_panic(
        header in proptest::collection::vec(any::<u8>(), 0..256),
        kind in 0u8..2,
    ) {
        let _ = RemotingCodec::default().decode(&mut frame(&header, kind));
    }
}
