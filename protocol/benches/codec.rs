//! Codec hot paths of the send / store path. Run with
//! `cargo bench -p rmq-protocol --bench codec`.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use bytes::BytesMut;
use common::{bare_send_request, send_request, send_response};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use protocol::header::SendMessageRequestHeader;
use protocol::message::{MessageRecord, decode};
use protocol::{RemotingCodec, SerializeType};
use tokio_util::codec::{Decoder, Encoder};

mod common;

/// Decoding as the server does it: the frame has just been read into the connection's
/// reusable read buffer, so its bytes are in cache. The copy into the buffer is inside
/// the timed region (it stands in for the socket read), which makes the figure an upper
/// bound on the decode itself.
fn bench_send_request(c: &mut Criterion) {
    for (name, st) in [
        ("json", SerializeType::Json),
        ("binary", SerializeType::RocketMq),
    ] {
        let frame = send_request(st);
        let mut buf = BytesMut::with_capacity(64 * 1024);
        c.bench_function(&format!("send_v2_decode_frame_and_header/{name}"), |b| {
            b.iter(|| {
                buf.extend_from_slice(black_box(&frame));
                let cmd = RemotingCodec::default().decode(&mut buf).unwrap().unwrap();
                let h = SendMessageRequestHeader::read_for_code(cmd.code, &cmd.ext_fields).unwrap();
                black_box((h, cmd.body))
            })
        });
    }
}

/// [`bench_send_request`] with every frame in a freshly allocated buffer that is not in
/// cache (criterion prepares thousands of inputs per batch): the worst case, kept to
/// show what cache misses on the header cost.
fn bench_send_request_cold(c: &mut Criterion) {
    for (name, st) in [
        ("json", SerializeType::Json),
        ("binary", SerializeType::RocketMq),
    ] {
        let frame = send_request(st);
        c.bench_function(&format!("send_v2_decode_cold_buffer/{name}"), |b| {
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
}

fn bench_send_response(c: &mut Criterion) {
    for (name, st) in [
        ("json", SerializeType::Json),
        ("binary", SerializeType::RocketMq),
    ] {
        let request = bare_send_request(st);
        let mut out = BytesMut::with_capacity(4096);
        c.bench_function(&format!("send_response_encode/{name}"), |b| {
            b.iter(|| {
                let resp = send_response(black_box(&request));
                out.clear();
                RemotingCodec::default().encode(&resp, &mut out).unwrap();
                black_box(out.len())
            })
        });
    }
}

fn bench_record(c: &mut Criterion) {
    let body = vec![b'x'; 1024];
    let (rec, stamp) = common::record(&body);
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
    bench_send_request_cold,
    bench_send_request_parts,
    bench_send_response,
    bench_record
);
criterion_main!(benches);
