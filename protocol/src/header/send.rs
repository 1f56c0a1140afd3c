//! Send headers (`SendMessageRequestHeader`,
//! `SendMessageRequestHeaderV2`, `SendMessageResponseHeader`).

use crate::code::request;
use crate::header::{CommandHeader, HeaderError};
use crate::message::{MessageSysFlag, QueueOffset};
use crate::{ExtFields, SharedStr};

crate::header! {
    /// SEND_MESSAGE (10) and SEND_REPLY_MESSAGE (324).
    pub struct SendMessageRequestHeader {
        required producer_group: SharedStr = "producerGroup",
        required topic: SharedStr = "topic",
        /// Template for auto-created topics, normally `TBW102`.
        required default_topic: SharedStr = "defaultTopic",
        required default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        /// Negative: the broker picks a queue.
        required queue_id: i32 = "queueId",
        required sys_flag: MessageSysFlag = "sysFlag",
        required born_timestamp: i64 = "bornTimestamp",
        required flag: i32 = "flag",
        optional properties: SharedStr = "properties",
        optional reconsume_times: i32 = "reconsumeTimes",
        default unit_mode: bool = "unitMode" => false,
        /// The body is a batch.
        default batch: bool = "batch" => false,
        optional max_reconsume_times: i32 = "maxReconsumeTimes",
        /// Broker name (`RpcRequestHeader.bname`, 4.9.5+).
        optional bname: SharedStr = "bname",
    }
}

crate::header! {
    /// SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and SEND_REPLY_MESSAGE_V2 (325):
    /// the V1 fields under one-letter keys, to shrink every send frame.
    pub struct SendMessageRequestHeaderV2 {
        required a: SharedStr = "a",
        required b: SharedStr = "b",
        required c: SharedStr = "c",
        required d: i32 = "d",
        required e: i32 = "e",
        required f: MessageSysFlag = "f",
        required g: i64 = "g",
        required h: i32 = "h",
        optional i: SharedStr = "i",
        optional j: i32 = "j",
        default k: bool = "k" => false,
        optional l: i32 = "l",
        default m: bool = "m" => false,
        optional n: SharedStr = "n",
    }
}

/// `SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1`.
impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        Self {
            producer_group: v2.a,
            topic: v2.b,
            default_topic: v2.c,
            default_topic_queue_nums: v2.d,
            queue_id: v2.e,
            sys_flag: v2.f,
            born_timestamp: v2.g,
            flag: v2.h,
            properties: v2.i,
            reconsume_times: v2.j,
            unit_mode: v2.k,
            max_reconsume_times: v2.l,
            batch: v2.m,
            bname: v2.n,
        }
    }
}

/// `SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2`.
impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(v1: SendMessageRequestHeader) -> Self {
        Self {
            a: v1.producer_group,
            b: v1.topic,
            c: v1.default_topic,
            d: v1.default_topic_queue_nums,
            e: v1.queue_id,
            f: v1.sys_flag,
            g: v1.born_timestamp,
            h: v1.flag,
            i: v1.properties,
            j: v1.reconsume_times,
            k: v1.unit_mode,
            l: v1.max_reconsume_times,
            m: v1.batch,
            n: v1.bname,
        }
    }
}

impl SendMessageRequestHeader {
    /// Reads the header of any send request, V1 or V2 keys chosen by the request code
    /// as the broker does (`AbstractSendMessageProcessor.parseRequestHeader`).
    ///
    /// The batch flag also accepts `"1"`: the C++ client 2.x sends a batch as
    /// SEND_MESSAGE with the V1 header and `batch="1"`, which Java 4.9 reads as false and
    /// stores as one message (rocketmq-client-cpp issues #363, #447).
    pub fn read_for_code(code: i32, fields: &ExtFields) -> Result<Self, HeaderError> {
        let (mut header, batch_key) = match code {
            request::SEND_MESSAGE_V2
            | request::SEND_BATCH_MESSAGE
            | request::SEND_REPLY_MESSAGE_V2 => (
                SendMessageRequestHeaderV2::read(fields).map(Self::from)?,
                "m",
            ),
            _ => (Self::read(fields)?, "batch"),
        };
        if fields.get(batch_key).is_some_and(|v| v.trim() == "1") {
            header.batch = true;
        }
        Ok(header)
    }
}

crate::header! {
    /// Response to every send request.
    pub struct SendMessageResponseHeader {
        /// Offset msgId of the stored record; for a batch, the ids of all records
        /// joined with `,`.
        required msg_id: String = "msgId",
        required queue_id: i32 = "queueId",
        /// Queue offset of the (first) stored message.
        required queue_offset: QueueOffset = "queueOffset",
        optional transaction_id: String = "transactionId",
    }
}

/// extFields the broker adds to every send response (`SendMessageProcessor.preSend`);
/// the Java client reads them unconditionally on success.
pub const SEND_RESPONSE_MSG_REGION: &str = "MSG_REGION";
pub const SEND_RESPONSE_TRACE_ON: &str = "TRACE_ON";

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample_v1() -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: "PG".into(),
            topic: "T".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 1,
            sys_flag: MessageSysFlag(0),
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("TAGS\u{1}a".into()),
            reconsume_times: Some(0),
            unit_mode: false,
            batch: false,
            max_reconsume_times: None,
            bname: Some("broker-a".into()),
        }
    }

    #[test]
    fn v2_keys_and_conversion() {
        let v2 = SendMessageRequestHeaderV2::from(sample_v1());
        let mut f = ExtFields::new();
        v2.write(&mut f);
        assert_eq!(
            f.sorted(),
            [
                ("a", "PG"),
                ("b", "T"),
                ("c", "TBW102"),
                ("d", "4"),
                ("e", "1"),
                ("f", "0"),
                ("g", "1700000000000"),
                ("h", "0"),
                ("i", "TAGS\u{1}a"),
                ("j", "0"),
                ("k", "false"),
                ("m", "false"),
                ("n", "broker-a"),
            ]
        );
        assert_eq!(
            SendMessageRequestHeader::read_for_code(request::SEND_MESSAGE_V2, &f),
            Ok(sample_v1())
        );
        assert_eq!(
            SendMessageRequestHeader::read_for_code(request::SEND_MESSAGE, &f),
            Err(HeaderError::Missing("producerGroup"))
        );
        assert_eq!(
            SendMessageRequestHeader::read_for_code(request::SEND_BATCH_MESSAGE, &f),
            Ok(sample_v1())
        );
        f.remove("h");
        assert_eq!(
            SendMessageRequestHeaderV2::read(&f),
            Err(HeaderError::Missing("h"))
        );
    }

    #[test]
    fn batch_flag_one_is_true_for_the_cpp_client() {
        let mut f = ExtFields::new();
        sample_v1().write(&mut f);
        f.insert("batch", "1");
        let h = SendMessageRequestHeader::read_for_code(request::SEND_MESSAGE, &f).unwrap();
        assert!(h.batch);
        f.insert("batch", "0");
        let h = SendMessageRequestHeader::read_for_code(request::SEND_MESSAGE, &f).unwrap();
        assert!(!h.batch);
        let mut v2 = ExtFields::new();
        SendMessageRequestHeaderV2::from(sample_v1()).write(&mut v2);
        v2.insert("m", "1");
        let h = SendMessageRequestHeader::read_for_code(request::SEND_MESSAGE_V2, &v2).unwrap();
        assert!(h.batch);
    }

    #[test]
    fn response_keys() {
        let h = SendMessageResponseHeader {
            msg_id: "0A00000100002A9F0000000000001234".into(),
            queue_id: 2,
            queue_offset: QueueOffset(9),
            transaction_id: None,
        };
        let mut f = ExtFields::new();
        h.write(&mut f);
        assert_eq!(
            f.sorted(),
            [
                ("msgId", "0A00000100002A9F0000000000001234"),
                ("queueId", "2"),
                ("queueOffset", "9")
            ]
        );
        assert_eq!(SendMessageResponseHeader::read(&f), Ok(h));
    }

    proptest! {
        #[test]
        fn v1_v2_lossless(
            pg in "\\PC{0,8}", topic in "\\PC{0,8}", dqn: i32, qid: i32, sys: i32, born: i64, flag: i32,
            props in proptest::option::of("\\PC{0,16}"), rt in proptest::option::of(any::<i32>()),
            unit: bool, batch: bool, mrt in proptest::option::of(any::<i32>()),
            bname in proptest::option::of("\\PC{0,8}"),
        ) {
            let v1 = SendMessageRequestHeader {
                producer_group: pg.into(), topic: topic.into(), default_topic: "TBW102".into(),
                default_topic_queue_nums: dqn, queue_id: qid, sys_flag: MessageSysFlag(sys),
                born_timestamp: born, flag, properties: props.map(Into::into), reconsume_times: rt,
                unit_mode: unit, batch, max_reconsume_times: mrt, bname: bname.map(Into::into),
            };
            let v2 = SendMessageRequestHeaderV2::from(v1.clone());
            let mut f = ExtFields::new();
            v2.write(&mut f);
            prop_assert_eq!(SendMessageRequestHeaderV2::read(&f), Ok(v2.clone()));
            prop_assert_eq!(SendMessageRequestHeader::from(v2), v1.clone());
            let mut f1 = ExtFields::new();
            v1.write(&mut f1);
            prop_assert_eq!(SendMessageRequestHeader::read(&f1), Ok(v1));
        }

        #[test]
        fn arbitrary_fields_never_panic(
            entries in proptest::collection::vec(("[a-n]|[a-zA-Z]{1,12}", "\\PC{0,12}"), 0..20)
        ) {
            let f: ExtFields = entries.into_iter().collect();
            let _ = SendMessageRequestHeader::read_for_code(request::SEND_MESSAGE_V2, &f);
            let _ = SendMessageRequestHeader::read(&f);
            let _ = SendMessageResponseHeader::read(&f);
        }
    }
}
