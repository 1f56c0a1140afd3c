//! Runs one codec case in a loop, for instruction-level profiling that does not
//! depend on machine load:
//! `valgrind --tool=callgrind <bench binary> <case> <iterations>`
//! (build it with `cargo bench -p rmq-protocol --bench codec_profile --no-run`).
//! Cases: send_json, send_binary, header, response_json, response_binary,
//! record_encode, record_decode.

use std::hint::black_box;
use std::net::SocketAddr;

use bytes::BytesMut;
use protocol::code::{request, response};
use protocol::header::{
    SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
};
use protocol::message::{
    MessageRecord, MessageSysFlag, PhysicalOffset, QueueOffset, StoreStamp, decode,
};
use protocol::{RemotingCodec, RemotingCommand, SerializeType};
use tokio_util::codec::{Decoder, Encoder};

const PROPS: &str = "TAGS\u{1}TagA\u{2}KEYS\u{1}order-1\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}C0A800020005FFFFFFFE93D2E5000000";

fn send_request(st: SerializeType) -> Vec<u8> {
    let v2 = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "please_rename_unique_group_name".into(),
        topic: "TopicTest".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(PROPS.into()),
        reconsume_times: Some(0),
        unit_mode: false,
        batch: false,
        max_reconsume_times: None,
        bname: Some("broker-a".into()),
    });
    let cmd = RemotingCommand::request(request::SEND_MESSAGE_V2, &v2)
        .with_body(vec![b'x'; 1024])
        .with_serialize_type(st);
    let mut out = BytesMut::new();
    RemotingCodec::default().encode(&cmd, &mut out).unwrap();
    out.to_vec()
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let case = args.next().unwrap_or_else(|| "send_json".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    match case.as_str() {
        "send_json" | "send_binary" => {
            let st = if case == "send_json" {
                SerializeType::Json
            } else {
                SerializeType::RocketMq
            };
            let frame = send_request(st);
            let mut buf = BytesMut::with_capacity(frame.len());
            for _ in 0..n {
                buf.extend_from_slice(&frame);
                let mut cmd = RemotingCodec::default().decode(&mut buf).unwrap().unwrap();
                let h =
                    SendMessageRequestHeader::take_for_code(cmd.code, &mut cmd.ext_fields).unwrap();
                black_box((h, cmd.body));
            }
        }
        "header" => {
            let cmd = RemotingCodec::default()
                .decode(&mut BytesMut::from(&send_request(SerializeType::Json)[..]))
                .unwrap()
                .unwrap();
            for _ in 0..n {
                black_box(
                    SendMessageRequestHeader::read_for_code(cmd.code, black_box(&cmd.ext_fields))
                        .unwrap(),
                );
            }
        }
        "response_json" | "response_binary" => {
            let st = if case == "response_json" {
                SerializeType::Json
            } else {
                SerializeType::RocketMq
            };
            let req =
                RemotingCommand::bare_request(request::SEND_MESSAGE_V2).with_serialize_type(st);
            let mut out = BytesMut::with_capacity(4096);
            for _ in 0..n {
                let header = SendMessageResponseHeader {
                    msg_id: "0A00000100002A9F0000000000001234".into(),
                    queue_id: 3,
                    queue_offset: QueueOffset(123_456),
                    transaction_id: None,
                };
                let mut resp = RemotingCommand::response_to(black_box(&req), response::SUCCESS)
                    .with_header(&header);
                resp.ext_fields.insert("MSG_REGION", "DefaultRegion");
                resp.ext_fields.insert("TRACE_ON", "true");
                out.clear();
                RemotingCodec::default().encode(&resp, &mut out).unwrap();
                black_box(out.len());
            }
        }
        "record_encode" | "record_decode" => {
            let body = vec![b'x'; 1024];
            let born: SocketAddr = "192.168.0.2:51234".parse().unwrap();
            let store: SocketAddr = "192.168.0.1:10911".parse().unwrap();
            let rec = MessageRecord {
                queue_id: 3,
                flag: 0,
                sys_flag: MessageSysFlag(0).with_host_families(&born, &store),
                born_timestamp: 1_700_000_000_000,
                born_host: born,
                reconsume_times: 0,
                prepared_transaction_offset: PhysicalOffset(0),
                body: &body,
                body_crc: None,
                topic: "TopicTest",
                properties: PROPS,
            };
            let stamp = StoreStamp {
                queue_offset: QueueOffset(1000),
                physical_offset: PhysicalOffset(1 << 30),
                store_timestamp: 1_700_000_000_100,
                store_host: store,
            };
            let mut out = vec![0u8; rec.encoded_len()];
            if case == "record_encode" {
                for _ in 0..n {
                    black_box(&rec)
                        .encode_into(black_box(&stamp), &mut out)
                        .unwrap();
                }
            } else {
                rec.encode_into(&stamp, &mut out).unwrap();
                for _ in 0..n {
                    let v = decode(black_box(&out), true).unwrap();
                    black_box((v.topic(), v.queue_offset(), v.properties()));
                }
            }
        }
        other => panic!("unknown case {other}"),
    }
}
