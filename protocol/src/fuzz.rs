//! Entry points of the cargo-fuzz targets in `protocol/fuzz/`. They live here, as
//! plain functions, so that the normal test suite compiles and exercises them (the
//! fuzz crate itself needs a nightly toolchain). Each one must never panic except on
//! a broken round-trip invariant, which is a real bug.

use bytes::{BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::frame::{RemotingCodec, decode_frame_body};
use crate::message::{batch, properties, record};

/// Decodes every frame in `data`; each decoded command must survive encode + decode.
pub fn frame(data: &[u8]) {
    let mut codec = RemotingCodec::new(1 << 20);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(cmd)) = codec.decode(&mut buf) {
        let mut out = BytesMut::new();
        if codec.encode(&cmd, &mut out).is_ok() {
            let again = codec.decode(&mut out);
            assert!(
                matches!(&again, Ok(Some(c)) if *c == cmd),
                "frame round trip changed {cmd:?} into {again:?}"
            );
        }
    }
}

fn header(kind: u8, data: &[u8]) {
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX) & 0x00FF_FFFF;
    let mut frame = BytesMut::with_capacity(4 + data.len());
    frame.put_u32(u32::from(kind) << 24 | len);
    frame.put_slice(data);
    let _ = decode_frame_body(Bytes::from(frame));
}

/// `data` as a ROCKETMQ binary header.
pub fn binary_header(data: &[u8]) {
    header(1, data);
}

/// `data` as a JSON header.
pub fn json_header(data: &[u8]) {
    header(0, data);
}

/// Walks `data` as CommitLog records; every valid record must re-encode to its own
/// bytes.
pub fn message_record(data: &[u8]) {
    // The pull filter's shortcut finds the properties exactly where a full decode does.
    let located = record::properties_of(data);
    if let Ok(view) = record::decode(data, false) {
        assert_eq!(located, Ok(view.properties().as_bytes()), "properties_of");
    }
    for check_crc in [false, true] {
        for view in record::records(data, check_crc).flatten() {
            let stamp = view.store_stamp();
            let msg = view.to_message_record();
            let _ = (view.offset_msg_id(), view.store_host_bytes());
            // Topics of 128..=255 bytes decode (the length byte is read unsigned) but
            // are refused by the encoder.
            if let Ok(bytes) = msg.encode_to_vec(&stamp) {
                assert_eq!(bytes, view.as_bytes(), "record round trip");
            }
        }
    }
}

/// Decodes a SEND_BATCH_MESSAGE body; the entries must survive encode + decode.
pub fn batch_body(data: &[u8]) {
    let entries: Vec<_> = batch::decode(data).map_while(Result::ok).collect();
    if let Ok(bytes) = batch::encode(&entries) {
        let again: Result<Vec<_>, _> = batch::decode(&bytes).collect();
        assert_eq!(again.as_deref(), Ok(&entries[..]), "batch round trip");
    }
}

/// Parses a properties string; writing it back and parsing again is a fixed point.
pub fn properties(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = properties::Properties::parse(text);
    let written = parsed.to_string();
    assert_eq!(written.len(), parsed.encoded_len());
    assert_eq!(
        properties::Properties::parse(&written),
        parsed,
        "properties round trip"
    );
    for (name, _) in properties::iter(text) {
        assert_eq!(
            parsed.get(name),
            properties::find(text, name),
            "last value wins"
        );
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn seeds() -> Vec<Vec<u8>> {
        let cmd = crate::RemotingCommand::bare_request(34).with_body(&b"{}"[..]);
        let mut json = BytesMut::new();
        RemotingCodec::default().encode(&cmd, &mut json).unwrap();
        let mut bin = BytesMut::new();
        RemotingCodec::default()
            .encode(
                &cmd.with_serialize_type(crate::SerializeType::RocketMq),
                &mut bin,
            )
            .unwrap();
        vec![json.to_vec(), bin.to_vec(), Vec::new(), vec![0xFF; 64]]
    }

    #[test]
    fn entry_points_accept_seeds() {
        for s in seeds() {
            frame(&s);
            binary_header(s.get(8..).unwrap_or_default());
            json_header(s.get(8..).unwrap_or_default());
            message_record(&s);
            batch_body(&s);
            properties(&s);
        }
        properties("A\u{1}1\u{2}B\u{1}2\u{1}3\u{2}\u{2}".as_bytes());
    }

    proptest! {
        #[test]
        fn entry_points_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            frame(&data);
            binary_header(&data);
            json_header(&data);
            message_record(&data);
            batch_body(&data);
            properties(&data);
        }

        #[test]
        fn frame_entry_on_mutated_valid_frames(
            idx in any::<prop::sample::Index>(), val: u8, which in 0usize..2,
        ) {
            let mut s = seeds().swap_remove(which);
            let i = idx.index(s.len());
            s[i] = val;
            frame(&s);
        }
    }
}
