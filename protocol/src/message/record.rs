//! CommitLog message record of RocketMQ 4.9 (Java
//! `store/CommitLog.java` `MessageExtEncoder` / `checkMessageAndReturnSize`,
//! `common/message/MessageDecoder.java`). The same bytes travel in pull, query and
//! view-by-id bodies.
//!
//! API:
//! * [`record_len`] — exact encoded size for a sysFlag (host families) and the three
//!   variable lengths.
//! * [`MessageRecord`] + [`StoreStamp`] — a borrowed message plus the fields the store
//!   assigns inside its write lock; [`MessageRecord::encode_into`] writes the record
//!   straight into a caller-provided slice of exactly [`MessageRecord::encoded_len`]
//!   bytes (an mmap'd segment), without allocating.
//! * [`decode`] — validates one record at the start of a slice and returns a zero-copy
//!   [`RecordView`], or a [`RecordError`] telling apart a BLANK end-of-file filler,
//!   zeroed (never written) space, a truncated record, bad magic, bad CRC and
//!   inconsistent lengths. Never panics, never allocates.
//! * [`RecordView`] accessors read fixed positions on demand, so a dispatcher asking
//!   only for topic / queue id / offsets / properties pays for nothing else.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use thiserror::Error;

use super::offset::{PhysicalOffset, QueueOffset};
use super::sysflag::MessageSysFlag;

/// MAGICCODE of a message record (`CommitLog.MESSAGE_MAGIC_CODE`).
pub const MESSAGE_MAGIC_CODE: i32 = 0xDAA3_20A7_u32 as i32;
/// MAGICCODE of the end-of-file filler (`CommitLog.BLANK_MAGIC_CODE`).
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// A BLANK header is 8 bytes; a record is only appended when at least this much room
/// stays behind it (`CommitLog.END_FILE_MIN_BLANK_LENGTH`).
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;
/// Topic length is one byte that Java reads as signed.
pub const MAX_TOPIC_LEN: usize = 127;
/// Properties length is an i16.
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;
/// Smallest possible record: IPv4 hosts, empty body, topic and properties.
pub const MIN_RECORD_LEN: usize = FIXED_LEN + 16;

/// Every field except the two hosts and the three variable-length payloads.
const FIXED_LEN: usize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 4 + 8 + 4 + 1 + 2;

const POS_MAGIC: usize = 4;
const POS_BODY_CRC: usize = 8;
const POS_QUEUE_ID: usize = 12;
const POS_FLAG: usize = 16;
const POS_QUEUE_OFFSET: usize = 20;
const POS_PHYSICAL_OFFSET: usize = 28;
const POS_SYS_FLAG: usize = 36;
const POS_BORN_TIMESTAMP: usize = 40;
const POS_BORN_HOST: usize = 48;

/// Where the fields of a record sit. Everything after BORNHOST moves with the host
/// families (`sysFlag` bits 4 and 5: an IPv6 born host is 20 bytes instead of 8, so is
/// an IPv6 store host), so every fixed-offset read of a record goes through this one
/// type instead of a hand-written constant (a 64-byte "header" read once sent recovery
/// past the end of its slice for IPv6 born hosts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLayout {
    sys_flag: MessageSysFlag,
}

impl RecordLayout {
    pub const TOTAL_SIZE: usize = 0;
    pub const MAGIC: usize = POS_MAGIC;
    pub const BODY_CRC: usize = POS_BODY_CRC;
    pub const QUEUE_ID: usize = POS_QUEUE_ID;
    pub const FLAG: usize = POS_FLAG;
    pub const QUEUE_OFFSET: usize = POS_QUEUE_OFFSET;
    pub const PHYSICAL_OFFSET: usize = POS_PHYSICAL_OFFSET;
    pub const SYS_FLAG: usize = POS_SYS_FLAG;
    pub const BORN_TIMESTAMP: usize = POS_BORN_TIMESTAMP;
    pub const BORN_HOST: usize = POS_BORN_HOST;

    pub const fn of(sys_flag: MessageSysFlag) -> Self {
        Self { sys_flag }
    }

    pub const fn sys_flag(&self) -> MessageSysFlag {
        self.sys_flag
    }

    pub const fn store_timestamp(&self) -> usize {
        POS_BORN_HOST + self.sys_flag.born_host_len()
    }

    pub const fn store_host(&self) -> usize {
        self.store_timestamp() + 8
    }

    pub const fn reconsume_times(&self) -> usize {
        self.store_host() + self.sys_flag.store_host_len()
    }

    pub const fn prepared_transaction_offset(&self) -> usize {
        self.reconsume_times() + 4
    }

    pub const fn body_len(&self) -> usize {
        self.prepared_transaction_offset() + 8
    }

    /// First body byte.
    pub const fn body(&self) -> usize {
        self.body_len() + 4
    }
}

/// The fixed fields up to and including STORETIMESTAMP of the record at the start of a
/// buffer, read without validating the rest (recovery's "is this file's first record
/// older than the checkpoint" test reads only these bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHead {
    pub total_size: i32,
    pub magic: i32,
    pub physical_offset: PhysicalOffset,
    pub sys_flag: MessageSysFlag,
    pub store_timestamp: i64,
}

/// Reads a [`RecordHead`] from the start of `buf`; `None` when `buf` is too short for
/// the head its own sysFlag implies. Never panics.
pub fn peek_head(buf: &[u8]) -> Option<RecordHead> {
    if buf.len() < POS_SYS_FLAG + 4 {
        return None;
    }
    let sys_flag = MessageSysFlag(read_i32(buf, POS_SYS_FLAG));
    let at = RecordLayout::of(sys_flag).store_timestamp();
    if buf.len() < at + 8 {
        return None;
    }
    Some(RecordHead {
        total_size: read_i32(buf, 0),
        magic: read_i32(buf, POS_MAGIC),
        physical_offset: PhysicalOffset(read_i64(buf, POS_PHYSICAL_OFFSET)),
        sys_flag,
        store_timestamp: read_i64(buf, at),
    })
}

/// Longest [`RecordHead`]: IPv6 born host.
pub const MAX_HEAD_LEN: usize = POS_BORN_HOST + 20 + 8;

/// Exact size of a record (`CommitLog.calMsgLength`); the host lengths come from the
/// IPv6 bits of `sys_flag`.
pub const fn record_len(
    sys_flag: MessageSysFlag,
    body_len: usize,
    topic_len: usize,
    properties_len: usize,
) -> usize {
    FIXED_LEN
        .saturating_add(sys_flag.born_host_len())
        .saturating_add(sys_flag.store_host_len())
        .saturating_add(body_len)
        .saturating_add(topic_len)
        .saturating_add(properties_len)
}

/// `UtilAll.crc32`: IEEE CRC32 masked to a non-negative int.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// The producer-side fields of a record, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageRecord<'a> {
    pub queue_id: i32,
    pub flag: i32,
    /// Must already carry the IPv6 bits of both hosts
    /// ([`MessageSysFlag::with_host_families`]).
    pub sys_flag: MessageSysFlag,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub reconsume_times: i32,
    /// Commit / rollback records: CommitLog offset of the half message; else 0.
    pub prepared_transaction_offset: PhysicalOffset,
    /// Stored as is (already compressed when sysFlag bit 0 is set).
    pub body: &'a [u8],
    /// [`body_crc`] of `body` when the caller computed it outside the write lock (as the
    /// Java broker does); `None` computes it while encoding.
    pub body_crc: Option<i32>,
    pub topic: &'a str,
    pub properties: &'a str,
}

/// Fields the store assigns while appending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreStamp {
    /// 0 for prepared / rollback records, which do not advance the queue.
    pub queue_offset: QueueOffset,
    /// Global offset of the record's first byte.
    pub physical_offset: PhysicalOffset,
    pub store_timestamp: i64,
    /// brokerIP1 and the main listen port.
    pub store_host: SocketAddr,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    #[error("topic of {0} bytes exceeds the {MAX_TOPIC_LEN}-byte record limit")]
    TopicTooLong(usize),
    #[error("properties of {0} bytes exceed the {MAX_PROPERTIES_LEN}-byte record limit")]
    PropertiesTooLong(usize),
    #[error("body of {0} bytes does not fit a record")]
    BodyTooLong(usize),
    #[error("sysFlag {sys_flag:#x} IPv6 bits disagree with the {which} host's address family")]
    HostFamilyMismatch { which: &'static str, sys_flag: i32 },
    #[error("output buffer is {actual} bytes, the record needs exactly {expected}")]
    BufferSize { expected: usize, actual: usize },
}

/// Why the bytes at a position are not a usable message record.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// Fewer bytes than the record (or its 8-byte header) needs: a torn write or a read
    /// window that ends mid-record.
    #[error("record needs {needed} bytes but only {available} are available")]
    Truncated { needed: usize, available: usize },
    /// The end-of-file filler: skip `size` bytes, i.e. to the next segment.
    #[error("blank end-of-file filler of {size} bytes")]
    Blank { size: usize },
    /// TOTALSIZE and MAGICCODE both 0: preallocated space that was never written.
    #[error("unwritten (zeroed) space")]
    Unwritten,
    #[error("bad magic code {0:#010x}")]
    BadMagic(i32),
    #[error("body CRC mismatch: stored {stored}, computed {computed}")]
    BadCrc { stored: i32, computed: i32 },
    #[error("invalid {field}: {value}")]
    InvalidField { field: &'static str, value: i64 },
    /// TOTALSIZE differs from the length the fields add up to (`calMsgLength`).
    #[error("total size {total_size} does not match the {computed} bytes its fields need")]
    InconsistentLength { total_size: usize, computed: usize },
    #[error("record {0} is not valid UTF-8")]
    InvalidUtf8(&'static str),
}

impl MessageRecord<'_> {
    pub fn encoded_len(&self) -> usize {
        record_len(
            self.sys_flag,
            self.body.len(),
            self.topic.len(),
            self.properties.len(),
        )
    }

    /// Writes the record into `out`, which must be exactly [`Self::encoded_len`] bytes.
    /// Nothing is written when an error is returned.
    pub fn encode_into(&self, stamp: &StoreStamp, out: &mut [u8]) -> Result<(), EncodeError> {
        self.check(stamp)?;
        let expected = self.encoded_len();
        if out.len() != expected {
            return Err(EncodeError::BufferSize {
                expected,
                actual: out.len(),
            });
        }
        let crc = self.body_crc.unwrap_or_else(|| body_crc(self.body));
        let mut w = Writer { out, pos: 0 };
        w.put(&(expected as i32).to_be_bytes());
        w.put(&MESSAGE_MAGIC_CODE.to_be_bytes());
        w.put(&crc.to_be_bytes());
        w.put(&self.queue_id.to_be_bytes());
        w.put(&self.flag.to_be_bytes());
        w.put(&stamp.queue_offset.0.to_be_bytes());
        w.put(&stamp.physical_offset.0.to_be_bytes());
        w.put(&self.sys_flag.0.to_be_bytes());
        w.put(&self.born_timestamp.to_be_bytes());
        w.host(&self.born_host);
        w.put(&stamp.store_timestamp.to_be_bytes());
        w.host(&stamp.store_host);
        w.put(&self.reconsume_times.to_be_bytes());
        w.put(&self.prepared_transaction_offset.0.to_be_bytes());
        w.put(&(self.body.len() as i32).to_be_bytes());
        w.put(self.body);
        w.put(&[self.topic.len() as u8]);
        w.put(self.topic.as_bytes());
        w.put(&(self.properties.len() as i16).to_be_bytes());
        w.put(self.properties.as_bytes());
        debug_assert_eq!(w.pos, expected);
        Ok(())
    }

    /// Convenience for callers that do not write into a mapped segment.
    pub fn encode_to_vec(&self, stamp: &StoreStamp) -> Result<Vec<u8>, EncodeError> {
        self.check(stamp)?;
        let mut out = vec![0; self.encoded_len()];
        self.encode_into(stamp, &mut out)?;
        Ok(out)
    }

    fn check(&self, stamp: &StoreStamp) -> Result<(), EncodeError> {
        if self.topic.len() > MAX_TOPIC_LEN {
            return Err(EncodeError::TopicTooLong(self.topic.len()));
        }
        if self.properties.len() > MAX_PROPERTIES_LEN {
            return Err(EncodeError::PropertiesTooLong(self.properties.len()));
        }
        // The whole record, not only the body, must fit TOTALSIZE's i32.
        if self.body.len()
            > i32::MAX as usize - (MIN_RECORD_LEN + 24 + MAX_TOPIC_LEN + MAX_PROPERTIES_LEN)
        {
            return Err(EncodeError::BodyTooLong(self.body.len()));
        }
        if self.sys_flag.born_host_v6() != self.born_host.is_ipv6() {
            return Err(EncodeError::HostFamilyMismatch {
                which: "born",
                sys_flag: self.sys_flag.0,
            });
        }
        if self.sys_flag.store_host_v6() != stamp.store_host.is_ipv6() {
            return Err(EncodeError::HostFamilyMismatch {
                which: "store",
                sys_flag: self.sys_flag.0,
            });
        }
        Ok(())
    }
}

/// Sequential writer over a slice whose length was checked against the record length
/// up front, so the slice indexing below cannot go out of bounds.
struct Writer<'a> {
    out: &'a mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.out[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }

    fn host(&mut self, addr: &SocketAddr) {
        match addr.ip() {
            IpAddr::V4(ip) => self.put(&ip.octets()),
            IpAddr::V6(ip) => self.put(&ip.octets()),
        }
        self.put(&i32::from(addr.port()).to_be_bytes());
    }
}

/// A validated record borrowed from its backing bytes. Fixed fields are read on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Exactly TOTALSIZE bytes.
    bytes: &'a [u8],
    sys_flag: MessageSysFlag,
    body_pos: usize,
    body_len: usize,
    topic: &'a str,
    properties: &'a str,
}

/// Where the variable-length fields of a record lie, every length checked against the
/// record's TOTALSIZE; nothing inside them is validated yet.
struct Located<'a> {
    bytes: &'a [u8],
    sys_flag: MessageSysFlag,
    layout: RecordLayout,
    body_pos: usize,
    body_len: usize,
    topic_pos: usize,
    props_len_pos: usize,
    props_pos: usize,
}

/// Validates the record at the start of `buf` (see the module docs for the outcomes).
/// `check_crc` recomputes the body CRC, as recovery does with `checkCRCOnRecover`.
pub fn decode(buf: &[u8], check_crc: bool) -> Result<RecordView<'_>, RecordError> {
    let Located {
        bytes,
        sys_flag,
        layout,
        body_pos,
        body_len,
        topic_pos,
        props_len_pos,
        props_pos,
    } = locate(buf)?;
    let total = bytes.len();
    let topic = std::str::from_utf8(&bytes[topic_pos..props_len_pos])
        .map_err(|_| RecordError::InvalidUtf8("topic"))?;
    let properties = std::str::from_utf8(&bytes[props_pos..total])
        .map_err(|_| RecordError::InvalidUtf8("properties"))?;
    for (pos, v6, field) in [
        (POS_BORN_HOST, sys_flag.born_host_v6(), "bornHost port"),
        (
            layout.store_host(),
            sys_flag.store_host_v6(),
            "storeHost port",
        ),
    ] {
        let port = read_i32(bytes, pos + if v6 { 16 } else { 4 });
        if u16::try_from(port).is_err() {
            return Err(RecordError::InvalidField {
                field,
                value: port.into(),
            });
        }
    }
    let view = RecordView {
        bytes,
        sys_flag,
        body_pos,
        body_len,
        topic,
        properties,
    };
    if check_crc {
        let computed = body_crc(view.body());
        let stored = view.body_crc();
        if computed != stored {
            return Err(RecordError::BadCrc { stored, computed });
        }
    }
    Ok(view)
}

/// The raw properties of the record at the start of `buf`, found with the same length
/// checks as [`decode`] but without its UTF-8 and host checks: the SQL92 pull filter reads
/// properties of every scanned record and decodes only the few values its selector names.
pub fn properties_of(buf: &[u8]) -> Result<&[u8], RecordError> {
    let located = locate(buf)?;
    Ok(&located.bytes[located.props_pos..])
}

fn locate(buf: &[u8]) -> Result<Located<'_>, RecordError> {
    let available = buf.len();
    if available < 4 {
        return Err(RecordError::Truncated {
            needed: 4,
            available,
        });
    }
    let total_size = read_i32(buf, 0);
    if available < END_FILE_MIN_BLANK_LENGTH {
        return Err(if total_size == 0 {
            RecordError::Unwritten
        } else {
            RecordError::Truncated {
                needed: END_FILE_MIN_BLANK_LENGTH,
                available,
            }
        });
    }
    match read_i32(buf, POS_MAGIC) {
        MESSAGE_MAGIC_CODE => {}
        BLANK_MAGIC_CODE => {
            return if total_size >= END_FILE_MIN_BLANK_LENGTH as i32 {
                Err(RecordError::Blank {
                    size: total_size as usize,
                })
            } else {
                Err(RecordError::InvalidField {
                    field: "blank totalSize",
                    value: total_size.into(),
                })
            };
        }
        0 if total_size == 0 => return Err(RecordError::Unwritten),
        magic => return Err(RecordError::BadMagic(magic)),
    }
    if total_size < MIN_RECORD_LEN as i32 {
        return Err(RecordError::InvalidField {
            field: "totalSize",
            value: total_size.into(),
        });
    }
    let total = total_size as usize;
    if total > available {
        return Err(RecordError::Truncated {
            needed: total,
            available,
        });
    }
    let bytes = &buf[..total];
    let sys_flag = MessageSysFlag(read_i32(bytes, POS_SYS_FLAG));
    let min_len = record_len(sys_flag, 0, 0, 0);
    if total < min_len {
        return Err(RecordError::InconsistentLength {
            total_size: total,
            computed: min_len,
        });
    }
    let layout = RecordLayout::of(sys_flag);
    let body_len_pos = layout.body_len();
    // Each length is checked against the bytes left before it is used, so a corrupt
    // length reports inconsistency instead of reading past the record.
    let body_len = read_i32(bytes, body_len_pos);
    let inconsistent = |computed: usize| RecordError::InconsistentLength {
        total_size: total,
        computed,
    };
    if body_len < 0 {
        return Err(RecordError::InvalidField {
            field: "bodyLength",
            value: body_len.into(),
        });
    }
    let body_pos = body_len_pos + 4;
    let body_len = body_len as usize;
    let topic_len_pos = body_pos + body_len;
    if topic_len_pos + 1 + 2 > total {
        return Err(inconsistent(record_len(sys_flag, body_len, 0, 0)));
    }
    let topic_len = usize::from(bytes[topic_len_pos]);
    let topic_pos = topic_len_pos + 1;
    let props_len_pos = topic_pos + topic_len;
    if props_len_pos + 2 > total {
        return Err(inconsistent(record_len(sys_flag, body_len, topic_len, 0)));
    }
    let props_len = read_i16(bytes, props_len_pos);
    if props_len < 0 {
        return Err(RecordError::InvalidField {
            field: "propertiesLength",
            value: props_len.into(),
        });
    }
    let props_len = props_len as usize;
    let computed = record_len(sys_flag, body_len, topic_len, props_len);
    if computed != total {
        return Err(inconsistent(computed));
    }
    Ok(Located {
        bytes,
        sys_flag,
        layout,
        body_pos,
        body_len,
        topic_pos,
        props_len_pos,
        props_pos: props_len_pos + 2,
    })
}

impl<'a> RecordView<'a> {
    /// The whole record, TOTALSIZE bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn total_size(&self) -> usize {
        self.bytes.len()
    }

    pub fn body_crc(&self) -> i32 {
        read_i32(self.bytes, POS_BODY_CRC)
    }

    pub fn queue_id(&self) -> i32 {
        read_i32(self.bytes, POS_QUEUE_ID)
    }

    pub fn flag(&self) -> i32 {
        read_i32(self.bytes, POS_FLAG)
    }

    pub fn queue_offset(&self) -> QueueOffset {
        QueueOffset(read_i64(self.bytes, POS_QUEUE_OFFSET))
    }

    pub fn physical_offset(&self) -> PhysicalOffset {
        PhysicalOffset(read_i64(self.bytes, POS_PHYSICAL_OFFSET))
    }

    pub fn sys_flag(&self) -> MessageSysFlag {
        self.sys_flag
    }

    pub fn born_timestamp(&self) -> i64 {
        read_i64(self.bytes, POS_BORN_TIMESTAMP)
    }

    pub fn born_host(&self) -> SocketAddr {
        read_host(self.bytes, POS_BORN_HOST, self.sys_flag.born_host_v6())
    }

    fn layout(&self) -> RecordLayout {
        RecordLayout::of(self.sys_flag)
    }

    pub fn store_timestamp(&self) -> i64 {
        read_i64(self.bytes, self.layout().store_timestamp())
    }

    pub fn store_host(&self) -> SocketAddr {
        read_host(
            self.bytes,
            self.layout().store_host(),
            self.sys_flag.store_host_v6(),
        )
    }

    /// Raw store host bytes (address then i32 port), the prefix of the offset msgId.
    pub fn store_host_bytes(&self) -> &'a [u8] {
        let pos = self.layout().store_host();
        &self.bytes[pos..pos + self.sys_flag.store_host_len()]
    }

    pub fn reconsume_times(&self) -> i32 {
        read_i32(self.bytes, self.layout().reconsume_times())
    }

    pub fn prepared_transaction_offset(&self) -> PhysicalOffset {
        PhysicalOffset(read_i64(
            self.bytes,
            self.layout().prepared_transaction_offset(),
        ))
    }

    /// The body as stored (compressed when `sys_flag().is_compressed()`).
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[self.body_pos..self.body_pos + self.body_len]
    }

    pub fn topic(&self) -> &'a str {
        self.topic
    }

    /// The raw properties string.
    pub fn properties(&self) -> &'a str {
        self.properties
    }

    /// The producer-side fields, e.g. to re-store this message elsewhere (retry, delay
    /// delivery, transaction commit) after changing some of them.
    pub fn to_message_record(&self) -> MessageRecord<'a> {
        MessageRecord {
            queue_id: self.queue_id(),
            flag: self.flag(),
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp(),
            born_host: self.born_host(),
            reconsume_times: self.reconsume_times(),
            prepared_transaction_offset: self.prepared_transaction_offset(),
            body: self.body(),
            body_crc: Some(self.body_crc()),
            topic: self.topic,
            properties: self.properties,
        }
    }

    pub fn store_stamp(&self) -> StoreStamp {
        StoreStamp {
            queue_offset: self.queue_offset(),
            physical_offset: self.physical_offset(),
            store_timestamp: self.store_timestamp(),
            store_host: self.store_host(),
        }
    }
}

/// Walks back-to-back records (a pull / query body, or a CommitLog read window).
/// Stops after the first error, which it yields once.
pub fn records(buf: &[u8], check_crc: bool) -> Records<'_> {
    Records {
        rest: buf,
        check_crc,
    }
}

pub struct Records<'a> {
    rest: &'a [u8],
    check_crc: bool,
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RecordView<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match decode(self.rest, self.check_crc) {
            Ok(view) => {
                self.rest = &self.rest[view.total_size()..];
                Some(Ok(view))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

// Callers pass positions inside a slice already checked to be long enough.
fn read_i16(b: &[u8], pos: usize) -> i16 {
    i16::from_be_bytes([b[pos], b[pos + 1]])
}

fn read_i32(b: &[u8], pos: usize) -> i32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[pos..pos + 4]);
    i32::from_be_bytes(a)
}

fn read_i64(b: &[u8], pos: usize) -> i64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[pos..pos + 8]);
    i64::from_be_bytes(a)
}

/// The port was range-checked by [`decode`]; the cast keeps its low 16 bits.
fn read_host(b: &[u8], pos: usize, v6: bool) -> SocketAddr {
    if v6 {
        let mut a = [0; 16];
        a.copy_from_slice(&b[pos..pos + 16]);
        SocketAddr::new(Ipv6Addr::from(a).into(), read_i32(b, pos + 16) as u16)
    } else {
        let a = [b[pos], b[pos + 1], b[pos + 2], b[pos + 3]];
        SocketAddr::new(Ipv4Addr::from(a).into(), read_i32(b, pos + 4) as u16)
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
