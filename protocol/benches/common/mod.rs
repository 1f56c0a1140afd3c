//! Fixtures shared by the `codec` criterion bench and the `codec_profile` binary, so
//! that both measure the same frames.

use bytes::BytesMut;
use protocol::code::{request, response};
use protocol::header::{
    SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
};
use std::net::SocketAddr;

use protocol::message::{MessageRecord, MessageSysFlag, PhysicalOffset, QueueOffset, StoreStamp};
use protocol::{RemotingCodec, RemotingCommand, SerializeType};
use tokio_util::codec::Encoder;

pub const PROPS: &str = "TAGS\u{1}TagA\u{2}KEYS\u{1}order-1\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}C0A800020005FFFFFFFE93D2E5000000";

/// A SEND_MESSAGE_V2 frame with a 1 KiB body, as a Java producer sends it.
pub fn send_request(st: SerializeType) -> Vec<u8> {
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

/// The response the broker sends for a stored message.
pub fn send_response(request: &RemotingCommand) -> RemotingCommand {
    let header = SendMessageResponseHeader {
        msg_id: "0A00000100002A9F0000000000001234".into(),
        queue_id: 3,
        queue_offset: QueueOffset(123_456),
        transaction_id: None,
    };
    let mut resp = RemotingCommand::response_to(request, response::SUCCESS).with_header(&header);
    resp.ext_fields.insert("MSG_REGION", "DefaultRegion");
    resp.ext_fields.insert("TRACE_ON", "true");
    resp
}

/// The request [`send_response`] answers (only its opaque and serialize type matter).
pub fn bare_send_request(st: SerializeType) -> RemotingCommand {
    RemotingCommand::bare_request(request::SEND_MESSAGE_V2).with_serialize_type(st)
}

/// A 1 KiB-body CommitLog record and the stamp the store gives it.
pub fn record(body: &[u8]) -> (MessageRecord<'_>, StoreStamp) {
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
        body,
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
    (rec, stamp)
}
