//! Golden frames written out byte by byte from the 4.9 layout (`RemotingCommand`,
//! `NettyDecoder`, the send, pull and heartbeat headers), decoded with `RemotingCodec`, checked field by field, and encoded again.
//!
//! JSON headers list properties and extFields in alphabetical order, as fastjson writes
//! them. Binary SEND_MESSAGE_V2 entries follow Java's fast-codes order `a`..`n`
//! (alphabetical too); binary PULL_MESSAGE entries follow Java's fast-codes order,
//! which is not alphabetical, so its re-encoding (sorted) is a second hand-written
//! sequence made of the same entries.
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use protocol::code::request;
use protocol::header::{CommandHeader, PullMessageRequestHeader, SendMessageRequestHeader};
use protocol::message::{ConsumerOffset, MessageSysFlag, PullSysFlag, QueueOffset, properties};
use protocol::{LanguageCode, RemotingCodec, RemotingCommand, SerializeType};
use tokio_util::codec::{Decoder, Encoder};

const SEND_BODY: &[u8] = b"Hello RocketMQ";
const SEND_PROPS: &str = "TAGS\u{1}TagA\u{2}KEYS\u{1}order-1\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}C0A800020005FFFFFFFE93D2E5000000";

const HEARTBEAT_BODY: &str = concat!(
    r#"{"clientID":"10.0.0.2@12345#1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","#,
    r#""consumeType":"CONSUME_PASSIVELY","groupName":"CG","messageModel":"CLUSTERING","#,
    r#""subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","#,
    r#""subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"TopicTest"}],"#,
    r#""unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#
);

fn frame(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn send_v2_json() -> Vec<u8> {
    let header = concat!(
        r#"{"code":310,"extFields":{"a":"PG","b":"TopicTest","c":"TBW102","d":"4","e":"1","f":"0","#,
        r#""g":"1700000000000","h":"0","#,
        r#""i":"TAGS\u0001TagA\u0002KEYS\u0001order-1\u0002WAIT\u0001true\u0002UNIQ_KEY\u0001C0A800020005FFFFFFFE93D2E5000000","#,
        r#""j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":7,"#,
        r#""serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    assert_eq!(header.len(), 349);
    frame(&[
        &[0x00, 0x00, 0x01, 0x6F], // length 367 = 4 + 349 + 14
        &[0x00, 0x00, 0x01, 0x5D], // JSON, header length 349
        header.as_bytes(),
        SEND_BODY,
    ])
}

fn send_v2_binary() -> Vec<u8> {
    frame(&[
        &[0x00, 0x00, 0x00, 0xF2], // length 242 = 4 + 224 + 14
        &[0x01, 0x00, 0x00, 0xE0], // ROCKETMQ, header length 224
        &[0x01, 0x36],             // code 310
        &[0x00],                   // JAVA
        &[0x01, 0x99],             // version 409
        &[0x00, 0x00, 0x00, 0x07], // opaque
        &[0x00, 0x00, 0x00, 0x00], // flag
        &[0x00, 0x00, 0x00, 0x00], // no remark
        &[0x00, 0x00, 0x00, 0xCB], // extFields 203 bytes
        &[0x00, 0x01, b'a', 0x00, 0x00, 0x00, 0x02],
        b"PG",
        &[0x00, 0x01, b'b', 0x00, 0x00, 0x00, 0x09],
        b"TopicTest",
        &[0x00, 0x01, b'c', 0x00, 0x00, 0x00, 0x06],
        b"TBW102",
        &[0x00, 0x01, b'd', 0x00, 0x00, 0x00, 0x01, b'4'],
        &[0x00, 0x01, b'e', 0x00, 0x00, 0x00, 0x01, b'1'],
        &[0x00, 0x01, b'f', 0x00, 0x00, 0x00, 0x01, b'0'],
        &[0x00, 0x01, b'g', 0x00, 0x00, 0x00, 0x0D],
        b"1700000000000",
        &[0x00, 0x01, b'h', 0x00, 0x00, 0x00, 0x01, b'0'],
        &[0x00, 0x01, b'i', 0x00, 0x00, 0x00, 0x4A],
        b"TAGS\x01TagA\x02KEYS\x01order-1\x02WAIT\x01true\x02UNIQ_KEY\x01C0A800020005FFFFFFFE93D2E5000000",
        &[0x00, 0x01, b'j', 0x00, 0x00, 0x00, 0x01, b'0'],
        &[0x00, 0x01, b'k', 0x00, 0x00, 0x00, 0x05],
        b"false",
        &[0x00, 0x01, b'm', 0x00, 0x00, 0x00, 0x05],
        b"false",
        SEND_BODY,
    ])
}

fn pull_json() -> Vec<u8> {
    let header = concat!(
        r#"{"code":11,"extFields":{"commitOffset":"98","consumerGroup":"CG","expressionType":"TAG","#,
        r#""maxMsgNums":"32","queueId":"3","queueOffset":"100","subVersion":"1700000000000","#,
        r#""subscription":"TagA || TagB","suspendTimeoutMillis":"15000","sysFlag":"7","topic":"TopicTest"},"#,
        r#""flag":0,"language":"JAVA","opaque":8,"serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    assert_eq!(header.len(), 350);
    frame(&[
        &[0x00, 0x00, 0x01, 0x62], // length 354 = 4 + 350
        &[0x00, 0x00, 0x01, 0x5E], // JSON, header length 350
        header.as_bytes(),
    ])
}

// PULL_MESSAGE extFields entries: i16 key length, key, i32 value length, value.
const P_GROUP: &[u8] = b"\x00\x0DconsumerGroup\x00\x00\x00\x02CG";
const P_TOPIC: &[u8] = b"\x00\x05topic\x00\x00\x00\x09TopicTest";
const P_QUEUE_ID: &[u8] = b"\x00\x07queueId\x00\x00\x00\x013";
const P_QUEUE_OFFSET: &[u8] = b"\x00\x0BqueueOffset\x00\x00\x00\x03100";
const P_MAX: &[u8] = b"\x00\x0AmaxMsgNums\x00\x00\x00\x0232";
const P_SYS_FLAG: &[u8] = b"\x00\x07sysFlag\x00\x00\x00\x017";
const P_COMMIT: &[u8] = b"\x00\x0CcommitOffset\x00\x00\x00\x0298";
const P_SUSPEND: &[u8] = b"\x00\x14suspendTimeoutMillis\x00\x00\x00\x0515000";
const P_SUB: &[u8] = b"\x00\x0Csubscription\x00\x00\x00\x0CTagA || TagB";
const P_SUB_VERSION: &[u8] = b"\x00\x0AsubVersion\x00\x00\x00\x0D1700000000000";
const P_EXPR: &[u8] = b"\x00\x0EexpressionType\x00\x00\x00\x03TAG";

const PULL_BINARY_HEAD: &[&[u8]] = &[
    &[0x00, 0x00, 0x01, 0x09], // length 265 = 4 + 261
    &[0x01, 0x00, 0x01, 0x05], // ROCKETMQ, header length 261
    &[0x00, 0x0B],             // code 11
    &[0x00],                   // JAVA
    &[0x01, 0x99],             // version 409
    &[0x00, 0x00, 0x00, 0x08], // opaque
    &[0x00, 0x00, 0x00, 0x00], // flag
    &[0x00, 0x00, 0x00, 0x00], // no remark
    &[0x00, 0x00, 0x00, 0xF0], // extFields 240 bytes
];

/// As the Java client writes it (`PullMessageRequestHeader.encode` order).
fn pull_binary_java_order() -> Vec<u8> {
    let mut parts = PULL_BINARY_HEAD.to_vec();
    parts.extend_from_slice(&[
        P_GROUP,
        P_TOPIC,
        P_QUEUE_ID,
        P_QUEUE_OFFSET,
        P_MAX,
        P_SYS_FLAG,
        P_COMMIT,
        P_SUSPEND,
        P_SUB,
        P_SUB_VERSION,
        P_EXPR,
    ]);
    frame(&parts)
}

/// As this crate writes it: entries sorted by key.
fn pull_binary_sorted() -> Vec<u8> {
    let mut parts = PULL_BINARY_HEAD.to_vec();
    parts.extend_from_slice(&[
        P_COMMIT,
        P_GROUP,
        P_EXPR,
        P_MAX,
        P_QUEUE_ID,
        P_QUEUE_OFFSET,
        P_SUB_VERSION,
        P_SUB,
        P_SUSPEND,
        P_SYS_FLAG,
        P_TOPIC,
    ]);
    frame(&parts)
}

fn heartbeat_json() -> Vec<u8> {
    let header = r#"{"code":34,"flag":0,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON","version":409}"#;
    assert_eq!((header.len(), HEARTBEAT_BODY.len()), (96, 431));
    frame(&[
        &[0x00, 0x00, 0x02, 0x13], // length 531 = 4 + 96 + 431
        &[0x00, 0x00, 0x00, 0x60], // JSON, header length 96
        header.as_bytes(),
        HEARTBEAT_BODY.as_bytes(),
    ])
}

fn heartbeat_binary() -> Vec<u8> {
    frame(&[
        &[0x00, 0x00, 0x01, 0xC8], // length 456 = 4 + 21 + 431
        &[0x01, 0x00, 0x00, 0x15], // ROCKETMQ, header length 21
        &[0x00, 0x22],             // code 34
        &[0x00],                   // JAVA
        &[0x01, 0x99],             // version 409
        &[0x00, 0x00, 0x00, 0x09], // opaque
        &[0x00, 0x00, 0x00, 0x00], // flag
        &[0x00, 0x00, 0x00, 0x00], // no remark
        &[0x00, 0x00, 0x00, 0x00], // no extFields
        HEARTBEAT_BODY.as_bytes(),
    ])
}

/// Decodes exactly one frame; fed in two pieces to exercise the partial-frame path.
fn decode_one(bytes: &[u8]) -> RemotingCommand {
    let mut codec = RemotingCodec::default();
    let (first, rest) = bytes.split_at(bytes.len() / 2);
    let mut buf = BytesMut::from(first);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(rest);
    let cmd = codec.decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    cmd
}

fn encode(cmd: &RemotingCommand) -> Vec<u8> {
    let mut out = BytesMut::new();
    RemotingCodec::default().encode(cmd, &mut out).unwrap();
    out.to_vec()
}

fn check_envelope(cmd: &RemotingCommand, code: i32, opaque: i32, st: SerializeType) {
    assert_eq!(cmd.code, code);
    assert_eq!(cmd.language, LanguageCode::Java);
    assert_eq!(cmd.version, 409);
    assert_eq!(cmd.opaque, opaque);
    assert_eq!(cmd.flag, 0);
    assert!(!cmd.is_response() && !cmd.is_oneway());
    assert_eq!(cmd.remark, None);
    assert_eq!(cmd.serialize_type, st);
}

fn check_send(cmd: &RemotingCommand, st: SerializeType) {
    check_envelope(cmd, request::SEND_MESSAGE_V2, 7, st);
    assert_eq!(cmd.ext_fields.len(), 12);
    assert_eq!(cmd.ext_fields.get("l"), None);
    assert_eq!(&cmd.body[..], SEND_BODY);
    let h = SendMessageRequestHeader::read_for_code(cmd.code, &cmd.ext_fields).unwrap();
    assert_eq!(h.producer_group, "PG");
    assert_eq!(h.topic, "TopicTest");
    assert_eq!(h.default_topic, "TBW102");
    assert_eq!(h.default_topic_queue_nums, 4);
    assert_eq!(h.queue_id, 1);
    assert_eq!(h.sys_flag, MessageSysFlag(0));
    assert_eq!(h.born_timestamp, 1_700_000_000_000);
    assert_eq!(h.flag, 0);
    assert_eq!(h.properties.as_deref(), Some(SEND_PROPS));
    assert_eq!(h.reconsume_times, Some(0));
    assert!(!h.unit_mode && !h.batch);
    assert_eq!(h.max_reconsume_times, None);
    assert_eq!(h.bname, None);
    let props = h.properties.as_deref().unwrap_or_default();
    assert_eq!(properties::find(props, properties::TAGS), Some("TagA"));
    assert_eq!(properties::find(props, properties::KEYS), Some("order-1"));
    assert_eq!(properties::find(props, properties::WAIT), Some("true"));
    assert_eq!(
        properties::find(props, properties::UNIQ_KEY),
        Some("C0A800020005FFFFFFFE93D2E5000000")
    );
}

#[test]
fn send_message_v2_json() {
    let bytes = send_v2_json();
    let cmd = decode_one(&bytes);
    check_send(&cmd, SerializeType::Json);
    assert_eq!(encode(&cmd), bytes);
}

#[test]
fn send_message_v2_binary() {
    let bytes = send_v2_binary();
    let cmd = decode_one(&bytes);
    check_send(&cmd, SerializeType::RocketMq);
    assert_eq!(encode(&cmd), bytes);
}

#[test]
fn send_message_v2_rebuilt_from_typed_header() {
    let cmd = decode_one(&send_v2_binary());
    let v1 = SendMessageRequestHeader::read_for_code(cmd.code, &cmd.ext_fields).unwrap();
    let v2 = protocol::header::SendMessageRequestHeaderV2::from(v1);
    let mut rebuilt = RemotingCommand::request(request::SEND_MESSAGE_V2, &v2)
        .with_body(SEND_BODY)
        .with_serialize_type(SerializeType::RocketMq);
    rebuilt.opaque = 7;
    assert_eq!(encode(&rebuilt), send_v2_binary());
    let json = rebuilt.with_serialize_type(SerializeType::Json);
    assert_eq!(encode(&json), send_v2_json());
}

fn check_pull(cmd: &RemotingCommand, st: SerializeType) {
    check_envelope(cmd, request::PULL_MESSAGE, 8, st);
    assert!(cmd.body.is_empty());
    assert_eq!(cmd.ext_fields.len(), 11);
    let h = PullMessageRequestHeader::read(&cmd.ext_fields).unwrap();
    assert_eq!(h.consumer_group, "CG");
    assert_eq!(h.topic, "TopicTest");
    assert_eq!(h.queue_id, 3);
    assert_eq!(h.queue_offset, QueueOffset(100));
    assert_eq!(h.max_msg_nums, 32);
    assert_eq!(h.sys_flag, PullSysFlag(7));
    assert!(
        h.sys_flag.has_commit_offset() && h.sys_flag.has_suspend() && h.sys_flag.has_subscription()
    );
    assert_eq!(h.commit_offset, ConsumerOffset(98));
    assert_eq!(h.suspend_timeout_millis, 15_000);
    assert_eq!(h.subscription.as_deref(), Some("TagA || TagB"));
    assert_eq!(h.sub_version, 1_700_000_000_000);
    assert_eq!(h.expression_type.as_deref(), Some("TAG"));
    assert_eq!(h.bname, None);
}

#[test]
fn pull_message_json() {
    let bytes = pull_json();
    let cmd = decode_one(&bytes);
    check_pull(&cmd, SerializeType::Json);
    assert_eq!(encode(&cmd), bytes);
}

#[test]
fn pull_message_binary() {
    let java = pull_binary_java_order();
    let cmd = decode_one(&java);
    check_pull(&cmd, SerializeType::RocketMq);
    let sorted = pull_binary_sorted();
    assert_eq!(java.len(), sorted.len());
    assert_eq!(encode(&cmd), sorted);
    assert_eq!(decode_one(&sorted), cmd);
}

fn check_heartbeat(cmd: &RemotingCommand, st: SerializeType) {
    check_envelope(cmd, request::HEART_BEAT, 9, st);
    assert!(cmd.ext_fields.is_empty());
    assert_eq!(&cmd.body[..], HEARTBEAT_BODY.as_bytes());
    let body: serde_json::Value = serde_json::from_slice(&cmd.body).unwrap();
    assert_eq!(body["clientID"], "10.0.0.2@12345#1");
    let consumer = &body["consumerDataSet"][0];
    assert_eq!(consumer["groupName"], "CG");
    assert_eq!(consumer["messageModel"], "CLUSTERING");
    let sub = &consumer["subscriptionDataSet"][0];
    assert_eq!(sub["topic"], "TopicTest");
    // codeSet holds Java String.hashCode of each tag.
    assert_eq!(
        sub["codeSet"][0],
        i64::from(protocol::message::java_string_hash("TagA"))
    );
    assert_eq!(
        body["producerDataSet"][0]["groupName"],
        "CLIENT_INNER_PRODUCER"
    );
}

#[test]
fn heart_beat_json() {
    let bytes = heartbeat_json();
    let cmd = decode_one(&bytes);
    check_heartbeat(&cmd, SerializeType::Json);
    assert_eq!(encode(&cmd), bytes);
}

#[test]
fn heart_beat_binary() {
    let bytes = heartbeat_binary();
    let cmd = decode_one(&bytes);
    check_heartbeat(&cmd, SerializeType::RocketMq);
    assert_eq!(encode(&cmd), bytes);
}

#[test]
fn frames_back_to_back_in_one_buffer() {
    let all = [
        send_v2_json(),
        send_v2_binary(),
        pull_json(),
        pull_binary_java_order(),
        heartbeat_json(),
        heartbeat_binary(),
    ]
    .concat();
    let mut buf = BytesMut::from(&all[..]);
    let mut codec = RemotingCodec::default();
    let mut codes = Vec::new();
    while let Some(cmd) = codec.decode(&mut buf).unwrap() {
        codes.push(cmd.code);
    }
    assert_eq!(codes, [310, 310, 11, 11, 34, 34]);
}
