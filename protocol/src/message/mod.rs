//! Message codec: the stored record layout, properties, batch bodies, message ids,
//! tag hashes, sysFlag bits and body decompression.

pub mod batch;
pub mod compress;
pub mod msg_id;
pub mod offset;
pub mod properties;
pub mod record;
pub mod sysflag;
pub mod tag;

pub use msg_id::{UniqKey, UniqKeyGenerator, offset_msg_id, parse_offset_msg_id};
pub use offset::{ConsumerOffset, PhysicalOffset, QueueOffset};
pub use properties::Properties;
pub use record::{
    BLANK_MAGIC_CODE, EncodeError, MAX_HEAD_LEN, MESSAGE_MAGIC_CODE, MessageRecord, RecordError,
    RecordHead, RecordLayout, RecordView, StoreStamp, decode, peek_head, record_len,
};
pub use sysflag::{CompressionType, MessageSysFlag, PullSysFlag, TransactionType};
pub use tag::{java_string_hash, tags_code};
