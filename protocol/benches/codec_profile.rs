//! Runs one codec case in a loop, for instruction-level profiling that does not
//! depend on machine load:
//! `valgrind --tool=callgrind <bench binary> <case> <iterations>`
//! (build it with `cargo bench -p rmq-protocol --bench codec_profile --no-run`).
//! Cases: send_json, send_binary, header, response_json, response_binary,
//! record_encode, record_decode.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use bytes::BytesMut;
use common::{bare_send_request, send_request, send_response};
use protocol::header::SendMessageRequestHeader;
use protocol::message::decode;
use protocol::{RemotingCodec, SerializeType};
use tokio_util::codec::{Decoder, Encoder};

mod common;

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
                let cmd = RemotingCodec::default().decode(&mut buf).unwrap().unwrap();
                let h = SendMessageRequestHeader::read_for_code(cmd.code, &cmd.ext_fields).unwrap();
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
            let req = bare_send_request(st);
            let mut out = BytesMut::with_capacity(4096);
            for _ in 0..n {
                let resp = send_response(black_box(&req));
                out.clear();
                RemotingCodec::default().encode(&resp, &mut out).unwrap();
                black_box(out.len());
            }
        }
        "record_encode" | "record_decode" => {
            let body = vec![b'x'; 1024];
            let (rec, stamp) = common::record(&body);
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
