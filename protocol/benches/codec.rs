//! Codec hot paths of the send / store path. Run with
//! `cargo bench -p rmq-protocol --bench codec`.

use std::hint::black_box;
use std::net::SocketAddr;

use bytes::BytesMut;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
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

fn bench_send_request(c: &mut Criterion) {
    for (name, st) in [
        ("json", SerializeType::Json),
        ("binary", SerializeType::RocketMq),
    ] {
        let frame = send_request(st);
        c.bench_function(&format!("send_v2_decode_frame_and_header/{name}"), |b| {
            b.iter_batched(
                || BytesMut::from(&frame[..]),
                |mut buf| {
                    let cmd = RemotingCodec::default().decode(&mut buf).unwrap().unwrap();
                    let h =
                        SendMessageRequestHeader::read_for_code(cmd.code, &cmd.ext_fields).unwrap();
                    black_box((h, cmd.body))
                },
                BatchSize::SmallInput,
            )
        });
    }
}

/// The two halves of the above, to attribute the cost.
fn bench_send_request_parts(c: &mut Criterion) {
    for (name, st) in [
        ("json", SerializeType::Json),
        ("binary", SerializeType::RocketMq),
    ] {
        let frame = send_request(st);
        c.bench_function(&format!("send_v2_decode_frame_only/{name}"), |b| {
            b.iter_batched(
                || BytesMut::from(&frame[..]),
                |mut buf| black_box(RemotingCodec::default().decode(&mut buf).unwrap()),
                BatchSize::SmallInput,
            )
        });
    }
    let cmd = RemotingCodec::default()
        .decode(&mut BytesMut::from(&send_request(SerializeType::Json)[..]))
        .unwrap()
        .unwrap();
    c.bench_function("send_v2_typed_header_only/read", |b| {
        b.iter(|| {
            black_box(SendMessageRequestHeader::read_for_code(
                cmd.code,
                black_box(&cmd.ext_fields),
            ))
        })
    });
    c.bench_function("send_v2_typed_header_only/take", |b| {
        b.iter_batched(
            || cmd.ext_fields.clone(),
            |mut fields| {
                black_box(SendMessageRequestHeader::take_for_code(
                    cmd.code,
                    &mut fields,
                ))
            },
            BatchSize::SmallInput,
        )
    });
}

fn bench_send_response(c: &mut Criterion) {
    for (name, st) in [
        ("json", SerializeType::Json),
        ("binary", SerializeType::RocketMq),
    ] {
        let request =
            RemotingCommand::bare_request(request::SEND_MESSAGE_V2).with_serialize_type(st);
        let mut out = BytesMut::with_capacity(4096);
        c.bench_function(&format!("send_response_encode/{name}"), |b| {
            b.iter(|| {
                let header = SendMessageResponseHeader {
                    msg_id: "0A00000100002A9F0000000000001234".into(),
                    queue_id: 3,
                    queue_offset: QueueOffset(123_456),
                    transaction_id: None,
                };
                let mut resp = RemotingCommand::response_to(black_box(&request), response::SUCCESS)
                    .with_header(&header);
                resp.ext_fields.insert("MSG_REGION", "DefaultRegion");
                resp.ext_fields.insert("TRACE_ON", "true");
                out.clear();
                RemotingCodec::default().encode(&resp, &mut out).unwrap();
                black_box(out.len())
            })
        });
    }
}

fn bench_record(c: &mut Criterion) {
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
    c.bench_function("record_encode_1k/with_crc", |b| {
        b.iter(|| {
            black_box(&rec)
                .encode_into(black_box(&stamp), &mut out)
                .unwrap()
        })
    });
    let precomputed = MessageRecord {
        body_crc: Some(protocol::message::record::body_crc(&body)),
        ..rec
    };
    c.bench_function("record_encode_1k/crc_precomputed", |b| {
        b.iter(|| {
            black_box(&precomputed)
                .encode_into(black_box(&stamp), &mut out)
                .unwrap()
        })
    });
    let bytes = rec.encode_to_vec(&stamp).unwrap();
    for (name, crc) in [("check_crc", true), ("no_crc", false)] {
        c.bench_function(&format!("record_decode_1k/{name}"), |b| {
            b.iter(|| {
                let v = decode(black_box(&bytes), crc).unwrap();
                black_box((
                    v.topic(),
                    v.queue_id(),
                    v.queue_offset(),
                    v.physical_offset(),
                    v.store_timestamp(),
                    v.properties(),
                ))
            })
        });
    }
}

criterion_group!(
    benches,
    bench_send_request,
    bench_send_request_parts,
    bench_send_response,
    bench_record
);
criterion_main!(benches);
